"""pods/portforward's ways in over HTTP: SPDY/3.1 upgrade, SPDY in a WebSocket, v4.channel.k8s.io."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from multidict import CIMultiDict

from spdy_peer import TIMEOUT, Peer
from trainyard.cluster.server.apiserver.tunnels import portforward, upgrades
from trainyard.cluster.server.apiserver.tunnels.forwarding import PodTarget
from trainyard.cluster.server.apiserver.tunnels.spdy import frames

TARGET = PodTarget("default", "web", "0f3c-uid")


async def _pod(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(b"pod says " + await reader.readline())
    await writer.drain()
    writer.close()


def run(client: Callable[[TestServer, int], Awaitable[None]]) -> None:
    """Serve ``portforward.serve`` at /pf and a pod's port; drive both with ``client``."""

    async def handler(request: web.Request) -> web.StreamResponse:
        return await portforward.serve(request, TARGET)

    async def go() -> None:
        pod = await asyncio.start_server(_pod, "127.0.0.1", 0)
        app = web.Application()
        app.router.add_route("*", "/pf", handler)
        async with TestServer(app) as server:
            await asyncio.wait_for(client(server, pod.sockets[0].getsockname()[1]), TIMEOUT)
        pod.close()

    asyncio.run(go())


async def _raw(
    server: TestServer, head: str
) -> tuple[str, CIMultiDict[str], asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(server.host, server.port)
    writer.write(head.replace("\n", "\r\n").encode() + b"\r\n")
    status, *lines = (await reader.readuntil(b"\r\n\r\n")).decode().strip().split("\r\n")
    found: CIMultiDict[str] = CIMultiDict()
    for line in lines:
        name, value = line.split(": ", 1)
        found.add(name, value)
    return status, found, reader, writer


async def _forward_once(peer: Peer, port: int) -> bytes:
    base = {"port": [str(port)], "requestid": ["0"]}
    await peer.open(1, {"streamtype": ["error"], **base})
    await peer.open(3, {"streamtype": ["data"], **base})
    await peer.send(frames.Data(3, b"hello\n"))
    data, end = await peer.read_stream(3)
    assert end is None
    assert await peer.read_stream(1) == (b"", None)  # and no error
    return data


SPDY_UPGRADE = """POST /pf HTTP/1.1
Host: x
Connection: Upgrade
Upgrade: SPDY/3.1
X-Stream-Protocol-Version: portforward.k8s.io
"""


def test_spdy_upgrade_answers_101_with_the_chosen_version_then_forwards() -> None:
    async def client(server: TestServer, port: int) -> None:
        status, found, reader, writer = await _raw(server, SPDY_UPGRADE)
        assert status == "HTTP/1.1 101 Switching Protocols"
        assert (found["Connection"], found["Upgrade"], found["X-Stream-Protocol-Version"]) == (
            "Upgrade",
            "SPDY/3.1",
            "portforward.k8s.io",
        )
        peer = Peer.over(reader, writer)
        assert await _forward_once(peer, port) == b"pod says hello\n"
        await peer.send(frames.Ping(1))
        assert await peer.next() == frames.Ping(1)
        writer.close()

    run(client)


@pytest.mark.parametrize(
    ("head", "status", "text"),
    [
        (
            SPDY_UPGRADE.replace("portforward.k8s.io", "v9.portforward.k8s.io, other"),
            "403",
            "unable to upgrade: unable to negotiate protocol: client supports [v9.portforward.k8s.io other], "
            "server accepts [portforward.k8s.io]",
        ),
        (SPDY_UPGRADE.replace("X-Stream-Protocol-Version: portforward.k8s.io\n", ""), "400", "is required"),
        (SPDY_UPGRADE.replace("SPDY/3.1", "h2c"), "400", "unable to upgrade: missing upgrade headers in request"),
    ],
    ids=["no-common-protocol", "no-protocol", "not-spdy"],
)
def test_spdy_upgrades_that_cannot_be_made_get_upstreams_plain_text(head: str, status: str, text: str) -> None:
    async def client(server: TestServer, port: int) -> None:
        line, found, reader, writer = await _raw(server, head)
        assert line.split()[1] == status
        body = await reader.read(int(found["Content-Length"]))
        assert text in body.decode()
        if status == "403":
            assert found["X-Accepted-Stream-Protocol-Versions"] == "portforward.k8s.io"
        writer.close()

    run(client)


def test_spdy_tunnelled_in_websocket_binary_messages() -> None:
    async def client(server: TestServer, port: int) -> None:
        tunnel = ["SPDY/3.1+portforward.k8s.io"]
        async with aiohttp.ClientSession() as http, http.ws_connect(server.make_url("/pf"), protocols=tunnel) as ws:
            assert ws.protocol == "SPDY/3.1+portforward.k8s.io"

            async def receive() -> bytes:
                msg = await ws.receive()
                return msg.data if msg.type == aiohttp.WSMsgType.BINARY else b""

            peer = Peer(receive, ws.send_bytes)
            assert await _forward_once(peer, port) == b"pod says hello\n"

    run(client)


def test_v4_channels_announce_each_port_then_carry_its_data_and_errors() -> None:
    async def client(server: TestServer, port: int) -> None:
        closed = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        shut = closed.sockets[0].getsockname()[1]
        closed.close()
        await closed.wait_closed()
        async with aiohttp.ClientSession() as http:
            url = server.make_url("/pf").with_query(ports=f"{port},{shut}")
            async with http.ws_connect(url, protocols=["v4.channel.k8s.io"]) as ws:
                assert ws.protocol == "v4.channel.k8s.io"
                first = [await ws.receive_bytes() for _ in range(4)]
                assert first == [bytes([ch]) + p.to_bytes(2, "little") for ch, p in enumerate([port, port, shut, shut])]
                await ws.send_bytes(b"\x00hello\n")
                got: dict[int, bytes] = {}
                async for msg in ws:
                    got[msg.data[0]] = got.get(msg.data[0], b"") + msg.data[1:]
                assert got[0] == b"pod says hello\n"
                assert got[3].decode().startswith(f"error forwarding port {shut} to pod 0f3c-uid, uid : failed to")
                assert 1 not in got and 2 not in got

    run(client)


def test_v4_channels_need_a_port() -> None:
    async def client(server: TestServer, port: int) -> None:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.WSServerHandshakeError) as failed:
                await http.ws_connect(server.make_url("/pf"), protocols=["v4.channel.k8s.io"])
            assert failed.value.status == 400

    run(client)


def test_protocol_negotiation_takes_the_clients_first_protocol_the_server_speaks() -> None:
    offered = CIMultiDict([("X-Stream-Protocol-Version", "v2, v1"), ("X-Stream-Protocol-Version", "v0")])
    assert upgrades.negotiate(offered, ["v0", "v1"]) == "v1"
