"""SPDY/3.1 frames as values, and the codec between them and bytes (no I/O).

A control frame is ``1 | version(15) | type(16) | flags(8) | length(24) | payload``; a DATA
frame is ``0 | stream id(31) | flags(8) | length(24) | data``. ``Encoder`` and ``Decoder`` each
own one direction's header compression context (``headerblock``), which is why they are objects:
a connection has exactly one of each, and frames pass through them in wire order. Control frame
types this codec does not know (CREDENTIAL, NOOP of SPDY/2) are skipped, as the draft asks.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from trainyard.cluster.server.apiserver.tunnels.spdy.headerblock import (
    Compressor,
    Decompressor,
    HeaderBlockError,
    Headers,
)

VERSION = 3
MAX_LENGTH = (1 << 24) - 1
"""The largest payload one frame may carry (a 24-bit length)."""

FLAG_FIN = 0x01
FLAG_UNIDIRECTIONAL = 0x02
FLAG_CLEAR_SETTINGS = 0x01
_ID = 0x7FFFFFFF


class Type(enum.IntEnum):
    SYN_STREAM = 1
    SYN_REPLY = 2
    RST_STREAM = 3
    SETTINGS = 4
    PING = 6
    GOAWAY = 7
    HEADERS = 8
    WINDOW_UPDATE = 9


class Rst(enum.IntEnum):
    """RST_STREAM status codes."""

    PROTOCOL_ERROR = 1
    INVALID_STREAM = 2
    REFUSED_STREAM = 3
    UNSUPPORTED_VERSION = 4
    CANCEL = 5
    INTERNAL_ERROR = 6
    FLOW_CONTROL_ERROR = 7
    STREAM_IN_USE = 8
    STREAM_ALREADY_CLOSED = 9
    INVALID_CREDENTIALS = 10
    FRAME_TOO_LARGE = 11


class GoAwayStatus(enum.IntEnum):
    OK = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


class Setting(enum.IntEnum):
    UPLOAD_BANDWIDTH = 1
    DOWNLOAD_BANDWIDTH = 2
    ROUND_TRIP_TIME = 3
    MAX_CONCURRENT_STREAMS = 4
    CURRENT_CWND = 5
    DOWNLOAD_RETRANS_RATE = 6
    INITIAL_WINDOW_SIZE = 7
    CLIENT_CERTIFICATE_VECTOR_SIZE = 8


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    associated_to: int = 0
    priority: int = 0
    slot: int = 0
    fin: bool = False
    unidirectional: bool = False


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class SettingsEntry:
    id: int
    value: int
    flags: int = 0


@dataclass(frozen=True)
class Settings:
    entries: tuple[SettingsEntry, ...] = ()
    clear: bool = False


@dataclass(frozen=True)
class Ping:
    id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: int = GoAwayStatus.OK


@dataclass(frozen=True)
class HeadersFrame:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes = b""
    fin: bool = False


Frame = SynStream | SynReply | RstStream | Settings | Ping | GoAway | HeadersFrame | WindowUpdate | Data


class FrameError(ValueError):
    """A frame that breaks the protocol: the connection cannot go on (GOAWAY). ``decoded``: the
    frames that came before it in the same ``Decoder.feed``, still to be handled."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.decoded: list[Frame] = []


def _control(kind: Type, flags: int, payload: bytes) -> bytes:
    if len(payload) > MAX_LENGTH:
        raise FrameError(f"{kind.name} payload of {len(payload)} bytes exceeds the 24-bit length")
    return struct.pack(">HHI", 0x8000 | VERSION, kind, (flags << 24) | len(payload)) + payload


class Encoder:
    """Frames to bytes for one side of a connection (its header blocks share one zlib stream)."""

    def __init__(self) -> None:
        self._headers = Compressor()

    def encode(self, frame: Frame) -> bytes:
        if isinstance(frame, Data):
            if len(frame.data) > MAX_LENGTH:
                raise FrameError(f"DATA of {len(frame.data)} bytes exceeds the 24-bit length")
            flags = FLAG_FIN if frame.fin else 0
            return struct.pack(">II", frame.stream_id & _ID, (flags << 24) | len(frame.data)) + frame.data
        if isinstance(frame, SynStream):
            flags = (FLAG_FIN if frame.fin else 0) | (FLAG_UNIDIRECTIONAL if frame.unidirectional else 0)
            head = struct.pack(
                ">IIBB", frame.stream_id & _ID, frame.associated_to & _ID, (frame.priority & 7) << 5, frame.slot
            )
            return _control(Type.SYN_STREAM, flags, head + self._headers.compress(frame.headers))
        if isinstance(frame, SynReply | HeadersFrame):
            kind = Type.SYN_REPLY if isinstance(frame, SynReply) else Type.HEADERS
            block = struct.pack(">I", frame.stream_id & _ID) + self._headers.compress(frame.headers)
            return _control(kind, FLAG_FIN if frame.fin else 0, block)
        if isinstance(frame, RstStream):
            return _control(Type.RST_STREAM, 0, struct.pack(">II", frame.stream_id & _ID, frame.status))
        if isinstance(frame, Settings):
            body = struct.pack(">I", len(frame.entries)) + b"".join(
                struct.pack(">II", (e.flags << 24) | (e.id & 0xFFFFFF), e.value) for e in frame.entries
            )
            return _control(Type.SETTINGS, FLAG_CLEAR_SETTINGS if frame.clear else 0, body)
        if isinstance(frame, Ping):
            return _control(Type.PING, 0, struct.pack(">I", frame.id))
        if isinstance(frame, GoAway):
            return _control(Type.GOAWAY, 0, struct.pack(">II", frame.last_good_stream_id & _ID, frame.status))
        return _control(Type.WINDOW_UPDATE, 0, struct.pack(">II", frame.stream_id & _ID, frame.delta & _ID))


@dataclass
class Decoder:
    """Bytes to frames for one side of a connection: ``feed`` what arrived, get the frames it completes."""

    _buffer: bytearray = field(default_factory=bytearray)
    _headers: Decompressor = field(default_factory=Decompressor)

    def feed(self, data: bytes) -> list[Frame]:
        self._buffer += data
        frames: list[Frame] = []
        at = 0  # frames are cut from here; the buffer is compacted once, after the loop
        try:
            while len(self._buffer) - at >= 8:
                first, second = struct.unpack_from(">II", self._buffer, at)
                length = second & 0xFFFFFF
                if len(self._buffer) - at < 8 + length:
                    break
                payload = bytes(self._buffer[at + 8 : at + 8 + length])
                at += 8 + length
                frame = self._frame(first, second >> 24, payload)
                if frame is not None:
                    frames.append(frame)
        except FrameError as exc:
            exc.decoded = frames  # the frames before the broken one are still the peer's
            raise
        finally:
            del self._buffer[:at]
        return frames

    def _frame(self, first: int, flags: int, payload: bytes) -> Frame | None:
        if not first & 0x80000000:
            return Data(first & _ID, payload, bool(flags & FLAG_FIN))
        version, kind = (first >> 16) & 0x7FFF, first & 0xFFFF
        if version != VERSION:
            raise FrameError(f"SPDY version {version} is not supported; this server speaks SPDY/3.1")
        return self._control(kind, flags, payload)

    def _control(self, kind: int, flags: int, payload: bytes) -> Frame | None:
        fin = bool(flags & FLAG_FIN)
        try:
            if kind == Type.SYN_STREAM:
                sid, assoc, prio, slot = _fields(">IIBB", payload, "SYN_STREAM")
                headers = self._headers.decompress(payload[10:])
                return SynStream(
                    sid & _ID, headers, assoc & _ID, prio >> 5, slot, fin, bool(flags & FLAG_UNIDIRECTIONAL)
                )
            if kind in (Type.SYN_REPLY, Type.HEADERS):
                (sid,) = _fields(">I", payload, Type(kind).name)
                headers = self._headers.decompress(payload[4:])
                if kind == Type.SYN_REPLY:
                    return SynReply(sid & _ID, headers, fin)
                return HeadersFrame(sid & _ID, headers, fin)
        except HeaderBlockError as exc:
            # The zlib stream is shared by all the connection's blocks: one lost block loses them all.
            raise FrameError(str(exc)) from exc
        if kind == Type.RST_STREAM:
            sid, status = _fields(">II", payload, "RST_STREAM")
            return RstStream(sid & _ID, status)
        if kind == Type.SETTINGS:
            (count,) = _fields(">I", payload, "SETTINGS")
            if len(payload) < 4 + 8 * count:
                raise FrameError(f"SETTINGS frame promises {count} entries in {len(payload)} bytes")
            entries = []
            for i in range(count):
                key, value = struct.unpack_from(">II", payload, 4 + 8 * i)
                entries.append(SettingsEntry(key & 0xFFFFFF, value, key >> 24))
            return Settings(tuple(entries), bool(flags & FLAG_CLEAR_SETTINGS))
        if kind == Type.PING:
            (ping_id,) = _fields(">I", payload, "PING")
            return Ping(ping_id)
        if kind == Type.GOAWAY:
            last = _fields(">I", payload, "GOAWAY")[0]
            status = struct.unpack_from(">I", payload, 4)[0] if len(payload) >= 8 else GoAwayStatus.OK
            return GoAway(last & _ID, status)
        if kind == Type.WINDOW_UPDATE:
            sid, delta = _fields(">II", payload, "WINDOW_UPDATE")
            return WindowUpdate(sid & _ID, delta & _ID)
        return None


def _fields(fmt: str, payload: bytes, what: str) -> tuple[int, ...]:
    if len(payload) < struct.calcsize(fmt):
        raise FrameError(f"{what} frame is too short ({len(payload)} bytes)")
    return struct.unpack_from(fmt, payload, 0)
