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

A new connection's TLS handshake counts too (``Listener``): it takes three or four turns of the
loop before the first request can even be read, and every ``kubectl`` command makes one, so on a
busy plane a new connection waited behind the plane's own clients at each of those turns (p99
150-170 ms while a namespace of 3,000 jobs was torn down, against 75-125 ms on a kept one).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Awaitable, Callable, Iterator, Mapping

from aiohttp import web
from aiohttp.web_runner import BaseRunner

from trainyard.cluster.server.apiserver.requests.query import flag

# Subresources answered by writing to the connection as the answer goes (``connect.STREAMING`` and logs).
STREAMED = frozenset({"log", "exec", "attach", "portforward", "proxy"})

GAP = 0.010
"""Seconds after a network request ended during which the plane's own clients still wait."""
PATIENCE = 0.100
"""The most seconds one of the plane's own requests waits for network requests."""
HANDSHAKE_SECONDS = 1.0
"""The longest a connection's TLS handshake counts as served (one that fails never says it ended)."""


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
        self.begin()
        try:
            yield
        finally:
            self.end()

    def begin(self) -> None:
        """Network work started (a request, a handshake); each ``begin`` is matched by one ``end``."""
        self._serving += 1
        self._idle.clear()

    def end(self) -> None:
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


class _Handshake(asyncio.Protocol):
    """Stands between asyncio's TLS layer and the HTTP protocol of one connection: from the accept
    to the end of the handshake (``connection_made``) the connection counts as served."""

    def __init__(self, inner: asyncio.Protocol, precedence: Precedence) -> None:
        self._inner = inner
        self._precedence = precedence
        precedence.begin()
        # Set while the handshake counts: cancelled and cleared when it ends or its time is up.
        self._cap: asyncio.TimerHandle | None = asyncio.get_running_loop().call_later(HANDSHAKE_SECONDS, self._shaken)

    def _shaken(self) -> None:
        if self._cap is not None:
            self._cap.cancel()
            self._cap = None
            self._precedence.end()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._shaken()
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._shaken()
        self._inner.connection_lost(exc)

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()


class Listener(web.BaseSite):
    """aiohttp's TCP site, with each connection's TLS handshake counted as network work."""

    __slots__ = ("_host", "_port", "_precedence")

    def __init__(
        self, runner: BaseRunner, host: str, port: int, ssl_context: ssl.SSLContext | None, precedence: Precedence
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._host, self._port, self._precedence = host, port, precedence

    @property
    def name(self) -> str:
        return f"{'https' if self._ssl_context else 'http'}://{self._host}:{self._port}"

    @property
    def port(self) -> int:
        """The port listened on (the one the system chose for port 0)."""
        assert self._server is not None and isinstance(self._server, asyncio.Server)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def start(self) -> None:
        await super().start()
        http = self._runner.server
        assert http is not None
        precedence = self._precedence

        def shaking() -> asyncio.Protocol:
            return _Handshake(http(), precedence)

        self._server = await asyncio.get_running_loop().create_server(
            shaking if self._ssl_context is not None else http,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=True,
        )
