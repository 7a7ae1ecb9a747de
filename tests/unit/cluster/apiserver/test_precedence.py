"""The plane's own clients wait while a network request is served, within their patience."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import auth
from trainyard.cluster.server.apiserver import precedence as precedence_module
from trainyard.cluster.server.apiserver.precedence import Listener, Precedence, lasts, middleware


async def _settle(rounds: int = 5) -> None:
    for _ in range(rounds):
        await asyncio.sleep(0)


def test_a_turn_is_free_when_no_network_request_is_served() -> None:
    async def go() -> float:
        return await Precedence(gap=60, patience=60).turn()

    assert asyncio.run(go()) == 0


def test_a_turn_waits_for_the_network_request_then_the_gap_after_it() -> None:
    async def go() -> None:
        precedence = Precedence(gap=0.02, patience=60)
        with precedence.network():
            turn = asyncio.create_task(precedence.turn())
            await _settle()
            assert not turn.done()  # served: the plane's own client waits
        assert precedence.serving == 0
        await _settle()
        assert not turn.done()  # the gap after it: kubectl's next request comes in it
        await asyncio.wait_for(turn, 5)

    asyncio.run(go())


def test_a_turn_waits_no_longer_than_its_patience() -> None:
    async def go() -> None:
        precedence = Precedence(gap=0, patience=0.02)
        with precedence.network():
            waited = await asyncio.wait_for(precedence.turn(), 5)  # while the request is still served
            assert waited >= 0.02
            assert precedence.serving == 1

    asyncio.run(go())


def test_nested_network_requests_count_until_the_last_ends() -> None:
    async def go() -> None:
        precedence = Precedence(gap=0, patience=60)
        with precedence.network():
            with precedence.network():
                pass
            turn = asyncio.create_task(precedence.turn())
            await _settle()
            assert not turn.done()
        await asyncio.wait_for(turn, 5)

    asyncio.run(go())


@pytest.mark.parametrize(
    ("path", "query", "streams"),
    [
        ("/api/v1/namespaces/a/pods", {}, False),
        ("/api/v1/namespaces/a/pods", {"watch": "true"}, True),
        ("/api/v1/namespaces/a/pods", {"watch": "false"}, False),
        ("/api/v1/namespaces/a/pods/p/log", {"follow": "1"}, True),
        ("/api/v1/namespaces/a/pods/p/exec", {}, True),
        ("/api/v1/namespaces/a/pods/p/status", {}, False),
    ],
)
def test_streams_do_not_count(path: str, query: dict[str, str], streams: bool) -> None:
    assert lasts(path, query) is streams


def test_the_middleware_counts_network_requests_but_not_watches() -> None:
    precedence = Precedence()
    seen: list[int] = []

    async def handler(_: web.Request) -> web.Response:
        seen.append(precedence.serving)
        return web.Response(text="ok")

    async def go() -> None:
        app = web.Application(middlewares=[middleware(precedence)])
        app.router.add_get("/{tail:.*}", handler)
        async with TestClient(TestServer(app)) as client:
            assert (await client.get("/api/v1/pods")).status == 200
            assert (await client.get("/api/v1/pods", params={"watch": "1"})).status == 200
            assert (await client.get("/api/v1/pods")).status == 200

    asyncio.run(go())
    assert seen == [1, 0, 1]
    assert precedence.serving == 0


@contextlib.asynccontextmanager
async def _tls_site(tmp: Path, precedence: Precedence) -> AsyncIterator[tuple[Listener, ssl.SSLContext]]:
    """A listening ``Listener`` that answers ``GET /``, and a client context that trusts it."""
    credentials = auth.ensure(Layout(tmp / "home"), "127.0.0.1")
    client = ssl.create_default_context(cadata=credentials.ca_pem.decode())
    app = web.Application()

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        site = Listener(runner, "127.0.0.1", 0, credentials.server_context(), precedence)
        await site.start()
        yield site, client
    finally:
        await runner.cleanup()


async def _until(check: Callable[[], bool]) -> None:
    """Poll ``check`` (a counter of ``Precedence``, which has no event to wait on) for up to 10 s."""
    async with asyncio.timeout(10):
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


def test_a_tls_handshake_counts_as_network_work_until_it_is_done(tmp_path: Path) -> None:
    async def go() -> None:
        precedence = Precedence(gap=0, patience=60)
        async with _tls_site(tmp_path, precedence) as (site, client):
            # A connection whose client has not finished its handshake: the plane's clients wait.
            reader, writer = await asyncio.open_connection("127.0.0.1", site.port)
            await _until(lambda: precedence.serving == 1)
            turn = asyncio.create_task(precedence.turn())
            await _settle()
            assert not turn.done()
            await writer.start_tls(client, server_hostname="127.0.0.1")
            await _until(lambda: precedence.serving == 0)
            await asyncio.wait_for(turn, 5)
            writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = await reader.read()
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"ok")
            writer.close()

    asyncio.run(go())


def test_a_handshake_that_never_ends_stops_counting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(precedence_module, "HANDSHAKE_SECONDS", 0.05)

    async def go() -> None:
        precedence = Precedence(gap=0, patience=60)
        async with _tls_site(tmp_path, precedence) as (site, _):
            _, writer = await asyncio.open_connection("127.0.0.1", site.port)
            await _until(lambda: precedence.serving == 1)
            writer.close()  # gone before its handshake: asyncio tells the HTTP protocol nothing
            await _until(lambda: precedence.serving == 0)

    asyncio.run(go())
