"""PodGC's I/O shell: one pass over every pod every 20 s (upstream's gcCheckPeriod), and sooner when
it matters: a Node deleted (a pass once its quarantine is over), a node tainted out-of-service or
a pod terminating there or unbound. A node missing from the cache for the quarantine is read once
from the server (as upstream: an informer may lag) before its pods count as orphans.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.api.meta import Obj, format_time
from trainyard.client.transport import delete
from trainyard.cluster.clients.nodelifecycle import podgc
from trainyard.cluster.clients.nodelifecycle.lifecycle import NODE, POD
from trainyard.cluster.clients.nodelifecycle.settings import Settings
from trainyard.kit.applier import Applier
from trainyard.kit.informer import Informer, key_of
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

log = logging.getLogger(__name__)

COMPONENT = "pod-garbage-collector"
PASS = "gc"


class PodGC:
    def __init__(
        self,
        client: AsyncClient,
        nodes: Informer,
        pods: Informer,
        *,
        settings: Settings | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.settings = settings or Settings()
        self.clock = clock
        self.applier = Applier(client, component=COMPONENT, clock=clock)
        self.queue: WorkQueue[str] = WorkQueue()
        self.nodes = nodes
        self.pods = pods
        nodes.handlers.append(self._on_node)
        pods.handlers.append(self._on_pod)
        self.missing: dict[str, datetime] = {}

    def _on_node(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            self.queue.add(PASS)  # its pods start their quarantine now
        elif any(t.get("key") == podgc.OUT_OF_SERVICE for t in (obj.get("spec") or {}).get("taints") or []):
            self.queue.add(PASS)

    def _on_pod(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED" or not (obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        node = self.nodes.get("", (obj.get("spec") or {}).get("nodeName") or "")
        if node is None or podgc.out_of_service([obj], {key_of(node)[1]: node}):
            self.queue.add(PASS)

    async def run(self) -> None:
        try:
            await self.nodes.synced.wait()
            await self.pods.synced.wait()
            self.queue.add(PASS)
            await work(self.queue, self.reconcile, name=COMPONENT)
        finally:
            self.queue.close()

    async def reconcile(self, _: str) -> float | None:
        pods = self.pods.items()
        nodes = {key_of(n)[1]: n for n in self.nodes.items()}
        now = self.clock()
        await self._collect(podgc.over_threshold(pods, self.settings.terminated_threshold), None, now)
        await self._collect(podgc.out_of_service(pods, nodes), None, now)
        gone = await self._gone(podgc.missing_nodes(pods, nodes), now)
        await self._collect(podgc.orphans(pods, gone), podgc.ORPHANED, now)
        await self._collect(podgc.unscheduled_terminating(pods), None, now)
        waits = [self.settings.quarantine - (now - t).total_seconds() for t in self.missing.values()]
        return max(min([self.settings.gc_period, *waits]), 0.05)

    async def _gone(self, missing: set[str], now: datetime) -> set[str]:
        """The missing nodes past their quarantine that the server does not have either."""
        for name in set(self.missing) - missing:
            del self.missing[name]
        gone = set()
        for name in missing:
            since = self.missing.setdefault(name, now)
            if (now - since).total_seconds() < self.settings.quarantine:
                continue
            if await self.applier.get(NODE, name, namespace=None) is None:
                gone.add(name)
                del self.missing[name]
        return gone

    async def _collect(self, pods: list[Obj], condition: Obj | None, now: datetime) -> None:
        for pod in pods:
            namespace, name = key_of(pod)
            log.info("PodGC is force deleting Pod %s/%s", namespace, name)
            status = podgc.failed_status(pod, condition, format_time(now))
            if status is not None:
                patch = {"status": status}
                if await self.applier.patch(POD.Status, name, patch, namespace=namespace, cache=self.pods) is None:
                    continue
            gone = await delete(
                self.client, POD, name, namespace=namespace, uid=pod["metadata"].get("uid"), grace_period=0
            )
            if gone is not None:
                self.pods.removed(gone)
