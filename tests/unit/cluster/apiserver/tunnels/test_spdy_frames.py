"""SPDY/3.1 frames: byte layout, round trips, and header blocks compressed with the SPDY/3 dictionary."""

from __future__ import annotations

import struct
import zlib

import pytest

from trainyard.cluster.server.apiserver.tunnels.spdy import frames, headerblock
from trainyard.cluster.server.apiserver.tunnels.spdy.dictionary import DICTIONARY

EVERY_FRAME: list[frames.Frame] = [
    frames.SynStream(1, {"streamtype": ["error"], "port": ["8080"], "requestid": ["0"]}),
    frames.SynStream(3, {"a": ["1"]}, associated_to=1, priority=7, slot=2, fin=True, unidirectional=True),
    frames.SynReply(1, {}),
    frames.SynReply(3, {"x-multi": ["one", "two"]}, fin=True),
    frames.RstStream(5, frames.Rst.CANCEL),
    frames.Settings((frames.SettingsEntry(frames.Setting.INITIAL_WINDOW_SIZE, 65536, flags=1),), clear=True),
    frames.Settings(),
    frames.Ping(7),
    frames.GoAway(9, frames.GoAwayStatus.PROTOCOL_ERROR),
    frames.HeadersFrame(1, {"k": ["v"]}, fin=True),
    frames.WindowUpdate(0, 32768),
    frames.Data(1, b"hello"),
    frames.Data(1, b"", fin=True),
]


def test_the_dictionary_is_the_one_of_the_spdy3_draft() -> None:
    # Every SPDY/3 zlib stream names its dictionary by this Adler-32 (bytes 2-5 of the stream).
    assert len(DICTIONARY) == 1423
    assert zlib.adler32(DICTIONARY) == 0xE3C6A7C2
    assert DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert DICTIONARY.endswith(b"charset=iso-8859-1,utf-,*,enq=0.")


@pytest.mark.parametrize("frame", EVERY_FRAME, ids=lambda f: type(f).__name__)
def test_each_frame_round_trips(frame: frames.Frame) -> None:
    assert frames.Decoder().feed(frames.Encoder().encode(frame)) == [frame]


def test_a_stream_of_frames_decodes_whatever_the_cut() -> None:
    encoder = frames.Encoder()  # one side's header blocks share its zlib stream
    encoded = b"".join(encoder.encode(f) for f in EVERY_FRAME)
    for step in (1, 3, 7, 64, len(encoded)):
        decoder = frames.Decoder()
        got: list[frames.Frame] = []
        for at in range(0, len(encoded), step):
            got += decoder.feed(encoded[at : at + step])
        assert got == EVERY_FRAME, step


@pytest.mark.parametrize(
    ("frame", "wire"),
    [
        (frames.Ping(1), "80030006 00000004 00000001"),
        (frames.Data(3, b"ab", fin=True), "00000003 01000002 6162"),
        (frames.RstStream(1, frames.Rst.CANCEL), "80030003 00000008 00000001 00000005"),
        (frames.WindowUpdate(1, 0x8000), "80030009 00000008 00000001 00008000"),
        (frames.GoAway(5), "80030007 00000008 00000005 00000000"),
        (frames.Settings((frames.SettingsEntry(4, 100),)), "80030004 0000000c 00000001 00000004 00000064"),
    ],
    ids=["ping", "data-fin", "rst", "window-update", "goaway", "settings"],
)
def test_frame_layout_is_the_drafts(frame: frames.Frame, wire: str) -> None:
    assert frames.Encoder().encode(frame) == bytes.fromhex(wire.replace(" ", ""))


def test_a_syn_stream_carries_ids_priority_and_a_zlib_block_primed_with_the_dictionary() -> None:
    raw = frames.Encoder().encode(frames.SynStream(5, {"Port": ["80"]}, associated_to=3, priority=2))
    control, kind, flags_length, sid, assoc, prio, slot = struct.unpack_from(">HHIIIBB", raw)
    assert (control, kind, sid, assoc, prio >> 5, slot) == (0x8003, frames.Type.SYN_STREAM, 5, 3, 2, 0)
    assert flags_length & 0xFFFFFF == len(raw) - 8
    block = raw[18:]
    assert block[2:6] == bytes.fromhex("e3c6a7c2")  # FDICT: the dictionary's Adler-32
    with pytest.raises(zlib.error):
        zlib.decompressobj().decompress(block)
    plain = zlib.decompressobj(zdict=DICTIONARY).decompress(block)
    assert plain == struct.pack(">II", 1, 4) + b"port" + struct.pack(">I", 2) + b"80"  # the name lower-cased


def test_header_blocks_share_one_compression_context_per_direction() -> None:
    encoder, decoder = frames.Encoder(), frames.Decoder()
    headers = {"streamtype": ["data"], "port": ["8080"], "requestid": ["12"]}
    first = encoder.encode(frames.SynStream(1, headers))
    second = encoder.encode(frames.SynStream(3, headers))
    assert len(second) < len(first)  # the second block refers back into the first
    assert decoder.feed(first + second) == [frames.SynStream(1, headers), frames.SynStream(3, headers)]
    with pytest.raises(frames.FrameError):
        frames.Decoder().feed(second)  # without the first block the context is not there


def test_several_values_of_a_name_are_joined_by_nul() -> None:
    assert headerblock.unpack(headerblock.pack({"a": ["x", "y"]})) == {"a": ["x", "y"]}
    assert headerblock.pack({"a": ["x", "y"]}).endswith(b"x\x00y")


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        ("80020006 00000004 00000001", "SPDY version 2 is not supported"),
        ("80030006 00000002 0000", "PING frame is too short"),
        ("80030004 00000004 00000005", "SETTINGS frame promises 5 entries"),
        ("80030002 00000008 00000001 00000000", "header block does not decompress"),
    ],
    ids=["version", "short-ping", "settings-count", "bad-block"],
)
def test_broken_frames_are_protocol_errors(wire: str, message: str) -> None:
    with pytest.raises(frames.FrameError, match=message):
        frames.Decoder().feed(bytes.fromhex(wire.replace(" ", "")))


def test_the_frames_before_a_broken_one_are_kept() -> None:
    ping = frames.Encoder().encode(frames.Ping(1))
    with pytest.raises(frames.FrameError) as broken:
        frames.Decoder().feed(ping + bytes.fromhex("8002000600000004 00000001"))
    assert broken.value.decoded == [frames.Ping(1)]


def test_header_block_errors() -> None:
    repeated = struct.pack(">I", 2) + (struct.pack(">I", 1) + b"a" + struct.pack(">I", 1) + b"b") * 2
    with pytest.raises(headerblock.HeaderBlockError, match="repeats the name 'a'"):
        headerblock.unpack(repeated)
    with pytest.raises(headerblock.HeaderBlockError, match="truncated"):
        headerblock.unpack(struct.pack(">II", 1, 9) + b"abc")


def test_unknown_control_frames_are_skipped() -> None:
    credential = struct.pack(">HHI", 0x8003, 10, 3) + b"xyz"
    assert frames.Decoder().feed(credential + frames.Encoder().encode(frames.Ping(1))) == [frames.Ping(1)]
