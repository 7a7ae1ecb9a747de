"""Taking over an HTTP connection for a streaming subresource: SPDY/3.1 upgrade, or a WebSocket.

kubectl 1.31+ asks first for a WebSocket whose subprotocol is ``SPDY/3.1+<protocol>`` and sends
SPDY frames inside its binary messages (client-go's tunneling dialer; kube-apiserver's tunneling
handler answers it); when that upgrade fails it falls back to ``Connection: Upgrade``,
``Upgrade: SPDY/3.1`` with the protocols it speaks in ``X-Stream-Protocol-Version``, which the
server answers with 101, the chosen version and SPDY on the bare connection (apimachinery's
``httpstream.Handshake`` and ``spdy.responseUpgrader``). Both end up as a ``spdy.session.Wire``.
Refusals use upstream's plain-text answers, which kubectl prints as they are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import WSMsgType, web
from multidict import MultiMapping

PROTOCOL_HEADER = "X-Stream-Protocol-Version"
ACCEPTED_HEADER = "X-Accepted-Stream-Protocol-Versions"
SPDY_31 = "SPDY/3.1"
TUNNEL_PREFIX = "SPDY/3.1+"
"""Prefix of the WebSocket subprotocols that carry SPDY (client-go ``WebsocketsSPDYTunnelingPrefix``)."""
READ_LIMIT = 1 << 20
"""Bytes read ahead of the session before the connection stops being read."""


class Refused(Exception):
    """An upgrade answered with ``code`` and a plain-text ``message`` (and optional headers)."""

    def __init__(self, code: int, message: str, headers: Mapping[str, str | Sequence[str]] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.headers = dict(headers or {})

    def response(self) -> web.Response:
        resp = web.Response(status=self.code, text=str(self) + "\n")
        for name, value in self.headers.items():
            for one in [value] if isinstance(value, str) else value:
                resp.headers.add(name, one)
        return resp


def _tokens(values: Sequence[str]) -> list[str]:
    return [t.strip() for v in values for t in v.split(",") if t.strip()]


def is_websocket(headers: Mapping[str, str]) -> bool:
    return headers.get("Upgrade", "").strip().lower() == "websocket"


def is_upgrade(headers: Mapping[str, str]) -> bool:
    """apimachinery's ``IsUpgradeRequest``: a Connection header naming upgrade."""
    return "upgrade" in headers.get("Connection", "").lower()


def websocket_protocols(headers: MultiMapping[str]) -> list[str]:
    return _tokens(headers.getall("Sec-WebSocket-Protocol", []))


def negotiate(headers: MultiMapping[str], server: Sequence[str]) -> str:
    """The first protocol the client lists that the server speaks (``httpstream.Handshake``)."""
    client = _tokens(headers.getall(PROTOCOL_HEADER, []))
    if not client:
        raise Refused(400, f"unable to upgrade: {PROTOCOL_HEADER} is required")
    for proto in client:
        if proto in server:
            return proto
    raise Refused(
        403,
        f"unable to upgrade: unable to negotiate protocol: client supports [{' '.join(client)}], "
        f"server accepts [{' '.join(server)}]",
        {ACCEPTED_HEADER: list(server)},
    )


class _Feed:
    """What aiohttp hands the bytes of an upgraded connection to (its ``set_parser`` interface)."""

    def __init__(self, protocol: Any) -> None:
        self._protocol = protocol
        self._chunks: list[bytes] = []
        self._size = 0
        self._eof = False
        self._ready = asyncio.Event()
        self._paused = False

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._chunks.append(bytes(data))
        self._size += len(data)
        self._ready.set()
        if self._size > READ_LIMIT and not self._paused:
            self._paused = True
            self._protocol.pause_reading()
        return False, b""

    def feed_eof(self) -> None:
        self._eof = True
        self._ready.set()

    async def receive(self) -> bytes:
        while not self._chunks:
            if self._eof:
                return b""
            self._ready.clear()
            await self._ready.wait()
        data = b"".join(self._chunks)
        self._chunks.clear()
        self._size = 0
        if self._paused:
            self._paused = False
            self._protocol.resume_reading()
        return data


class RawWire:
    """The upgraded connection itself, after a 101 to ``Upgrade: SPDY/3.1``."""

    def __init__(self, request: web.Request, writer: Any) -> None:
        protocol: Any = request.protocol
        transport = request.transport
        if transport is None:
            raise ConnectionResetError("the connection closed before the upgrade")
        self._transport = transport
        self._writer = writer
        self._feed = _Feed(protocol)
        # aiohttp gives an upgraded connection's bytes to a parser of our own, as it does to its WebSocket reader.
        protocol.set_parser(self._feed)
        protocol.keep_alive(False)

    async def receive(self) -> bytes:
        return await self._feed.receive()

    async def send(self, data: bytes) -> None:
        if self._transport.is_closing():
            raise ConnectionResetError("the connection is closed")
        self._transport.write(data)
        await self._writer.drain()

    def close(self) -> None:
        self._transport.close()


async def upgrade_spdy(request: web.Request, server: Sequence[str]) -> tuple[RawWire, web.StreamResponse]:
    """Answer 101 with the negotiated protocol and take the connection over (or raise ``Refused``)."""
    if not is_upgrade(request.headers) or SPDY_31.lower() not in request.headers.get("Upgrade", "").lower():
        raise Refused(400, f"unable to upgrade: missing upgrade headers in request: {dict(request.headers)!r}")
    chosen = negotiate(request.headers, server)
    resp = web.StreamResponse(status=101)
    resp.headers["Connection"] = "Upgrade"
    resp.headers["Upgrade"] = SPDY_31
    resp.headers[PROTOCOL_HEADER] = chosen
    resp.force_close()
    writer = await resp.prepare(request)
    return RawWire(request, writer), resp


class WebSocketWire:
    """SPDY inside the binary messages of a WebSocket, as client-go's ``TunnelingConnection`` sends it."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def receive(self) -> bytes:
        while True:
            msg = await self.ws.receive()
            if msg.type == WSMsgType.BINARY:
                data: bytes = msg.data
                if data:
                    return data
            elif msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
                return b""
            # text frames are not part of the tunnel; upstream's tunnel rejects them, we skip them

    async def send(self, data: bytes) -> None:
        if self.ws.closed:
            raise ConnectionResetError("the WebSocket is closed")
        await self.ws.send_bytes(data)


async def accept_websocket(request: web.Request, protocols: Sequence[str]) -> web.WebSocketResponse:
    """Answer the WebSocket handshake with the first of ``protocols`` the client offers."""
    offered = websocket_protocols(request.headers)
    chosen = next((p for p in offered if p in protocols), None)
    if chosen is None:
        raise Refused(
            400,
            f"unable to upgrade: unable to negotiate protocol: client supports [{' '.join(offered)}], "
            f"server accepts [{' '.join(protocols)}]",
        )
    # No heartbeat of ours: kubectl pings over SPDY; aiohttp answers the client's WebSocket pings.
    ws = web.WebSocketResponse(protocols=[chosen], max_msg_size=0)
    await ws.prepare(request)
    return ws
