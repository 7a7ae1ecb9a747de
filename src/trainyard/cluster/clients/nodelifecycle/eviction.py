"""The taint eviction controller's I/O shell: delete the pods that a node's NoExecute taints evict.

A pod is queued when it changes and whenever its node does; ``taints.decide`` says when it goes,
and a pass that finds that moment still ahead asks the work queue to come back then (a timer
per pod, not a poll). The countdown's start is kept here (upstream's scheduled work), so a
changed set of taints keeps it. Evicting, the pod first gets the ``DisruptionTarget`` condition,
then it is deleted as the pass saw it (its uid as precondition), with its own grace period: on
a node that stopped, it stays Terminating until the node comes back or PodGC force-deletes it
(the node gone, or tainted ``node.kubernetes.io/out-of-service``), as upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.api.meta import Obj, format_time
from trainyard.client.events import reference
from trainyard.cluster.clients.nodelifecycle import taints
from trainyard.cluster.clients.nodelifecycle.lifecycle import NODE_INDEX, POD, node_of
from trainyard.kit import plans
from trainyard.kit.applier import Applier
from trainyard.kit.informer import Informer, key_of
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

COMPONENT = "taint-eviction-controller"
Key = tuple[str, str]


class TaintEvictionController:
    def __init__(
        self,
        client: AsyncClient,
        nodes: Informer,
        pods: Informer,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.clock = clock
        self.applier = Applier(client, component=COMPONENT, clock=clock)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.nodes = nodes
        self.pods = pods
        nodes.handlers.append(self._on_node)
        pods.add_indexers({NODE_INDEX: node_of})
        pods.handlers.append(self._on_pod)
        self.since: dict[Key, datetime] = {}

    def _on_node(self, _: str, obj: Obj) -> None:
        for pod in self.pods.by_index(NODE_INDEX, key_of(obj)[1]):
            self.queue.add(key_of(pod))

    def _on_pod(self, _: str, obj: Obj) -> None:
        if (obj.get("spec") or {}).get("nodeName") or key_of(obj) in self.since:
            self.queue.add(key_of(obj))

    async def run(self) -> None:
        try:
            await self.nodes.synced.wait()
            await self.pods.synced.wait()
            for pod in self.pods.items():
                self._on_pod("ADDED", pod)
            await work(self.queue, self.reconcile, name=COMPONENT)
        finally:
            self.queue.close()

    async def reconcile(self, key: Key) -> float | None:
        pod = self.pods.get(*key)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            self.since.pop(key, None)
            return None
        node = self.nodes.get("", (pod.get("spec") or {}).get("nodeName") or "")
        now = self.clock()
        decision = taints.decide(pod, taints.no_execute(node) if node else [], self.since.get(key), now)
        if decision.evict_at is None:
            if self.since.pop(key, None) is not None:
                await self._tell(pod, f"Cancelling deletion of Pod {key[0]}/{key[1]}")
            return None
        assert decision.since is not None
        self.since[key] = decision.since
        if decision.evict_at > now:
            return (decision.evict_at - now).total_seconds()
        await self._tell(pod, f"Marking for deletion Pod {key[0]}/{key[1]}")
        conditions = taints.disruption_conditions(pod, taints.DISRUPTION_TARGET, format_time(now))
        if conditions is not None:
            patch = {"status": {"conditions": conditions}}
            if await self.applier.patch(POD.Status, key[1], patch, namespace=key[0], cache=self.pods) is None:
                return None  # gone meanwhile
        await self.applier.delete(POD, key[1], namespace=key[0], uid=pod["metadata"].get("uid"), cache=self.pods)
        self.since.pop(key, None)
        return None

    async def _tell(self, pod: Obj, message: str) -> None:
        await self.applier.emit(reference(pod, "v1", "Pod"), [plans.Event.normal(taints.EVENT_REASON, message)])
