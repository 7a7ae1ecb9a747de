"""Requests from the network go first: the plane's own clients wait a little while one is served.

The scheduler, the node agent and the operator share the plane's event loop with the HTTP
listener, and with many jobs applied they always have work. A user's request then waits behind
theirs at every turn of the loop: ``kubectl apply --server-side`` of 3,000 jobs answered each
request in 18-21 ms though serving one costs ~1.3 ms, because the operator was busy with the jobs
already applied. kube-apiserver's API Priority and Fairness keeps one flow from crowding out
another; here the plane's own clients, which are the crowd, yield: before each of their requests
they wait while a network request is being served, or ended less than ``GAP`` ago (kubectl sends
its next one a few milliseconds after an answer), but never more than ``PATIENCE`` a request, so
that they go on under a stream of network requests too. Watches, logs and exec sessions last as
long as their client wants and do not count.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator, Mapping

from aiohttp import web

from trainyard.cluster.apiserver.requests.query import flag

# Subresources answered by writing to the connection as the answer goes (``connect.STREAMING`` and logs).
STREAMED = frozenset({"log", "exec", "attach", "portforward", "proxy"})

GAP = 0.010
"""Seconds after a network request ended during which the plane's own clients still wait."""
PATIENCE = 0.100
"""The most seconds one of the plane's own requests waits for network requests."""


class Precedence:
    def __init__(
        self, *, gap: float = GAP, patience: float = PATIENCE, clock: Callable[[], float] | None = None
    ) -> None:
        self.gap, self.patience = gap, patience
        self._clock = clock
        self._serving = 0
        self._ended = float("-inf")
        self._idle = asyncio.Event()
        self._idle.set()

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    @contextlib.contextmanager
    def network(self) -> Iterator[None]:
        """Around the handling of one request from the network."""
        self._serving += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._serving -= 1
            if not self._serving:
                self._ended = self._now()
                self._idle.set()

    @property
    def serving(self) -> int:
        return self._serving

    async def turn(self) -> float:
        """Wait until no network request is served nor just was, or for ``patience``; the seconds waited."""
        start = now = self._now()
        deadline = start + self.patience
        while now < deadline:
            if self._serving:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._idle.wait(), deadline - now)
            else:
                quiet = now - self._ended
                if quiet >= self.gap:
                    break
                await asyncio.sleep(min(self.gap - quiet, deadline - now))
            now = self._now()
        return now - start


def lasts(path: str, query: Mapping[str, str]) -> bool:
    """A watch, a followed log or another stream: answered for as long as its client wants."""
    return flag(query.get("watch")) or flag(query.get("follow")) or path.rstrip("/").rpartition("/")[2] in STREAMED


def middleware(precedence: Precedence) -> Callable[..., Awaitable[web.StreamResponse]]:
    """Counts each network request that is not a stream while it is handled."""

    @web.middleware
    async def first(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if lasts(request.path, request.query):
            return await handler(request)
        with precedence.network():
            return await handler(request)

    return first
