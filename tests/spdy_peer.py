"""The client end of a SPDY/3.1 connection for tests, and a server end on a real socket.

``Peer`` sends frames and reads what the server answered, over whatever byte pipe it is given
(an asyncio stream pair here, WebSocket messages in the upgrade tests); ``serving`` runs one of our
sessions on a loopback TCP listener, so each test exchanges real bytes through the kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

from trainyard.cluster.server.apiserver.tunnels.spdy import frames

TIMEOUT = 30.0  # generous: the CI machine is busy; a healthy exchange takes milliseconds


class Peer:
    def __init__(self, receive: Callable[[], Awaitable[bytes]], send: Callable[[bytes], Awaitable[None]]) -> None:
        self._receive, self._send = receive, send
        self.encoder, self.decoder = frames.Encoder(), frames.Decoder()
        self.pending: list[frames.Frame] = []
        self.window_updates: list[frames.WindowUpdate] = []
        self.closed = False
        self.hang_up: Callable[[], None] = lambda: None

    @classmethod
    def over(cls, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Peer:
        async def send(data: bytes) -> None:
            writer.write(data)
            await writer.drain()

        peer = cls(lambda: reader.read(65536), send)
        peer.hang_up = writer.close
        return peer

    async def send(self, *sent: frames.Frame) -> None:
        await self._send(b"".join(self.encoder.encode(f) for f in sent))

    async def send_raw(self, data: bytes) -> None:
        await self._send(data)

    async def next(self) -> frames.Frame | None:
        """The server's next frame (WINDOW_UPDATEs are set aside in ``window_updates``); None at its end."""
        while True:
            while self.pending:
                frame = self.pending.pop(0)
                if isinstance(frame, frames.WindowUpdate):
                    self.window_updates.append(frame)
                    continue
                return frame
            if self.closed:
                return None
            data = await asyncio.wait_for(self._receive(), TIMEOUT)
            if not data:
                self.closed = True
            self.pending += self.decoder.feed(data)

    async def open(self, stream_id: int, headers: dict[str, list[str]], *, fin: bool = False) -> None:
        """Open a stream and wait for its SYN_REPLY (frames for other streams that come first are kept)."""
        await self.send(frames.SynStream(stream_id, headers, fin=fin))
        frame = await self.next()
        assert frame == frames.SynReply(stream_id, {}), frame

    async def read_stream(self, stream_id: int) -> tuple[bytes, frames.Frame | None]:
        """Data on one stream up to its FIN, or the frame that ended it otherwise (RST_STREAM, GOAWAY, None)."""
        got = b""
        while True:
            frame = await self.next()
            if isinstance(frame, frames.Data) and frame.stream_id == stream_id:
                got += frame.data
                if frame.fin:
                    return got, None
            elif isinstance(frame, frames.Ping):
                continue
            elif frame is None or getattr(frame, "stream_id", stream_id) == stream_id:
                return got, frame


@contextlib.asynccontextmanager
async def serving(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[Peer]:
    """A loopback listener running ``serve`` for one connection, and a ``Peer`` connected to it."""
    served: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        served.append(task)
        try:
            await serve(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield Peer.over(reader, writer)
    finally:
        writer.close()
        for task in served:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, TIMEOUT)
        server.close()
        await server.wait_closed()


class StreamWire:
    """Our session's side of a socket: the ``Wire`` an upgraded connection would be."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    async def receive(self) -> bytes:
        return await self.reader.read(65536)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()
