"""What forwarding one connection to a pod's port means here, whichever protocol carried it.

A pod shares the node's network (``host`` mode), so its ports listen on this machine: forwarding
dials ``localhost:<port>`` here, as the container runtime dials it inside the pod's network
namespace (IPv4, then IPv6, as containerd), and copies bytes both ways until the pod's side ends.
Failures are worded as the kubelet words them, since kubectl prints them as they come.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

READ_SIZE = 32 * 1024


@dataclass(frozen=True)
class PodTarget:
    """The pod whose ports are forwarded; ``uid`` stands for the kubelet's pod sandbox id in messages."""

    namespace: str
    name: str
    uid: str
    host: str = "localhost"


def forward_error(target: PodTarget, port: int, cause: str) -> str:
    # The kubelet's CRI path has the sandbox id as the pod and no uid, hence "uid : ".
    return f"error forwarding port {port} to pod {target.uid}, uid : {cause}"


async def dial(target: PodTarget, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Connect to the pod's port over IPv4, then IPv6, as containerd does; the error names both tries."""
    failures = []
    for family, address, shown in (("tcp4", "127.0.0.1", "127.0.0.1"), ("tcp6", "::1", "[::1]")):
        try:
            return await asyncio.open_connection(address, port)
        except OSError as exc:
            reason = os.strerror(exc.errno).lower() if exc.errno else str(exc)
            failures.append(f"dial {family} {shown}:{port}: connect: {reason}")
    raise ConnectionError(
        f"failed to connect to {target.host}:{port} inside the pod's network (the node's, in host network mode), "
        f"IPv4: {failures[0]} IPv6 {failures[1]} "
    )


async def pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    receive: Callable[[], Awaitable[bytes]],
    send: Callable[[bytes], Awaitable[None]],
    done: Callable[[], Awaitable[None]],
) -> None:
    """Copy the client's bytes (``receive``, b"" at its end) to the pod and the pod's (until it closes)
    to ``send``; then ``done``. Ends when the pod side ends or the client side is gone."""

    async def upstream() -> None:
        while data := await receive():
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()  # the client closed its half: so do we towards the pod

    async def downstream() -> None:
        while data := await reader.read(READ_SIZE):
            await send(data)

    up = asyncio.create_task(upstream())
    down = asyncio.create_task(downstream())
    try:
        finished, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        if up in finished and not down.done():
            up.result()  # the client went (raises), or only closed its half: the pod's answer still flows
            await down
    except ConnectionError:
        pass  # either side gone: the other is closed below
    finally:
        for task in (up, down):
            task.cancel()
        await asyncio.gather(up, down, return_exceptions=True)
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()
        await done()
