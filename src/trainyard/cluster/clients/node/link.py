"""A node's network link to the API server, which the simulated cloud can cut.

Every node agent of the plane has an API client of its own, behind a ``Link``: while the link is
up, requests pass; once ``cut`` (the machine lost power), every request of that client fails as a
dead machine's would, with a connection error, and nothing the agent was still doing reaches the
cluster (its watches the pool cancels with the agent). A ``Client`` routes requests two ways (httpx transports, and the
in-process ``direct`` route); ``attach`` puts the link on both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
from lightkube import AsyncClient

from trainyard.client.transport import wrap_direct, wrap_transports


class LinkDown(httpx2.ConnectError):
    """Raised for a request sent over a cut link."""


class Link:
    def __init__(self, node: str) -> None:
        self.node = node
        self.up = True

    def cut(self) -> None:
        self.up = False

    def check(self) -> None:
        if not self.up:
            raise LinkDown(f"node {self.node} is powered off: its requests do not reach the API server")

    def attach(self, client: AsyncClient) -> AsyncClient:
        """Put this link in front of every route of ``client``'s requests and watches."""
        wrap_transports(client, lambda inner: _Transport(self, inner), watches=True)
        wrap_direct(client, self._direct)
        return client

    def _direct(self, inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
        async def call(request: Any) -> Any:
            self.check()
            return await inner(request)

        return call


class _Transport(httpx2.AsyncBaseTransport):
    def __init__(self, link: Link, inner: httpx2.AsyncBaseTransport) -> None:
        self.link = link
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.link.check()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()
