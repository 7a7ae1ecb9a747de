"""The plane's own clients reach its API server without a socket: an httpx transport that calls the server.

The scheduler, the node agent, the Job and JobSet controllers and the embedded operator live in
the process that serves the API. Over HTTPS each of their requests paid twice for what a network
needs and a function call does not (TLS, HTTP/1.1 framing and connection pooling, on both ends):
about two fifths of the plane's CPU in a sweep of many jobs (``bench/jobs.py``). kube-apiserver
has the same idea for its own controllers (the loopback client); here the request still goes
through lightkube and httpx on the client side and through the server's authentication and
``ApiServer.handle`` (admission, field managers, errors as ``Status``) on the other, so a
component cannot tell, and the one on a real cluster runs the same code over the network.

Streams (watches, logs, exec) write to their connection as they go: they stay on the network
transport this one wraps, as do requests for other hosts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from urllib.parse import parse_qsl

import httpx2
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from trainyard.cluster.apiserver import auth
from trainyard.cluster.apiserver.requests.incoming import ApiRequest
from trainyard.cluster.apiserver.requests.query import flag

Handler = Callable[[ApiRequest], Awaitable[web.StreamResponse]]

# Subresources answered by writing to the connection as the answer goes (``connect.STREAMING`` and logs).
STREAMED = frozenset({"log", "exec", "attach", "portforward", "proxy"})


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def iter_any(self) -> AsyncIterator[bytes]:
        if self._data:
            yield self._data


class LoopbackRequest:
    """An httpx request as the API server reads a request (``ApiRequest``)."""

    def __init__(self, request: httpx2.Request, body: bytes) -> None:
        url = request.url
        self.method = request.method
        self.path = url.path
        self.path_qs = url.raw_path.decode("ascii", "replace")
        self.query = MultiDictProxy(MultiDict(parse_qsl(url.query.decode("ascii", "replace"), keep_blank_values=True)))
        self.headers = CIMultiDictProxy(CIMultiDict(request.headers.multi_items()))
        raw_type = self.headers.get("Content-Type")
        # as aiohttp reads it: the media type alone, lower case; none is octet-stream
        self.content_type = raw_type.partition(";")[0].strip().lower() if raw_type else "application/octet-stream"
        self.content_length = len(body)
        self.content = _Body(body)


class Loopback:
    """The API server's handler behind the same bearer-token check its HTTP listener applies."""

    def __init__(self, handle: Handler, host: str, port: Callable[[], int], token: str | None) -> None:
        self._handle = handle
        self._host = host
        self._port = port
        self._token = token.encode() if token is not None else None

    def transport(self, network: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        """A transport that serves this server's requests in-process and sends the rest to ``network``."""
        return LoopbackTransport(self, network)

    def serves(self, request: httpx2.Request) -> bool:
        url = request.url
        if url.host != self._host or (url.port or (443 if url.scheme == "https" else 80)) != self._port():
            return False
        query = url.query
        if (b"watch" in query or b"follow" in query) and any(
            flag(value) for key, value in parse_qsl(query.decode("ascii", "replace")) if key in ("watch", "follow")
        ):
            return False
        return url.path.rstrip("/").rpartition("/")[2] not in STREAMED

    async def send(self, request: httpx2.Request) -> httpx2.Response:
        # A round trip over a socket gives the event loop a turn; without one, a component sending
        # requests in a row would have the loop to itself, and kubectl or a watch would wait for it.
        await asyncio.sleep(0)
        body = await request.aread()
        incoming = LoopbackRequest(request, body)
        header = incoming.headers.get("Authorization")
        if self._token is not None and not auth.admits(header, incoming.path, self._token):
            response: web.StreamResponse = auth.unauthorized()
        else:
            response = await self._handle(incoming)
        if not isinstance(response, web.Response) or not isinstance(response.body, bytes | bytearray | None):
            raise RuntimeError(f"{request.method} {incoming.path_qs} answered with a body only HTTP can carry")
        return httpx2.Response(
            response.status,
            headers=list(response.headers.items()),
            content=bytes(response.body or b""),
            request=request,
        )


class LoopbackTransport(httpx2.AsyncBaseTransport):
    def __init__(self, loopback: Loopback, network: httpx2.AsyncBaseTransport) -> None:
        self.loopback = loopback
        self.network = network

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.loopback.serves(request):
            return await self.loopback.send(request)
        return await self.network.handle_async_request(request)

    async def aclose(self) -> None:
        await self.network.aclose()
