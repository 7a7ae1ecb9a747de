"""The plane's own clients reach its API server without a socket: an httpx transport that calls the server.

The scheduler, the node agent, the Job and JobSet controllers and the embedded operator live in
the process that serves the API. Over HTTPS each of their requests paid twice for what a network
needs and a function call does not (TLS, HTTP/1.1 framing and connection pooling, on both ends):
about two fifths of the plane's CPU in a sweep of many jobs (``bench/jobs.py``). kube-apiserver
has the same idea for its own controllers (the loopback client); here the request still goes
through lightkube on the client side and through the server's authentication and
``ApiServer.handle`` (admission, field managers, errors as ``Status``) on the other, so a
component cannot tell, and the one on a real cluster runs the same code over the network.
A request (not a list, watch or stream) skips httpx too: lightkube's prepared request reaches
``Loopback.call`` as a ``trainyard.client.transport.Call`` (``Client.direct``), since httpx's request and
response objects were a third of its CPU; everything else comes through the httpx transport.

A watch is served in-process too: the server's handler runs as a task of its own and writes
its lines into a ``Pipe`` that the client reads as the response body (about a tenth of the
plane's CPU in that sweep went to TLS and HTTP framing of watch events, on both ends). A client
watch that asks for objects (``trainyard.client.watches.WATCH_OBJECTS``, a request extension, which no
network transport sends) gets each event decoded (the change's one decoding, shared with its other
readers in this process, none of which changes it) instead of a line to parse. A log read
whole is an answer like any other; a followed log, exec and the other streams write to a real
connection: they stay on the network transport this one wraps, as do requests for other hosts.
"""

from __future__ import annotations

import asyncio
import functools
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import httpx2
from aiohttp import web
from multidict import CIMultiDict, CIMultiDictProxy, MultiDict, MultiDictProxy

from trainyard.client.transport import Answer, Call
from trainyard.client.watches import LEAN, WATCH_OBJECTS
from trainyard.cluster.server.apiserver import auth
from trainyard.cluster.server.apiserver.precedence import STREAMED, Precedence
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest, Outgoing
from trainyard.cluster.server.apiserver.requests.query import flag
from trainyard.cluster.server.storage.watch import Transport
from trainyard.cluster.tasks import cancel_all

Handler = Callable[[ApiRequest], Awaitable[web.StreamResponse]]


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    async def iter_any(self) -> AsyncIterator[bytes]:
        if self._data:
            yield self._data


class Pipe(httpx2.AsyncByteStream):
    """A watch's answer on its way from the server's handler to the client in this process.

    The server side writes as it would to a socket (``storage.watch.Transport``: the hub's sink
    writes to it directly), the client reads it as httpx reads a response body. Like a socket it
    buffers what the reader has not taken yet (``get_write_buffer_size``, so the hub cuts off a
    reader that falls behind, as it would a slow connection) and ``abort`` makes the reader's
    next read fail, as a reset connection does; the reader then resumes its watch.
    """

    def __init__(self, *, objects: str | None = None) -> None:
        self._chunks: deque[Any] = deque()  # bytes; and (type, object) events when ``carries_objects``
        self._size = 0
        self._ready = asyncio.Event()
        self._ended = False
        self._aborted = False
        self.on_close: Callable[[], object] = lambda: None  # the reader is done: stop the writer
        # The reader (``trainyard.client.watches``'s watch) asked for events as objects (``WHOLE`` or
        # ``LEAN``, without managedFields): it reads ``items``.
        self.carries_objects = objects is not None
        self.lean = objects == LEAN

    # the server's side
    def write(self, data: bytes) -> None:
        if self._ended or self._aborted:
            return
        self._chunks.append(data)
        self._size += len(data)
        self._ready.set()

    def put(self, item: tuple[str, dict[str, Any]], size: int) -> None:
        """One watch event as an object, the reader's own (``storage.watch.ObjectSink``)."""
        if self._ended or self._aborted:
            return
        self._chunks.append(item)
        self._size += size
        self._ready.set()

    def is_closing(self) -> bool:
        return self._ended or self._aborted

    def get_write_buffer_size(self) -> int:
        return self._size

    def abort(self) -> None:
        self._aborted = True
        self._chunks.clear()
        self._size = 0
        self._ready.set()

    def end(self) -> None:
        """The handler has returned: the reader gets what is buffered, then the end of the body."""
        self._ended = True
        self._ready.set()

    # the client's side
    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for batch in self.items():
            yield b"".join(batch)

    async def items(self) -> AsyncIterator[list[Any]]:
        """For a reader that asked for objects: what was written since its last turn, in order,
        each a chunk of whole lines (bytes) or a ``(type, object)`` event."""
        while True:
            if self._chunks:
                batch = list(self._chunks)
                self._chunks.clear()
                self._size = 0
                yield batch
            elif self._aborted:
                raise httpx2.ReadError("the API server cut this watch off (its reader fell behind)")
            elif self._ended:
                return
            else:
                self._ready.clear()
                await self._ready.wait()

    async def aclose(self) -> None:
        self._ended = True
        self._chunks.clear()
        self._size = 0
        self.on_close()


class LocalOut:
    """``Outgoing`` for a watch asked in-process: its headers resolve ``started``, its lines go into ``pipe``."""

    chunked = False

    def __init__(self, pipe: Pipe) -> None:
        self.pipe = pipe
        self.started: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()

    @property
    def transport(self) -> Transport:
        return self.pipe

    async def start(self, headers: Mapping[str, str]) -> None:
        if not self.started.done():
            self.started.set_result(dict(headers))

    async def write(self, data: bytes) -> None:
        self.pipe.write(data)
        # a socket's write would let the reader run once the buffer fills; this lets it run every time
        await asyncio.sleep(0)

    def answer(self) -> web.StreamResponse:
        return web.StreamResponse()  # nobody reads it: the answer went through the pipe


def _media_type(headers: CIMultiDictProxy[str]) -> str:
    """The Content-Type as aiohttp reads it: the media type alone, lower case; none is octet-stream."""
    raw = headers.get("Content-Type")
    return raw.partition(";")[0].strip().lower() if raw else "application/octet-stream"


class LoopbackRequest:
    """An httpx request as the API server reads a request (``ApiRequest``); ``outgoing`` for a watch."""

    def __init__(self, request: httpx2.Request, body: bytes, outgoing: Outgoing | None = None) -> None:
        self.outgoing = outgoing
        url = request.url
        self.method = request.method
        self.path = url.path
        self.path_qs = url.raw_path.decode("ascii", "replace")
        self.query = MultiDictProxy(MultiDict(parse_qsl(url.query.decode("ascii", "replace"), keep_blank_values=True)))
        self.headers = CIMultiDictProxy(CIMultiDict(request.headers.multi_items()))
        self.content_type = _media_type(self.headers)
        self.content_length = len(body)
        self.content = _Body(body)


class CallRequest:
    """A ``Call`` (``trainyard.client.transport``: a request sent in-process without HTTP) as the API
    server reads a request."""

    outgoing = None

    def __init__(self, call: Call, headers: CIMultiDictProxy[str]) -> None:
        self.method = call.method
        self.path = call.path
        self.query = MultiDictProxy(MultiDict(call.query))
        self.path_qs = call.path + ("?" + "&".join(f"{k}={v}" for k, v in call.query) if call.query else "")
        self.headers = headers
        self.content_type = _media_type(headers)
        self.content_length = len(call.body)
        self.content = _Body(call.body)


# A client sends the same few sets of headers (its own, with each content type): each is read once.
HEADER_SETS = 64


class Loopback:
    """The API server's handler behind the same bearer-token check its HTTP listener applies."""

    def __init__(
        self,
        handle: Handler,
        host: str,
        port: Callable[[], int],
        token: str | None,
        precedence: Precedence,
    ) -> None:
        self._handle = handle
        self._precedence = precedence
        self._host = host
        self._port = port
        self._token = token.encode() if token is not None else None
        self._watches: set[asyncio.Future[web.StreamResponse]] = set()
        self._header_sets: dict[tuple[tuple[str, str], ...], CIMultiDictProxy[str]] = {}

    async def close(self) -> None:
        """End the watches served in-process (their readers see the end of the body, as at a server's shutdown)."""
        await cancel_all(self._watches)

    def transport(self, network: httpx2.AsyncBaseTransport) -> httpx2.AsyncBaseTransport:
        """A transport that serves this server's requests in-process and sends the rest to ``network``."""
        return LoopbackTransport(self, network)

    def _watch_ended(self, pipe: Pipe, task: asyncio.Future[web.StreamResponse]) -> None:
        self._watches.discard(task)
        pipe.end()

    def serves(self, request: httpx2.Request) -> bool:
        url = request.url
        if url.host != self._host or (url.port or (443 if url.scheme == "https" else 80)) != self._port():
            return False
        if b"follow" in url.query and _asks(url, "follow"):
            return False
        # A log read whole is one answer (the dashboard's history reads each ended container's);
        # followed, it and the other streams need a connection.
        last = url.path.rstrip("/").rpartition("/")[2]
        return last == "log" or last not in STREAMED

    async def send(self, request: httpx2.Request) -> httpx2.Response:
        # A round trip over a socket gives the event loop a turn; without one, a component sending
        # requests in a row would have the loop to itself, and kubectl or a watch would wait for it.
        # Network requests being served go first (``precedence``).
        await asyncio.sleep(0)
        await self._precedence.turn()
        body = await request.aread()
        watching = request.method == "GET" and b"watch" in request.url.query and _asks(request.url, "watch")
        out = LocalOut(Pipe(objects=request.extensions.get(WATCH_OBJECTS))) if watching else None
        incoming = LoopbackRequest(request, body, out)
        if out is None:
            answer = await self._whole(incoming)
        elif not self._admits(incoming):
            answer = _answer_of(incoming, auth.unauthorized())
        else:
            # The handler runs for as long as the watch does; the client has its answer once the
            # headers are out, or the handler's own answer when it refused before starting.
            task = asyncio.ensure_future(self._handle(incoming))
            self._watches.add(task)
            out.pipe.on_close = task.cancel
            task.add_done_callback(functools.partial(self._watch_ended, out.pipe))
            try:
                await asyncio.wait((task, out.started), return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:
                task.cancel()
                raise
            if out.started.done():
                headers = list(out.started.result().items())
                extensions = {WATCH_OBJECTS: out.pipe} if out.pipe.carries_objects else {}
                return httpx2.Response(200, headers=headers, stream=out.pipe, request=request, extensions=extensions)
            answer = _answer_of(incoming, task.result())
        return httpx2.Response(answer.status, headers=answer.headers, content=answer.body, request=request)

    async def call(self, call: Call) -> Answer:
        """Serve a request sent without HTTP (``trainyard.client.transport.Client.direct``), behind the
        same token check.

        Only what ``send`` serves comes this way: a client sends its lists, watches, logs and exec
        through httpx (``Client``), so every answer here is whole.
        """
        await asyncio.sleep(0)  # a turn for the loop, and network requests first, as in ``send``
        await self._precedence.turn()
        headers = self._header_sets.get(call.headers)
        if headers is None:
            if len(self._header_sets) >= HEADER_SETS:
                self._header_sets.clear()
            headers = self._header_sets[call.headers] = CIMultiDictProxy(CIMultiDict(call.headers))
        return await self._whole(CallRequest(call, headers))

    def _admits(self, incoming: ApiRequest) -> bool:
        return self._token is None or auth.admits(incoming.headers.get("Authorization"), incoming.path, self._token)

    async def _whole(self, incoming: ApiRequest) -> Answer:
        """The answer to a request that is not a watch, behind the token check."""
        return _answer_of(incoming, await self._handle(incoming) if self._admits(incoming) else auth.unauthorized())


def _answer_of(incoming: ApiRequest, response: web.StreamResponse) -> Answer:
    """A whole answer (status, headers, body) from the handler's response."""
    if not isinstance(response, web.Response) or not isinstance(response.body, bytes | bytearray | None):
        raise RuntimeError(f"{incoming.method} {incoming.path_qs} answered with a body only HTTP can carry")
    return Answer(response.status, list(response.headers.items()), bytes(response.body or b""))


def _asks(url: httpx2.URL, key: str) -> bool:
    return any(flag(value) for k, value in parse_qsl(url.query.decode("ascii", "replace")) if k == key)


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
