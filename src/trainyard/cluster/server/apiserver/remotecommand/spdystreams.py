"""The SPDY/3.1 transport of ``pods/exec`` and ``pods/attach``, as the kubelet's ``httpstream`` server speaks it.

kubectl uses it when WebSocket is refused or turned off (``KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false``),
and clients before 1.30 always. The request upgrades with ``X-Stream-Protocol-Version`` listing
``v5.channel.k8s.io`` .. ``channel.k8s.io`` (the server takes the client's first it speaks; v5 is v4
over SPDY, its CLOSE signal being a WebSocket matter). The client then opens one stream per
``streamType``: ``error`` first, then ``stdin``, ``stdout``, ``stderr`` as asked, and ``resize`` with a
TTY from v3 on. Once all have come (within the kubelet's 30 s) the session runs: the stdin stream's
data goes to the command and its half-close ends the command's stdin, resize carries JSON sizes
(``{"Width": W, "Height": H}``) one after another. At the end stdout and stderr are closed, the
error stream gets the ``metav1.Status`` (v4 and v5; v1-v3: its text, nothing on success) and the
connection is closed (GOAWAY), which is how kubectl learns the exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

from aiohttp import web

from trainyard.cluster.server.apiserver.remotecommand import options as opts
from trainyard.cluster.server.apiserver.remotecommand.options import Options
from trainyard.cluster.server.apiserver.remotecommand.session import Session, outcome_unless
from trainyard.cluster.server.apiserver.remotecommand.websocket import Resizes
from trainyard.cluster.server.apiserver.tunnels import upgrades
from trainyard.cluster.server.apiserver.tunnels.spdy import session as spdy
from trainyard.cluster.server.apiserver.tunnels.spdy.session import Stream, StreamClosed

log = logging.getLogger(__name__)

V5, V4, V3, V2, V1 = (
    "v5.channel.k8s.io",
    "v4.channel.k8s.io",
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
)
PROTOCOLS = (V5, V4, V3, V2, V1)
STREAM_CREATION_TIMEOUT = 30.0
"""Seconds the client has to open its streams (the kubelet's default ``streamCreationTimeout``)."""
KINDS = ("error", "stdin", "stdout", "stderr", "resize")


def is_spdy(headers: Mapping[str, str]) -> bool:
    return upgrades.is_upgrade(headers) and upgrades.SPDY_31.lower() in headers.get("Upgrade", "").lower()


def expected(protocol: str, options: Options) -> set[str]:
    """The streams a client of ``protocol`` opens for ``options``."""
    kinds = {"error"} | {k for k, on in (("stdin", options.stdin), ("stdout", options.stdout)) if on}
    if options.stderr:
        kinds.add("stderr")
    if options.tty and protocol not in (V2, V1):
        kinds.add("resize")
    return kinds


def error_message(protocol: str, status: Mapping[str, object]) -> bytes:
    if protocol in (V5, V4):
        return json.dumps(status).encode()
    return opts.text_of(status).encode()


class _Output:
    def __init__(self, streams: dict[str, Stream]) -> None:
        self.streams = streams

    async def stdout(self, data: bytes) -> None:
        await self.streams["stdout"].write(data)

    async def stderr(self, data: bytes) -> None:
        await self.streams["stderr"].write(data)


async def serve(request: web.Request, session: Session, options: Options) -> web.StreamResponse:
    """Upgrade ``request`` to SPDY/3.1 and run ``session`` over the client's streams."""
    try:
        wire, resp = await upgrades.upgrade_spdy(request, PROTOCOLS)
    except upgrades.Refused as exc:
        return exc.response()
    protocol = resp.headers[upgrades.PROTOCOL_HEADER]
    wanted = expected(protocol, options)
    streams: dict[str, Stream] = {}
    all_there = asyncio.Event()

    def accept(stream: Stream) -> str | None:
        kind = stream.header("streamType")
        if kind not in KINDS:
            log.info("exec over SPDY: unexpected stream type %r", kind)  # accepted and left alone, as upstream
            return None
        streams[kind] = stream
        if wanted <= streams.keys():
            all_there.set()
        return None

    connection = spdy.Session(wire, accept)
    serving = asyncio.create_task(connection.serve())
    try:
        await _first(all_there.wait(), serving, timeout=STREAM_CREATION_TIMEOUT)
        if not all_there.is_set():
            log.info("exec over SPDY: timed out waiting for client to create streams")
            session.close()
            return resp
        await _run(session, streams, protocol, serving)
    finally:
        await connection.close()  # GOAWAY, as the kubelet's conn.Close(), before the connection goes
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        wire.close()
    return resp


async def _run(session: Session, streams: dict[str, Stream], protocol: str, serving: asyncio.Task[None]) -> None:
    pumps = [asyncio.create_task(_stdin(session, streams["stdin"]))] if "stdin" in streams else []
    if "resize" in streams:
        pumps.append(asyncio.create_task(_resize(session, streams["resize"])))
    running = asyncio.create_task(session.run(_Output(streams)))
    try:
        outcome = await outcome_unless(session, running, serving)
        if outcome is None:
            return
        with contextlib.suppress(StreamClosed):
            for kind in ("stdout", "stderr", "stdin"):
                if kind in streams:
                    await streams[kind].close()
            error = streams["error"]
            message = error_message(protocol, outcome.status())
            if message:
                await error.write(message)
            await error.close()
    except ConnectionResetError:  # a stream or the connection gone mid-way (StreamClosed is one)
        session.close()
    finally:
        for pump in pumps:
            pump.cancel()
        if not running.done():
            session.close()
            running.cancel()


async def _stdin(session: Session, stream: Stream) -> None:
    with contextlib.suppress(StreamClosed):
        while data := await stream.read():
            await session.write_stdin(data)
        session.close_stdin()  # the client half-closed its stdin stream: end of input


async def _resize(session: Session, stream: Stream) -> None:
    sizes = Resizes()
    with contextlib.suppress(StreamClosed):
        while data := await stream.read():
            for width, height in sizes.feed(data):
                session.resize(width, height)


async def _first(waiting: Coroutine[Any, Any, Any], task: asyncio.Task[None], *, timeout: float) -> None:
    """Wait for ``waiting``, or ``task`` to end, or ``timeout``; whichever is first."""
    waiter = asyncio.ensure_future(waiting)
    try:
        await asyncio.wait((waiter, task), timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
