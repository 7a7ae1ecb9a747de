"""One SPDY/3.1 connection, server side: the peer's streams, their data, pings and shutdown.

``Session.serve`` reads frames from a ``Wire`` (the upgraded HTTP connection, or the binary
messages of a WebSocket tunnel) until the peer goes; each SYN_STREAM goes to ``accept``, which
refuses it (RST_STREAM, as apimachinery resets a stream its handler rejects) or takes the
``Stream``, which the session then answers with an empty SYN_REPLY, as the kubelet does. PINGs
are echoed. Frames go out one at a time, compressed in the order they are written.

Flow control: received data is acknowledged with WINDOW_UPDATE frames as the handler reads it,
and the handler is not given more than ``BUFFER`` unread bytes per stream before the session stops
reading the wire (the peer then stalls in TCP). Our own sending does not wait for the peer's window:
spdystream, the only SPDY peer kubectl has, never sends WINDOW_UPDATE, so a sender that honoured
the 64 KiB initial window would stop after the first 64 KiB of every stream.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from typing import Protocol

from trainyard.cluster.server.apiserver.tunnels.spdy import frames
from trainyard.cluster.server.apiserver.tunnels.spdy.headerblock import Headers

log = logging.getLogger(__name__)

INITIAL_WINDOW = 64 * 1024
"""SPDY/3.1's initial window, per stream and for the session."""
BUFFER = 1 << 20
"""Unread bytes a stream may hold before the session stops reading the wire."""
CHUNK = 32 * 1024
"""The largest DATA frame this side writes (the Go reader takes any, but small frames interleave streams)."""


class Wire(Protocol):
    """A byte pipe to the peer: ``receive`` returns b"" once the peer is gone."""

    async def receive(self) -> bytes: ...

    async def send(self, data: bytes) -> None: ...


class StreamClosed(ConnectionResetError):
    """Writing to a stream this side closed, the peer reset, or whose connection is gone."""


class Stream:
    """A stream the peer opened: its headers, what it sends, and our half."""

    def __init__(self, session: Session, stream_id: int, headers: Headers, *, remote_done: bool) -> None:
        self.session = session
        self.id = stream_id
        self.headers = headers
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._arrived = asyncio.Event()
        self._drained = asyncio.Event()
        self._drained.set()
        self.remote_done = remote_done
        self.local_done = False
        self.reset_status: int | None = None
        self._unacked = 0
        # Our frames on the stream must follow the SYN_REPLY: spdystream drops data on a stream not yet replied to.
        self.replied = asyncio.Event()

    def header(self, name: str) -> str:
        """The first value of a header, "" if it is absent (names are case-insensitive)."""
        values = self.headers.get(name.lower()) or [""]
        return values[0]

    async def read(self) -> bytes:
        """The next bytes the peer sent; b"" once it closed its half. A stream the peer reset, or whose
        connection is gone, raises ``StreamClosed``: nothing more will come, and nothing can go."""
        while not self._chunks:
            if self.reset_status is not None or self.session.gone:
                raise StreamClosed(f"stream {self.id} was reset")
            if self.remote_done:
                self.session.forget_if_done(self)
                return b""
            self._arrived.clear()
            await self._arrived.wait()
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._buffered <= BUFFER:
            self._drained.set()
        await self._acknowledge(len(chunk))
        return chunk

    async def write(self, data: bytes) -> None:
        await self.replied.wait()
        if self.local_done or self.reset_status is not None:
            raise StreamClosed(f"stream {self.id} is closed")
        for at in range(0, len(data), CHUNK):
            await self.session.send(frames.Data(self.id, data[at : at + CHUNK]))

    async def close(self) -> None:
        """Close our half (an empty DATA frame with FIN); the peer may still send."""
        await self.replied.wait()
        if self.local_done or self.reset_status is not None:
            return
        self.local_done = True
        await self.session.send(frames.Data(self.id, b"", fin=True))
        self.session.forget_if_done(self)

    async def reset(self, status: int = frames.Rst.CANCEL) -> None:
        """End both halves at once (RST_STREAM)."""
        if self.reset_status is not None:
            return
        self.reset_status = status
        self._end()
        if not (self.local_done and self.remote_done):
            await self.session.send(frames.RstStream(self.id, status))
        self.local_done = True
        self.session.forget_if_done(self)

    async def wait_drained(self) -> None:
        await self._drained.wait()

    def _deliver(self, data: bytes, fin: bool) -> None:
        if data and not self.remote_done:
            self._chunks.append(data)
            self._buffered += len(data)
            if self._buffered > BUFFER:
                self._drained.clear()
        if fin:
            self.remote_done = True
        self._arrived.set()

    def _end(self) -> None:
        self.replied.set()  # nothing will be replied any more: writers waiting for it find the stream closed
        self.remote_done = True
        self._chunks.clear()
        self._buffered = 0
        self._drained.set()
        self._arrived.set()

    async def _acknowledge(self, size: int) -> None:
        # Grant the window back in halves, as SPDY clients do, rather than per frame.
        self._unacked += size
        if self._unacked >= INITIAL_WINDOW // 2 and not self.remote_done and self.reset_status is None:
            delta, self._unacked = self._unacked, 0
            await self.session.send(frames.WindowUpdate(self.id, delta))
            await self.session.send(frames.WindowUpdate(0, delta))


Accept = Callable[[Stream], str | None]
"""Takes a new stream (and starts whatever serves it), or says why not (the stream is then reset)."""


class Session:
    def __init__(self, wire: Wire, accept: Accept) -> None:
        self.wire = wire
        self.accept = accept
        self.streams: dict[int, Stream] = {}
        self._encoder = frames.Encoder()
        self._decoder = frames.Decoder()
        self._lock = asyncio.Lock()
        self._last_peer_id = 0
        self.gone = False
        self.gone_away = False

    async def send(self, frame: frames.Frame) -> None:
        if self.gone:
            raise StreamClosed("the connection is closed")
        # Encoding inside the lock: header blocks share one zlib stream, so bytes must leave in encoding order.
        async with self._lock:
            data = self._encoder.encode(frame)
            try:
                await self.wire.send(data)
            except (ConnectionError, RuntimeError) as exc:
                self._lose()
                raise StreamClosed(f"the connection is closed: {exc}") from exc

    async def serve(self) -> None:
        """Read and handle the peer's frames until it closes the connection or breaks the protocol."""
        try:
            while not self.gone:
                data = await self.wire.receive()
                if not data:
                    break
                try:
                    received, broken = self._decoder.feed(data), None
                except frames.FrameError as exc:
                    received, broken = exc.decoded, exc
                for frame in received:
                    await self._handle(frame)
                if broken is not None:
                    log.info("SPDY connection closed on a protocol error: %s", broken)
                    await self._go_away(frames.GoAwayStatus.PROTOCOL_ERROR)
                    break
        except (ConnectionError, StreamClosed):
            pass
        finally:
            self._lose()

    async def close(self) -> None:
        """Say GOAWAY (no new streams), as spdystream's Close does; the caller then closes the wire."""
        if not self.gone:
            await self._go_away(frames.GoAwayStatus.OK)
        self._lose()

    def forget_if_done(self, stream: Stream) -> None:
        if stream.local_done and stream.remote_done and not stream._chunks:
            self.streams.pop(stream.id, None)

    async def _go_away(self, status: int) -> None:
        try:
            await self.send(frames.GoAway(self._last_peer_id, status))
        except StreamClosed:
            pass

    def _lose(self) -> None:
        self.gone = True
        for stream in list(self.streams.values()):
            stream._end()
            stream.local_done = True
        self.streams.clear()

    async def _handle(self, frame: frames.Frame) -> None:
        if isinstance(frame, frames.Data):
            stream = self.streams.get(frame.stream_id)
            if stream is None:
                return  # a stream already reset or forgotten, as spdystream drops such data
            stream._deliver(frame.data, frame.fin)
            self.forget_if_done(stream)
            await stream.wait_drained()
        elif isinstance(frame, frames.SynStream):
            await self._open(frame)
        elif isinstance(frame, frames.RstStream):
            stream = self.streams.pop(frame.stream_id, None)
            if stream is not None:
                stream.reset_status = frame.status
                stream.local_done = True
                stream._end()
        elif isinstance(frame, frames.Ping):
            # The peer's pings have its parity (odd ids from a client); ours would be even, and we send none.
            if frame.id % 2 == 1:
                await self.send(frame)
        elif isinstance(frame, frames.GoAway):
            self.gone_away = True
        elif isinstance(frame, frames.HeadersFrame):
            stream = self.streams.get(frame.stream_id)
            if stream is not None:
                stream.headers.update(frame.headers)
                if frame.fin:
                    stream._deliver(b"", True)
        # SETTINGS, WINDOW_UPDATE and SYN_REPLY (we open no streams) change nothing here: see the docstring.

    async def _open(self, frame: frames.SynStream) -> None:
        sid = frame.stream_id
        # A client's streams are odd and increasing (spdystream's own check, answered the same way).
        if sid % 2 == 0 or sid <= self._last_peer_id:
            await self.send(frames.RstStream(sid, frames.Rst.PROTOCOL_ERROR))
            return
        self._last_peer_id = sid
        if self.gone_away:
            await self.send(frames.RstStream(sid, frames.Rst.REFUSED_STREAM))
            return
        stream = Stream(self, sid, dict(frame.headers), remote_done=frame.fin or frame.unidirectional)
        self.streams[sid] = stream
        why = self.accept(stream)
        if why is not None:
            log.info("SPDY stream %d rejected: %s", sid, why)
            await stream.reset(frames.Rst.CANCEL)
            return
        await self.send(frames.SynReply(sid, {}))
        stream.replied.set()
