"""SPDY/3 name/value header blocks: the 32-bit length-prefixed pairs, and their zlib compression.

Each direction of a connection keeps one zlib stream for all its header blocks, primed with the
SPDY/3 dictionary and flushed (``Z_SYNC_FLUSH``) at the end of each block, so the blocks must be
compressed and read in the order their frames travel. Names are lower case on the wire (the Go
framer rejects others); a name's several values are joined by NUL.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence

from trainyard.cluster.server.apiserver.tunnels.spdy.dictionary import DICTIONARY

Headers = dict[str, list[str]]
"""Header names (lower case) to their values, as a block carries them."""

MAX_BLOCK = 1 << 20
"""The most bytes a decompressed header block may take; a peer that sends more is broken or hostile."""


class HeaderBlockError(ValueError):
    """A header block that cannot be read: the connection's compression state is lost with it."""


def pack(headers: Mapping[str, Sequence[str]]) -> bytes:
    """The uncompressed block: a count, then each name and its NUL-joined values."""
    parts = [struct.pack(">I", len(headers))]
    for name, values in headers.items():
        raw_name = name.lower().encode("utf-8")
        raw_value = "\x00".join(values).encode("utf-8")
        parts += [struct.pack(">I", len(raw_name)), raw_name, struct.pack(">I", len(raw_value)), raw_value]
    return b"".join(parts)


def unpack(block: bytes) -> Headers:
    """The pairs of an uncompressed block; a truncated block or a repeated name is an error."""
    view = memoryview(block)

    def take(at: int) -> tuple[bytes, int]:
        if at + 4 > len(view):
            raise HeaderBlockError("header block is truncated")
        (size,) = struct.unpack_from(">I", view, at)
        end = at + 4 + size
        if end > len(view):
            raise HeaderBlockError("header block is truncated")
        return bytes(view[at + 4 : end]), end

    if len(view) < 4:
        raise HeaderBlockError("header block is truncated")
    (count,) = struct.unpack_from(">I", view, 0)
    headers: Headers = {}
    at = 4
    for _ in range(count):
        raw_name, at = take(at)
        raw_value, at = take(at)
        name = raw_name.decode("utf-8", "replace").lower()
        if not name:
            raise HeaderBlockError("header block has an empty name")
        if name in headers:
            raise HeaderBlockError(f"header block repeats the name {name!r}")
        headers[name] = raw_value.decode("utf-8", "replace").split("\x00")
    return headers


class Compressor:
    """One direction's compression context: every block this side sends goes through it, in order."""

    def __init__(self) -> None:
        self._z = zlib.compressobj(level=zlib.Z_DEFAULT_COMPRESSION, zdict=DICTIONARY)

    def compress(self, headers: Mapping[str, Sequence[str]]) -> bytes:
        return self._z.compress(pack(headers)) + self._z.flush(zlib.Z_SYNC_FLUSH)


class Decompressor:
    """The other direction's context: every block the peer sends, in the order it sent them."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(zdict=DICTIONARY)

    def decompress(self, data: bytes) -> Headers:
        try:
            block = self._z.decompress(data, MAX_BLOCK)
        except zlib.error as exc:
            raise HeaderBlockError(f"header block does not decompress: {exc}") from exc
        if self._z.unconsumed_tail:
            raise HeaderBlockError(f"header block is larger than {MAX_BLOCK} bytes")
        return unpack(block)
