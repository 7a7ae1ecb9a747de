"""What the API server reads of a request, and where a watch writes, whichever way the request came.

aiohttp's ``web.Request`` has all of it; ``loopback`` builds the same from an httpx request for
the plane's own components (scheduler, node agent, controllers, operator), which reach the
server without a socket. A watch writes its answer as it goes (``Outgoing``): to the HTTP
response, or to the reader in this process. Logs, exec and the other streams need the real
connection and stay on HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Protocol

from aiohttp import web
from multidict import CIMultiDictProxy, MultiMapping

from trainyard.cluster.server.storage.watch import Transport


class Body(Protocol):
    def iter_any(self) -> AsyncIterator[bytes]: ...


class ApiRequest(Protocol):
    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def path_qs(self) -> str: ...

    @property
    def query(self) -> MultiMapping[str]: ...

    @property
    def headers(self) -> CIMultiDictProxy[str]: ...

    @property
    def content_type(self) -> str: ...

    @property
    def content_length(self) -> int | None: ...

    @property
    def content(self) -> Body: ...


class Outgoing(Protocol):
    """A streamed answer as it is written: headers once, then data (``write``, or straight to
    ``transport`` from the watch hub, HTTP/1.1 chunks when ``chunked``); ``answer`` is what the
    handler returns when the stream ends."""

    @property
    def transport(self) -> Transport | None: ...

    @property
    def chunked(self) -> bool: ...

    async def start(self, headers: Mapping[str, str]) -> None: ...

    async def write(self, data: bytes) -> None: ...

    def answer(self) -> web.StreamResponse: ...
