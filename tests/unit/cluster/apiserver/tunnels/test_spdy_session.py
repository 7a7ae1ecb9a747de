"""A SPDY/3.1 session over a real loopback socket: replies, data both ways, pings, resets and shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from spdy_peer import Peer, StreamWire, serving
from trainyard.cluster.server.apiserver.tunnels.spdy import frames, session
from trainyard.cluster.server.apiserver.tunnels.spdy.session import Session, Stream, StreamClosed

Handler = Callable[[Stream], Awaitable[None]]


def run(handler: Handler, client: Callable[[Peer], Awaitable[None]], *, reject: str | None = None) -> list[str]:
    """Serve one connection whose streams ``handler`` serves, drive it with ``client``; what happened."""
    seen: list[str] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        tasks: list[asyncio.Task[None]] = []

        def accept(stream: Stream) -> str | None:
            if reject is not None:
                return reject
            tasks.append(asyncio.create_task(handler(stream)))
            return None

        await Session(StreamWire(reader, writer), accept).serve()
        seen.append("served")
        for task in tasks:
            try:
                await task
            except StreamClosed as exc:
                seen.append(f"closed: {exc}")

    async def go() -> None:
        async with serving(serve) as peer:
            await client(peer)

    asyncio.run(go())
    return seen


async def echo(stream: Stream) -> None:
    while data := await stream.read():
        await stream.write(data.upper())
    await stream.close()


def test_a_stream_is_replied_to_then_carries_data_both_ways_until_fin() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, {"streamtype": ["data"]})
        await peer.send(frames.Data(1, b"hello "), frames.Data(1, b"spdy", fin=True))
        assert await peer.read_stream(1) == (b"HELLO SPDY", None)

    assert run(echo, client) == ["served"]


def test_a_rejected_stream_is_reset_and_others_go_on() -> None:
    async def client(peer: Peer) -> None:
        await peer.send(frames.SynStream(1, {}))
        assert await peer.next() == frames.RstStream(1, frames.Rst.CANCEL)

    run(echo, client, reject="no")


def test_stream_ids_must_be_odd_and_increasing() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(3, {})
        await peer.send(frames.SynStream(1, {}), frames.SynStream(4, {}))
        assert await peer.next() == frames.RstStream(1, frames.Rst.PROTOCOL_ERROR)
        assert await peer.next() == frames.RstStream(4, frames.Rst.PROTOCOL_ERROR)

    run(echo, client)


def test_the_clients_pings_are_echoed_and_none_of_ours() -> None:
    async def client(peer: Peer) -> None:
        await peer.send(frames.Ping(2), frames.Ping(1), frames.Ping(3))
        assert [await peer.next(), await peer.next()] == [frames.Ping(1), frames.Ping(3)]

    run(echo, client)


def test_settings_and_window_updates_are_taken_without_answer() -> None:
    async def client(peer: Peer) -> None:
        await peer.send(frames.Settings((frames.SettingsEntry(frames.Setting.INITIAL_WINDOW_SIZE, 1),)))
        await peer.send(frames.WindowUpdate(0, 1000), frames.Ping(5))
        assert await peer.next() == frames.Ping(5)

    run(echo, client)


def test_a_large_answer_is_sent_in_chunks_without_waiting_for_window_updates() -> None:
    # spdystream never sends WINDOW_UPDATE: a sender honouring the 64 KiB window would stall here.
    body = bytes(range(256)) * 1024

    async def handler(stream: Stream) -> None:
        await stream.write(body)
        await stream.close()

    async def client(peer: Peer) -> None:
        await peer.open(1, {})
        sizes = []
        got = b""
        while True:
            frame = await peer.next()
            assert isinstance(frame, frames.Data)
            sizes.append(len(frame.data))
            got += frame.data
            if frame.fin:
                break
        assert got == body and max(sizes) <= session.CHUNK

    run(handler, client)


def test_data_read_is_granted_back_with_window_updates() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, {})
        await peer.send(frames.Data(1, b"x" * 16384), frames.Data(1, b"y" * 16384))
        echoed = b""
        while len(echoed) < 32768:
            frame = await peer.next()
            assert isinstance(frame, frames.Data)
            echoed += frame.data
        await peer.send(frames.Ping(1))  # the updates were sent before the echo of the data they grant
        assert await peer.next() == frames.Ping(1)
        assert {(u.stream_id, u.delta) for u in peer.window_updates} == {(1, 32768), (0, 32768)}
        await peer.send(frames.Data(1, b"", fin=True))
        assert await peer.read_stream(1) == (b"", None)

    run(echo, client)


def test_a_reset_from_the_client_ends_the_handlers_read() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, {})
        await peer.send(frames.Data(1, b"a"))
        assert await peer.next() == frames.Data(1, b"A")
        await peer.send(frames.RstStream(1, frames.Rst.CANCEL))
        await peer.send(frames.Ping(1))  # then the session still answers
        assert await peer.next() == frames.Ping(1)

    assert run(echo, client) == ["served", "closed: stream 1 was reset"]


def test_a_client_that_goes_away_ends_the_session_and_its_streams() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, {})
        await peer.send(frames.GoAway(1))

    assert run(echo, client) == ["served", "closed: stream 1 was reset"]


def test_a_protocol_error_closes_the_connection_with_goaway() -> None:
    async def client(peer: Peer) -> None:
        await peer.open(1, {})
        await peer.send_raw(bytes.fromhex("8002000600000004 00000001"))  # a SPDY/2 ping
        assert await peer.next() == frames.GoAway(1, frames.GoAwayStatus.PROTOCOL_ERROR)
        assert await peer.next() is None

    run(echo, client)
