"""The plane's own clients wait while a network request is served, within their patience."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from trainyard.cluster.apiserver.precedence import Precedence, lasts, middleware


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
