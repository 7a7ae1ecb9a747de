"""How the client's requests travel: ``Client``, lightkube's AsyncClient with a watch pool of its
own, idle connections kept, URLs built once and an in-process route to a server in this process
(``Call`` and ``Answer``); the in-place wrapping of the transports lightkube built; and ``delete``,
the one request lightkube's own verbs cannot send (a delete with a body).

This is the one module that reaches into lightkube's and httpx's private attributes, and each
reach is checked where it is made, so a change in either library fails at start.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.core.generic_client import BasicRequest, GenericAsyncClient, json_encode

from trainyard.client.resources import is_status
from trainyard.client.watches import watch_lines

KEEPALIVE_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Call:
    """One API request handed to a server in this process (``Client.direct``): what the server reads
    of an HTTP request, without the HTTP. ``headers`` are the client's own (its credentials, its
    User-Agent) and the body's Content-Type; a tuple, so a server can keep what it builds from them."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: tuple[tuple[str, str], ...]
    body: bytes
    host: str  # the server's host:port, as a metric names it


@dataclass(frozen=True, slots=True)
class Answer:
    """A server's answer to a ``Call``: status, headers and the whole body."""

    status: int
    headers: Sequence[tuple[str, str]]
    body: bytes

    @property
    def content(self) -> bytes:  # what lightkube reads of a response
        return self.body

    def raise_for_status(self) -> None:
        """Nothing to raise: an error status never reaches lightkube as an Answer (``Client.send_prepared``)."""


Direct = Callable[[Call], Awaitable[Answer]]


class Client(AsyncClient):
    """lightkube's AsyncClient whose watches have a connection pool of their own, and whose requests
    may go to a server in this process without HTTP (``direct``).

    httpx's pool visits each of its connections twice per request; a process that keeps dozens of
    watches open (every informer holds one) would pay for all of them on every GET or PATCH. Watches
    start rarely, so they get the second pool and requests keep theirs to themselves.

    ``direct``, when set (``route_directly``), serves every request lightkube sends through its
    request pipeline (get, create, patch, replace, delete, apply; not lists, watches, logs or exec,
    which stay on httpx and its transports): lightkube still prepares the request and decodes the
    answer, and an error comes back as the same ``ApiError``. httpx's request and response objects
    were over a third of such a request's CPU, and the plane's own components send dozens per job.
    Its watches split their streams into lines as bytes (``watches.watch_lines``), not through httpx's
    text decoding, which cost an informer as much as decoding the events themselves.
    """

    def __init__(self, config: Any, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        self.watches = AsyncClient(config, **kwargs)
        self.direct: Direct | None = None
        self._headers: dict[str | None, tuple[tuple[str, str], ...]] = {}
        # httpx keeps 20 idle connections for 5 s and closes the rest: after every burst of requests
        # (a sweep's pods starting together) the next one would pay a TLS handshake per connection,
        # on both ends. Keep as many idle as may be open, for a minute (servers keep them longer).
        # (Private attributes of httpx's pool: where they moved, the defaults simply stay.)
        pool: Any = getattr(getattr(getattr(self._client, "_client", None), "_transport", None), "_pool", None)
        if hasattr(pool, "_max_keepalive_connections") and hasattr(pool, "_max_connections"):
            pool._max_keepalive_connections = pool._max_connections
            pool._keepalive_expiry = KEEPALIVE_SECONDS
        http = getattr(self._client, "_client", None)
        if isinstance(http, httpx2.AsyncClient):
            http.build_request = UrlMemo(http.build_request, lambda: bool(http.params))  # type: ignore[method-assign]
        # Every lightkube AsyncClient method but list, watch, log and exec sends through its
        # adapter's ``request``: the one place a request can be taken off httpx.
        adapter = self._client
        if not isinstance(adapter, GenericAsyncClient):
            raise TypeError(
                "lightkube.AsyncClient no longer keeps its GenericAsyncClient at ._client (check the pinned lightkube)"
            )
        self._lightkube_request = adapter.request
        adapter.request = self._request  # type: ignore[method-assign]
        watching: Any = self.watches._client
        if not isinstance(watching, GenericAsyncClient):
            raise TypeError("lightkube.AsyncClient no longer keeps its GenericAsyncClient at ._client")
        watching.watch = functools.partial(watch_lines, watching)  # type: ignore[method-assign]

    def watch(self, *args: Any, **kwargs: Any) -> Any:
        return self.watches.watch(*args, **kwargs)

    async def close(self) -> None:
        await self.watches.close()
        await super().close()

    async def _request(
        self,
        method: str,
        res: Any = None,
        obj: Any = None,
        name: str | None = None,
        namespace: str | None = None,
        watch: bool = False,
        headers: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
    ) -> Any:
        if self.direct is None or watch:
            return await self._lightkube_request(method, res, obj, name, namespace, watch, headers, params)
        adapter: Any = self._client
        request = adapter.prepare_request(method, res, obj, name, namespace, watch, headers=headers, params=params)
        return adapter.handle_response(method, await self.send_prepared(request), request)

    async def send_prepared(self, request: BasicRequest) -> Any:
        """Send a request lightkube prepared (``prepare_request``): in-process when ``direct`` is set,
        else through httpx; an error status raises lightkube's ``ApiError`` either way. The answer
        has ``content`` and ``raise_for_status``, for lightkube's ``handle_response``."""
        adapter: Any = self._client
        if self.direct is None:
            return await adapter.send(adapter.build_adapter_request(request))
        http: httpx2.AsyncClient = adapter._client
        body = json_encode(request.data) if request.data is not None else b""
        content_type = (request.headers or {}).get("Content-Type")
        if content_type is None and request.data is not None:
            content_type = "application/json"  # as lightkube's build_adapter_request
        query = tuple((key, text) for key, value in (request.params or {}).items() for text in _query_values(value))
        base = http.base_url
        call = Call(
            request.method,
            base.path.rstrip("/") + "/" + request.url,
            query,
            await self._client_headers(content_type),
            body,
            base.netloc.decode("ascii"),
        )
        answer = await self.direct(call)
        if answer.status >= 400:
            # lightkube's own error from the same response it would have read over HTTP
            url = httpx2.URL(base.copy_with(path=call.path), params=list(query))
            response = httpx2.Response(
                answer.status, headers=answer.headers, content=answer.body, request=httpx2.Request(call.method, url)
            )
            adapter.raise_for_status(response)
        return answer

    async def _client_headers(self, content_type: str | None) -> tuple[tuple[str, str], ...]:
        """The headers httpx would send (its defaults, then the auth's), once per content type.

        Kept, not recomputed: ``direct`` serves only the plane's own clients, whose credentials are
        the plane's (a fixed token or none); an auth that refreshes would go stale here.
        """
        known = self._headers.get(content_type)
        if known is None:
            adapter: Any = self._client
            http: httpx2.AsyncClient = adapter._client
            extra = {"Content-Type": content_type} if content_type else {}
            request = http.build_request("GET", http.base_url, headers=extra)
            if http.auth is not None:
                flow = http.auth.async_auth_flow(request)
                try:
                    request = await flow.__anext__()
                finally:
                    await flow.aclose()
            known = self._headers[content_type] = tuple(request.headers.items())
        return known


def _query_values(value: Any) -> list[str]:
    """A query parameter's values as httpx writes them (a list repeats the key; booleans in lower case)."""
    values = value if isinstance(value, list | tuple) else [value]
    return ["true" if v is True else "false" if v is False else "" if v is None else str(v) for v in values]


def route_directly(client: AsyncClient, direct: Direct) -> AsyncClient:
    """Serve ``client``'s requests with ``direct`` (a server in this process); a ``Client`` only."""
    if not isinstance(client, Client):
        raise TypeError(
            f"only a trainyard.client.transport.Client can send requests in-process, not a {type(client).__name__}"
        )
    client.direct = direct
    return client


def wrap_direct(client: AsyncClient, wrap: Callable[[Direct], Direct]) -> AsyncClient:
    """Put ``wrap`` around ``client``'s in-process route, where it has one (``wrap_transports``, for it)."""
    if isinstance(client, Client) and client.direct is not None:
        client.direct = wrap(client.direct)
    return client


URL_MEMO_SIZE = 4096


class UrlMemo:
    """httpx's ``build_request`` with each request's URL built once per (path, query) and kept.

    httpx parses and re-quotes a URL three times per request (the relative one, its merge with the
    base, the query added): most of building a request, which was a tenth of the embedded plane's
    CPU in a sweep of many jobs, whose components send the same few URLs over and over (events,
    creates, each pod's status). The first
    request for a URL is built by httpx itself, so later ones get exactly its URL; they pass it
    whole, which httpx takes without parsing. Clients with default query parameters of their own
    (``has_params``; lightkube sets none) are left to httpx.
    """

    def __init__(self, build: Callable[..., httpx2.Request], has_params: Callable[[], bool]) -> None:
        self._build = build
        self._has_params = has_params
        self._urls: dict[tuple[str, tuple[tuple[str, Any], ...]], httpx2.URL] = {}

    def __call__(self, method: str, url: httpx2.URL | str, *, params: Any = None, **kwargs: Any) -> httpx2.Request:
        if not isinstance(url, str) or not (params is None or isinstance(params, dict)) or self._has_params():
            return self._build(method, url, params=params, **kwargs)
        key = (url, tuple(params.items()) if params else ())
        try:
            whole = self._urls.get(key)
        except TypeError:  # a list among the values: not worth keeping
            return self._build(method, url, params=params, **kwargs)
        if whole is not None:
            return self._build(method, whole, **kwargs)
        request = self._build(method, url, params=params, **kwargs)
        if len(self._urls) >= URL_MEMO_SIZE:
            self._urls.clear()
        self._urls[key] = request.url
        return request


Wrap = Callable[[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport]


def wrap_transports(client: AsyncClient, wrap: Wrap, *, watches: bool) -> AsyncClient:
    """Put ``wrap`` around the transports lightkube's client built, in place; with ``watches``, also
    around those of a ``Client``'s watch pool.

    lightkube builds its httpx client itself (TLS and client certificates from the kubeconfig, token
    auth, proxies from the environment), and a ``transport=`` given to it would replace the one that
    carries that set-up. Wrapping in place reaches one private attribute of lightkube's
    (``AsyncClient._client._client``) and two of httpx's (``_transport``, ``_mounts``): checked here,
    so a change in either library fails at start, never silently.
    """
    for each in (client, *([client.watches] if watches and isinstance(client, Client) else [])):
        http = getattr(getattr(each, "_client", None), "_client", None)
        if not isinstance(http, httpx2.AsyncClient) or not isinstance(getattr(http, "_mounts", None), dict):
            raise TypeError(
                "cannot wrap the API client's transport: lightkube.AsyncClient no longer keeps an httpx2.AsyncClient "
                "at ._client._client with _transport and _mounts (check the pinned lightkube and httpx2)"
            )
        http._transport = wrap(http._transport)
        # Proxy transports (from $HTTPS_PROXY and friends); None routes a pattern to _transport, wrapped above.
        http._mounts = {pattern: None if t is None else wrap(t) for pattern, t in http._mounts.items()}
    return client


async def delete(
    client: AsyncClient,
    res: Any,
    name: str,
    *,
    namespace: str,
    uid: str | None = None,
    grace_period: int | None = None,
    propagation: str | None = None,
) -> dict[str, Any] | None:
    """Delete; with ``uid``, only that incarnation (``DeleteOptions.preconditions``), as a controller
    acting on a cache must: a name read from a cache that lags may already belong to a newer object.
    ``propagation``: the DeleteOptions' ``propagationPolicy`` (``Foreground``: the dependents go first).
    The server's answer (the object, terminating or as it went), for the caller's cache; None when
    what was meant is already gone (404, or a 409 naming another uid): success too."""
    # lightkube's delete sends no body; its own request pipeline does, given one.
    adapter: Any = client._client
    params = {"gracePeriodSeconds": grace_period}
    request = adapter.prepare_request("delete", res=res, name=name, namespace=namespace, params=params)
    options: dict[str, Any] = {}
    if uid is not None:
        options["preconditions"] = {"uid": uid}
    if propagation is not None:
        options["propagationPolicy"] = propagation
    if options:
        request.data = {"kind": "DeleteOptions", "apiVersion": "v1", **options}
    try:
        if isinstance(client, Client):
            response: Any = await client.send_prepared(request)
        else:
            response = await adapter.send(adapter.build_adapter_request(request))
        adapter.handle_response("delete", response, request)
    except ApiError as exc:
        if is_status(exc, 404) or (uid is not None and is_status(exc, 409)):
            return None
        raise
    answer = json.loads(response.content)
    return answer if isinstance(answer, dict) else {}
