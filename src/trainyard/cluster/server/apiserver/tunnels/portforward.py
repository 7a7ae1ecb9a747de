"""``pods/portforward``: the kubelet's side of ``kubectl port-forward``, for pods on this machine.

A pod here shares the node's network (``host`` mode), so forwarding a port dials
``localhost:<port>`` of this machine, as the container runtime dials it inside the pod's network
namespace, and copies bytes both ways. Three ways in, as kube-apiserver 1.32 and the kubelet
offer them:

- SPDY/3.1 tunnelled in a WebSocket (subprotocol ``SPDY/3.1+portforward.k8s.io``), kubectl's
  default since 1.31, and plain SPDY/3.1 (``portforward.k8s.io``), its fallback. Per local
  connection kubectl opens an ``error`` and a ``data`` stream with the same ``requestID``;
  the pair is forwarded once both are there, and a failure is written as text on the error
  stream, worded as the kubelet does (``error forwarding port 8080 to pod <id>, uid : ...``).
- The WebSocket channel protocol ``v4.channel.k8s.io`` (``?ports=8080,9090``; the ``kubernetes``
  Python client's ``portforward``): ``portforward_channels``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.tunnels import portforward_channels, upgrades
from trainyard.cluster.server.apiserver.tunnels.forwarding import PodTarget, dial, forward_error, pipe
from trainyard.cluster.server.apiserver.tunnels.spdy.session import Session, Stream, StreamClosed, Wire

log = logging.getLogger(__name__)

PROTOCOL = "portforward.k8s.io"
TUNNELED = upgrades.TUNNEL_PREFIX + PROTOCOL
STREAM_CREATION_TIMEOUT = 30.0
"""Seconds a stream waits for its pair (the kubelet's default ``streamCreationTimeout``)."""


@dataclass
class _Pair:
    request_id: str
    data: Stream | None = None
    error: Stream | None = None
    timer: asyncio.TimerHandle | None = None


@dataclass
class StreamPairs:
    """Pairs the error and data streams of each forwarded connection and forwards each complete pair
    (the kubelet's ``httpStreamHandler``)."""

    target: PodTarget
    timeout: float = STREAM_CREATION_TIMEOUT
    pairs: dict[str, _Pair] = field(default_factory=dict)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def accept(self, stream: Stream) -> str | None:
        port = stream.header("port")
        if not port:
            return '"port" header is required'
        if not port.isdigit() or int(port) > 65535:
            return f'unable to parse "{port}" as a port'
        if int(port) < 1:
            return f'port "{port}" must be > 0'
        kind = stream.header("streamType")
        if not kind:
            return '"streamType" header is required'
        if kind not in ("error", "data"):
            return f'invalid stream type "{kind}"'
        request_id = stream.header("requestID")
        if not request_id:
            # Clients before 1.6 sent no requestID: their data stream follows its error stream.
            request_id = str(stream.id if kind == "error" else stream.id - 2)
        pair = self.pairs.get(request_id)
        if pair is None:
            pair = self.pairs[request_id] = _Pair(request_id)
            pair.timer = asyncio.get_running_loop().call_later(self.timeout, self._expire, pair)
        if getattr(pair, kind) is not None:
            message = f"error processing stream for request {request_id}: {kind} stream already assigned"
            self._spawn(_report(pair.error, message))
            return None
        setattr(pair, kind, stream)
        if pair.data is not None and pair.error is not None:
            del self.pairs[request_id]
            if pair.timer is not None:
                pair.timer.cancel()
            self._spawn(self._forward(pair.data, pair.error))
        return None

    def _expire(self, pair: _Pair) -> None:
        if self.pairs.pop(pair.request_id, None) is None:
            return
        message = f"(conn={id(self):#x}, request={pair.request_id}) timed out waiting for streams"
        self._spawn(_fail(pair.error, message, pair.data))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _forward(self, data: Stream, error: Stream) -> None:
        port = int(data.header("port"))
        try:
            reader, writer = await dial(self.target, port)
        except ConnectionError as exc:
            log.info("port-forward to %s/%s: %s", self.target.namespace, self.target.name, exc)
            await _fail(error, forward_error(self.target, port, str(exc)), data)
            return

        async def done() -> None:
            for stream in (data, error):
                with contextlib.suppress(StreamClosed):
                    await stream.close()

        await pipe(reader, writer, data.read, data.write, done)

    async def stop(self) -> None:
        for pair in self.pairs.values():
            if pair.timer is not None:
                pair.timer.cancel()
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _report(error: Stream | None, message: str) -> None:
    """A message on the error stream that leaves the pair as it is (the kubelet's ``printError``)."""
    if error is not None:
        with contextlib.suppress(StreamClosed):
            await error.write(message.encode())


async def _fail(error: Stream | None, message: str, *others: Stream | None) -> None:
    with contextlib.suppress(StreamClosed):
        if error is not None:
            await error.write(message.encode())
            await error.close()
        for stream in others:
            if stream is not None:
                await stream.close()


async def serve_spdy(wire: Wire, target: PodTarget) -> None:
    """Forward the streams of one SPDY connection until the client goes."""
    pairs = StreamPairs(target)
    session = Session(wire, pairs.accept)
    try:
        await session.serve()
    finally:
        await pairs.stop()
        await session.close()


def target(pod: Mapping[str, Any]) -> PodTarget:
    """Where a pod's ports are; a pod not yet bound to a node has none (kube-apiserver's answer)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    if not spec.get("nodeName"):
        raise errors.bad_request(f"pod {meta.get('name', '')} does not have a host assigned")
    return PodTarget(meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", ""))


async def serve(request: web.Request, pod: PodTarget) -> web.StreamResponse:
    """Answer a ``pods/portforward`` request: whichever of the three protocols the client asks for."""
    headers = request.headers
    try:
        if upgrades.is_websocket(headers):
            offered = upgrades.websocket_protocols(headers)
            if TUNNELED in offered:
                ws = await upgrades.accept_websocket(request, [TUNNELED])
                try:
                    await serve_spdy(upgrades.WebSocketWire(ws), pod)
                finally:
                    await ws.close()
                return ws
            return await portforward_channels.serve(request, pod)
        wire, resp = await upgrades.upgrade_spdy(request, [PROTOCOL])
    except upgrades.Refused as exc:
        return exc.response()
    try:
        await serve_spdy(wire, pod)
    finally:
        wire.close()
    return resp
