"""What the API server reads of a request, whichever way it came: over HTTP or from this process.

aiohttp's ``web.Request`` has all of it; ``loopback`` builds the same from an httpx request for
the plane's own components (scheduler, node agent, controllers, operator), which reach the
server without a socket. Streams (watch, logs, exec) need the real connection and stay on HTTP.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from multidict import CIMultiDictProxy, MultiMapping


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
