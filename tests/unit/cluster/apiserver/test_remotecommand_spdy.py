"""pods/exec and pods/attach over SPDY/3.1 streams, as kubectl's SPDY executor opens them."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from test_remotecommand import Echo as WebSocketEcho

from spdy_peer import TIMEOUT, Peer
from trainyard.cluster.server.apiserver.remotecommand import options as opts
from trainyard.cluster.server.apiserver.remotecommand import spdystreams
from trainyard.cluster.server.apiserver.remotecommand.session import Outcome
from trainyard.cluster.server.apiserver.tunnels.spdy import frames

KUBECTL = "v5.channel.k8s.io, v4.channel.k8s.io, v3.channel.k8s.io, v2.channel.k8s.io, channel.k8s.io"


class Echo(WebSocketEcho):
    """The WebSocket tests' session (echoes stdin, exits 9 when stdin closes), keeping resizes and its close."""

    def __init__(self) -> None:
        super().__init__()
        self.closed = False
        self.sizes: list[tuple[int, int]] = []

    def resize(self, width: int, height: int) -> None:
        self.sizes.append((width, height))

    def close(self) -> None:
        self.closed = True
        super().close()


async def _connect(options: opts.Options, protocols: str, session: Echo) -> tuple[TestServer, Peer, str]:
    async def handler(request: web.Request) -> web.StreamResponse:
        return await spdystreams.serve(request, session, options)

    app = web.Application()
    app.router.add_post("/exec", handler)
    server = TestServer(app)
    await server.start_server()
    reader, writer = await asyncio.open_connection(server.host, server.port)
    head = "POST /exec HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
    writer.write(f"{head}X-Stream-Protocol-Version: {protocols}\r\n\r\n".encode())
    answer = (await reader.readuntil(b"\r\n\r\n")).decode()
    assert answer.startswith("HTTP/1.1 101 Switching Protocols"), answer
    chosen = answer.split("X-Stream-Protocol-Version: ", 1)[1].split("\r\n", 1)[0]
    return server, Peer.over(reader, writer), chosen


async def _open(peer: Peer, *kinds: str) -> dict[str, int]:
    ids = {}
    for index, kind in enumerate(kinds):
        ids[kind] = 2 * index + 1
        await peer.open(ids[kind], {"streamtype": [kind]})
    return ids


async def _until_gone(peer: Peer) -> dict[int, bytes]:
    """Each stream's data up to the end of the connection, and that the server said GOAWAY first."""
    got: dict[int, bytes] = {}
    goaway = False
    while (frame := await peer.next()) is not None:
        if isinstance(frame, frames.Data):
            got[frame.stream_id] = got.get(frame.stream_id, b"") + frame.data
        goaway = goaway or isinstance(frame, frames.GoAway)
    assert goaway
    return got


def test_v5_streams_carry_stdin_stdout_and_end_with_the_status_on_the_error_stream() -> None:
    async def go() -> None:
        session = Echo()
        options = opts.Options("main", ("cat",), stdin=True, stdout=True, stderr=True)
        server, peer, chosen = await _connect(options, KUBECTL, session)
        assert chosen == "v5.channel.k8s.io"
        ids = await _open(peer, "error", "stdin", "stdout", "stderr")
        await peer.send(frames.Data(ids["stdin"], b"hello"))
        await peer.send(frames.Data(ids["stdin"], b"", fin=True))
        got = await _until_gone(peer)
        assert got[ids["stdout"]] == b"hello"
        status = json.loads(got[ids["error"]])
        assert status["reason"] == "NonZeroExitCode"
        assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "9"}]
        await server.close()

    asyncio.run(asyncio.wait_for(go(), TIMEOUT))


def test_v3_with_a_tty_has_a_resize_stream_and_a_plain_text_error() -> None:
    async def go() -> None:
        session = Echo()
        options = opts.Options("main", ("sh",), stdin=True, stdout=True, tty=True)
        server, peer, chosen = await _connect(options, "v3.channel.k8s.io", session)
        assert chosen == "v3.channel.k8s.io"
        ids = await _open(peer, "error", "stdin", "stdout", "resize")
        await peer.send(frames.Data(ids["resize"], json.dumps({"Width": 80, "Height": 24}).encode()))
        await peer.send(frames.Data(ids["stdin"], b"", fin=True))
        got = await _until_gone(peer)
        assert got[ids["stdout"]] == b""
        assert got[ids["error"]].decode() == opts.text_of(Outcome(code=9).status())
        assert session.sizes == [(80, 24)]
        await server.close()

    asyncio.run(asyncio.wait_for(go(), TIMEOUT))


def test_a_client_that_leaves_ends_the_session() -> None:
    async def go() -> None:
        session = Echo()
        options = opts.Options("main", ("sleep", "60"), stdout=True)
        server, peer, _ = await _connect(options, "v4.channel.k8s.io", session)
        await _open(peer, "error", "stdout")
        await peer.send(frames.GoAway(3))
        peer.hang_up()  # as kubectl's conn.Close() after its GOAWAY
        await session.ended.wait()
        assert session.closed
        await server.close()

    asyncio.run(asyncio.wait_for(go(), TIMEOUT))


@pytest.mark.parametrize(
    ("protocol", "options", "kinds"),
    [
        (
            "v4.channel.k8s.io",
            opts.Options("c", ("x",), stdin=True, stdout=True, stderr=True),
            {"error", "stdin", "stdout", "stderr"},
        ),
        ("v4.channel.k8s.io", opts.Options("c", ("x",), stdout=True, tty=True), {"error", "stdout", "resize"}),
        ("v2.channel.k8s.io", opts.Options("c", ("x",), stdout=True, tty=True), {"error", "stdout"}),
    ],
    ids=["v4-pipes", "v4-tty", "v2-tty-no-resize"],
)
def test_the_streams_a_client_opens(protocol: str, options: opts.Options, kinds: set[str]) -> None:
    assert spdystreams.expected(protocol, options) == kinds
