"""The operator's own HTTP endpoints: ``/metrics`` and the ``/healthz`` ``/readyz`` probes.

Bind addresses are written as upstream's flags take them: ``:8080`` (every interface),
``host:port``, ``[::1]:8080``, or ``0`` to serve nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from trainyard.operator.metrics import CONTENT_TYPE, OperatorMetrics

log = logging.getLogger(__name__)


def parse_bind_address(value: str) -> tuple[str, int] | None:
    """``(host, port)`` of a bind address flag, None for ``0`` (disabled); ValueError if malformed."""
    value = value.strip()
    if value in ("0", ""):
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"invalid bind address {value!r}: expected [host]:port or 0")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def metrics_app(metrics: OperatorMetrics) -> web.Application:
    async def scrape(_: web.Request) -> web.Response:
        return web.Response(body=metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", scrape)
    return app


def probes_app(ready: Callable[[], bool]) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def readyz(_: web.Request) -> web.Response:
        if ready():
            return web.Response(text="ok")
        return web.Response(status=500, text="not ready: the operator has not reached the API server yet")

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app


@dataclass
class Endpoint:
    runner: web.AppRunner
    host: str
    port: int

    async def close(self) -> None:
        await self.runner.cleanup()


async def serve(app: web.Application, address: tuple[str, int], what: str) -> Endpoint:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, address[0], address[1], reuse_address=True)
    await site.start()
    port = address[1]
    server = site._server
    if port == 0 and server is not None and hasattr(server, "sockets"):
        port = server.sockets[0].getsockname()[1]
    log.info("serving %s on %s:%s", what, address[0], port)
    return Endpoint(runner, address[0], port)
