"""The WebSocket transport of ``pods/exec`` and ``pods/attach``, as kube-apiserver v1.32 frames it.

The subprotocols (``Sec-WebSocket-Protocol``; the client's first that is served wins, none means
the plain channel protocol) are those of the kubelet's ``remotecommand`` websocket server:

============================  ======  =====================================================
``v5.channel.k8s.io``         binary  v4, plus the CLOSE signal: ``[255, channel]`` ends a stream
``v4.channel.k8s.io``         binary  the error channel carries a ``metav1.Status`` (JSON)
``v4.base64.channel.k8s.io``  text    as v4, data base64-encoded
``channel.k8s.io`` (or none)  binary  the error channel carries plain text, nothing on success
``base64.channel.k8s.io``     text    as ``channel.k8s.io``, base64
============================  ======  =====================================================

Every message is one stream's: a binary message starts with its channel byte, a text message
with the channel as an ASCII digit followed by base64. Channels: 0 stdin, 1 stdout, 2 stderr,
3 error, 4 resize (JSON ``{"Width": W, "Height": H}``, one or more). The server opens with an
empty message on the lowest channel it writes (stdout, else stderr, else error), ends with the
error channel's message, then closes the connection normally. Clients may send binary-protocol
messages as text frames (the ``kubernetes`` Python client does): their bytes are taken as sent.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import logging
from collections.abc import Mapping

from aiohttp import WSMsgType, web

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.remotecommand import options as opts
from trainyard.cluster.server.apiserver.remotecommand.session import Session, outcome_unless

log = logging.getLogger(__name__)

STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE_SIGNAL = 255
V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
V4_BASE64 = "v4.base64.channel.k8s.io"
CHANNEL = "channel.k8s.io"
BASE64 = "base64.channel.k8s.io"
PROTOCOLS = (V5, V4, V4_BASE64, CHANNEL, BASE64)


def is_websocket(headers: Mapping[str, str]) -> bool:
    return "upgrade" in headers.get("Connection", "").lower() and headers.get("Upgrade", "").lower() == "websocket"


def choose(offered: str | None) -> str:
    """The subprotocol to answer with ("" for the plain channel protocol), or the handshake's refusal."""
    asked = [p.strip() for p in (offered or "").split(",") if p.strip()]
    if not asked:
        return ""
    for protocol in asked:
        if protocol in PROTOCOLS:
            return protocol
    raise errors.bad_request(f"requested protocol(s) are not supported: {asked}; supports {['', *PROTOCOLS]}")


class Framing:
    """Encoding and decoding of one negotiated subprotocol's messages (no I/O)."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.base64 = protocol in (V4_BASE64, BASE64)
        self.status_json = protocol in (V5, V4, V4_BASE64)
        self.close_signal = protocol == V5

    def encode(self, channel: int, data: bytes) -> bytes | str:
        if self.base64:
            return chr(ord("0") + channel) + base64.b64encode(data).decode()
        return bytes([channel]) + data

    def decode(self, message: bytes | str) -> tuple[int, bytes] | None:
        """(channel, data) of an incoming message; None for an empty or undecodable one."""
        if self.base64:
            text = message if isinstance(message, str) else message.decode(errors="replace")
            if not text or not text[0].isdigit():
                return None
            try:
                return int(text[0]), base64.b64decode(text[1:])
            except binascii.Error:
                return None
        raw = message.encode() if isinstance(message, str) else message
        return (raw[0], raw[1:]) if raw else None

    def error_message(self, status: Obj) -> bytes | None:
        """The error channel's last word: the Status (v4 and later), or its text (none on success)."""
        if self.status_json:
            return json.dumps(status).encode()
        text = opts.text_of(status)
        return text.encode() if text else None


class Resizes:
    """Window sizes from the resize channel, a stream of JSON objects split anywhere across messages."""

    def __init__(self) -> None:
        self.pending = ""

    def feed(self, data: bytes) -> list[tuple[int, int]]:
        self.pending += data.decode(errors="replace")
        sizes, decoder = [], json.JSONDecoder()
        while self.pending.strip():
            text = self.pending.lstrip()
            try:
                value, end = decoder.raw_decode(text)
            except ValueError:
                if len(text) > 4096:  # not JSON and never going to be: drop it
                    text, end = "", 0
                self.pending = text
                break
            self.pending = text[end:]
            if isinstance(value, dict):
                with contextlib.suppress(TypeError, ValueError):
                    sizes.append((int(value.get("Width", 0)), int(value.get("Height", 0))))
        return sizes


class _Channels:
    """The session's output, written to the WebSocket one message at a time."""

    def __init__(self, ws: web.WebSocketResponse, framing: Framing) -> None:
        self.ws, self.framing = ws, framing
        self.lock = asyncio.Lock()

    async def send(self, channel: int, data: bytes) -> None:
        message = self.framing.encode(channel, data)
        async with self.lock:
            if self.ws.closed:
                raise ConnectionResetError("the client closed the connection")
            if isinstance(message, str):
                await self.ws.send_str(message)
            else:
                await self.ws.send_bytes(message)

    async def stdout(self, data: bytes) -> None:
        await self.send(STDOUT, data)

    async def stderr(self, data: bytes) -> None:
        await self.send(STDERR, data)


async def serve(request: web.Request, session: Session, *, stdout: bool, stderr: bool) -> web.WebSocketResponse:
    """Upgrade ``request`` and run ``session`` over it until it ends or the client goes."""
    protocol = choose(request.headers.get("Sec-WebSocket-Protocol"))
    ws = web.WebSocketResponse(protocols=(protocol,) if protocol else (), max_msg_size=0, autoping=True)
    await ws.prepare(request)
    framing = Framing(protocol)
    channels = _Channels(ws, framing)
    await channels.send(STDOUT if stdout else STDERR if stderr else ERROR, b"")
    running = asyncio.create_task(session.run(channels))
    reading = asyncio.create_task(_read(ws, framing, session))
    try:
        outcome = await outcome_unless(session, running, reading)
        if outcome is None:
            return ws
        final = framing.error_message(outcome.status())
        with contextlib.suppress(ConnectionResetError):
            if final is not None:
                await channels.send(ERROR, final)
        # One receiver at a time: ``close`` reads the client's answer to the close frame itself.
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        await ws.close()
    finally:
        reading.cancel()
        if not running.done():
            session.close()
            running.cancel()
    return ws


async def _read(ws: web.WebSocketResponse, framing: Framing, session: Session) -> None:
    resizes = Resizes()
    async for message in ws:
        if message.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
            continue
        decoded = framing.decode(message.data)
        if decoded is None:
            continue
        channel, data = decoded
        if channel == STDIN:
            await session.write_stdin(data)
        elif channel == RESIZE:
            for width, height in resizes.feed(data):
                session.resize(width, height)
        elif channel == CLOSE_SIGNAL and framing.close_signal and data[:1] == bytes([STDIN]):
            session.close_stdin()
