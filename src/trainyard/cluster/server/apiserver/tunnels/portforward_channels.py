"""``pods/portforward`` over the WebSocket channel protocol (``v4.channel.k8s.io``).

The official ``kubernetes`` Python client's ``portforward()`` speaks it: one WebSocket for all the
``?ports=`` asked for, each binary message prefixed by its channel byte, two channels per port
(``2i`` data both ways, ``2i+1`` errors from the server). Each channel first gets the port number
(two bytes, little endian), then the ports are dialled at once, as the kubelet's ``websocket.go``
does; the connection closes once every port's connection has ended, or when the client leaves.
"""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import WSMsgType, web

from trainyard.cluster.server.apiserver.tunnels import upgrades
from trainyard.cluster.server.apiserver.tunnels.forwarding import PodTarget, dial, forward_error, pipe

PROTOCOLS = ("v4.channel.k8s.io",)
"""Binary channels; a client that offers no subprotocol gets them too, as from the kubelet."""


def ports(query: dict[str, list[str]]) -> list[int]:
    """The ports of ``?ports=`` (the API's ``PodPortForwardOptions``), each possibly a comma list."""
    values = query.get("ports") or query.get("port") or []
    if not values:
        raise upgrades.Refused(400, 'query parameter "port" is required')
    found = []
    for value in values:
        if not value:
            raise upgrades.Refused(400, 'query parameter "port" cannot be empty')
        for one in value.split(","):
            if not one.isdigit() or int(one) > 65535:
                raise upgrades.Refused(400, f'unable to parse "{value}" as a port')
            if int(one) < 1:
                raise upgrades.Refused(400, f'port "{value}" must be > 0')
            found.append(int(one))
    return found


async def serve(request: web.Request, target: PodTarget) -> web.StreamResponse:
    wanted = ports({k: request.query.getall(k) for k in set(request.query.keys())})
    offered = upgrades.websocket_protocols(request.headers)
    if offered:
        ws = await upgrades.accept_websocket(request, PROTOCOLS)
    else:
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
    inboxes: list[asyncio.Queue[bytes]] = [asyncio.Queue() for _ in wanted]
    lock = asyncio.Lock()

    async def send(channel: int, data: bytes) -> None:
        async with lock:
            await ws.send_bytes(bytes([channel]) + data)

    async def forward(index: int, port: int) -> None:
        try:
            reader, writer = await dial(target, port)
        except ConnectionError as exc:
            await send(2 * index + 1, forward_error(target, port, str(exc)).encode())
            return

        async def nothing() -> None:
            return None

        await pipe(reader, writer, inboxes[index].get, lambda data: send(2 * index, data), nothing)

    for index, port in enumerate(wanted):
        for channel in (2 * index, 2 * index + 1):
            await send(channel, port.to_bytes(2, "little"))

    async def forward_all() -> None:
        await asyncio.gather(*(forward(i, p) for i, p in enumerate(wanted)))

    forwards = asyncio.create_task(forward_all())
    reading = asyncio.create_task(_read(ws, inboxes))
    try:
        await asyncio.wait({forwards, reading}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (forwards, reading):
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(forwards, reading, return_exceptions=True)
        await ws.close()
    return ws


async def _read(ws: web.WebSocketResponse, inboxes: list[asyncio.Queue[bytes]]) -> None:
    """The client's messages to the data channels; the error channels are the server's to write."""
    async for msg in ws:
        if msg.type != WSMsgType.BINARY or not msg.data:
            continue
        channel, data = msg.data[0], msg.data[1:]
        if channel % 2 == 0 and channel // 2 < len(inboxes) and data:
            inboxes[channel // 2].put_nowait(data)
    for inbox in inboxes:
        inbox.put_nowait(b"")  # the client is gone: the pods' connections are half-closed
