"""The events the node agent records on pods, as the kubelet's event recorder does.

Each is a ``v1`` Event from ``component=kubelet`` on this host, involving the pod by uid. Recording
is best effort (a failure is logged, never raised) and at most ``EVENT_WRITES`` are in flight at
once, so events never delay the status writes they share the client's connection pool with.
``started`` is the sequence a container start records: ``Pulled`` (naming the local environment
that stands for the image), ``ThreadsSet`` when the node set thread counts, ``Started``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from lightkube import AsyncClient

from trainyard.api.meta import Obj
from trainyard.client.events import event_body
from trainyard.cluster.clients.node.caches import EVENT
from trainyard.cluster.clients.node.threads import REASON as THREADS_SET

log = logging.getLogger(__name__)

EVENT_WRITES = 4


class PodEvents:
    def __init__(self, client: AsyncClient, host: str, now: Callable[[], str], concurrency: int = EVENT_WRITES) -> None:
        self.client = client
        self.host = host
        self.now = now
        self._slots = asyncio.Semaphore(concurrency)

    async def record(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        m = pod["metadata"]
        involved = {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "namespace": m["namespace"], "uid": m["uid"]}
        body = event_body(
            involved,
            type_=type_,
            reason=reason,
            message=message,
            component="kubelet",
            now=self.now(),
            host=self.host,
        )
        try:
            async with self._slots:
                await self.client.create(EVENT.from_dict(body))
        except Exception as exc:  # an event is best effort, as the kubelet's recorder
            log.warning("could not record event %s on %s/%s: %s", reason, m["namespace"], m["name"], exc)

    async def started(self, pod: Obj, container: str, pulled: str, threads: str | None) -> None:
        # Images are not pulled here: "Pulled" names the local environment that stands for the image.
        await self.record(pod, "Normal", "Pulled", pulled)
        if threads is not None:  # describe shows the spec's env, not what the node added to it
            await self.record(pod, "Normal", THREADS_SET, threads)
        await self.record(pod, "Normal", "Started", f"Started container {container}")
