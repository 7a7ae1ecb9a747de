"""The node lifecycle controller's I/O shell: watch Nodes, their Leases and their pods; judge each Node.

A Node is queued whenever it, its Lease (``kube-node-lease/<node>``) or one of its pods changes,
and once more when it would go silent (``Verdict.wake_in``: a timer on the work queue, not a poll
loop). ``health.assess`` decides; this shell writes the Node's conditions (``/status``, guarded by
the resourceVersion the pass read: a heartbeat that landed meanwhile wins), its taints (the same
guard), marks its pods not Ready while it is not, and tells ``NodeNotReady`` as upstream: on the
Node when this controller found it silent, on each pod it marked. A Node whose Ready status
changed re-queues every Node, since whether NoExecute taints may be added depends on them all.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node

from trainyard.api.meta import Obj, format_time
from trainyard.client.events import record_event, reference
from trainyard.client.resources import plain_resource
from trainyard.cluster.clients.nodelifecycle import health
from trainyard.cluster.clients.nodelifecycle.settings import Settings
from trainyard.kit import plans
from trainyard.kit.applier import Applier
from trainyard.kit.informer import Informer, key_of
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

log = logging.getLogger(__name__)

COMPONENT = "node-controller"
# lightkube's typed classes: the scheduler registers a generic class of Node, and lightkube keeps one per kind.
NODE = Node
POD = plain_resource("", "v1", "Pod", "pods")
LEASE = Lease
LEASE_NAMESPACE = "kube-node-lease"
NODE_INDEX = "spec.nodeName"
WAKE_MARGIN = 0.05
"""Seconds past a node's deadline its pass runs, so that it finds the deadline passed."""


def node_of(pod: Obj) -> list[str]:
    """Indexer: the node a pod is bound to."""
    name = (pod.get("spec") or {}).get("nodeName")
    return [name] if name else []


def node_reference(node: Obj) -> Obj:
    m = node["metadata"]
    return {"apiVersion": "v1", "kind": "Node", "name": m["name"], "uid": m.get("uid", ""), "namespace": ""}


async def record_node_event(
    client: AsyncClient, node: Obj, type_: str, reason: str, message: str, *, component: str, now: str
) -> None:
    """An Event about a Node: in ``default``, its involvedObject without a namespace, as upstream's
    (``record_event`` files events about cluster-scoped objects so)."""
    await record_event(
        client, node_reference(node), type_=type_, reason=reason, message=message, component=component, now=now
    )


class NodeLifecycleController:
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
        self.leases = Informer(client, LEASE, self._on_lease, namespace=LEASE_NAMESPACE)
        nodes.handlers.append(self._on_node)
        pods.add_indexers({NODE_INDEX: node_of})
        pods.handlers.append(self._on_pod)
        self.probes: dict[str, health.Probe] = {}
        self.ready: dict[str, str] = {}

    def _on_node(self, _: str, obj: Obj) -> None:
        self.queue.add(key_of(obj)[1])

    def _on_lease(self, _: str, obj: Obj) -> None:
        self.queue.add(key_of(obj)[1])

    def _on_pod(self, kind: str, obj: Obj) -> None:
        name = (obj.get("spec") or {}).get("nodeName")
        if kind != "DELETED" and name and self.ready.get(name, "True") != "True":
            self.queue.add(name)

    async def run(self) -> None:
        task = self.leases.start("node lifecycle informer leases")
        try:
            await self.leases.synced.wait()
            await self.nodes.synced.wait()
            await self.pods.synced.wait()
            for node in self.nodes.items():
                self.queue.add(key_of(node)[1])
            await work(self.queue, self.reconcile, name=COMPONENT)
        finally:
            self.queue.close()
            task.cancel()

    async def reconcile(self, name: str) -> float | None:
        node = self.nodes.get("", name)
        if node is None:
            self.probes.pop(name, None)
            if self.ready.pop(name, None) is not None:
                self._requeue_all()
            return None
        now = self.clock()
        probe = health.observe(self.probes.get(name), node, self.leases.get(LEASE_NAMESPACE, name), now)
        self.probes[name] = probe
        s = self.settings
        verdict = health.assess(node, probe, now, grace=s.grace, startup_grace=s.startup_grace)
        # Whether NoExecute taints may be added depends on every node, this one as this pass leaves it.
        view = {**self.ready, name: verdict.ready}
        if not health.evictions(self.nodes.items(), view).get(health.zone_of(node), True):
            verdict = health.assess(node, probe, now, grace=s.grace, startup_grace=s.startup_grace, evict=False)
        if verdict.conditions is not None:
            node = await self.applier.write_status(NODE, node, {"conditions": verdict.conditions}, self.nodes)
        if verdict.went_silent:
            log.info("node %s stopped posting status for %.0fs: Unknown", name, (now - probe.seen).total_seconds())
            message = f"Node {name} status is now: NodeNotReady"
            await record_node_event(
                self.client, node, "Normal", "NodeNotReady", message, component=COMPONENT, now=format_time(now)
            )
        if verdict.taints is not None:
            # Guarded as the status is: taints another writer set meanwhile are read again, not lost.
            body = {
                "metadata": {"resourceVersion": node["metadata"]["resourceVersion"]},
                "spec": {"taints": verdict.taints},
            }
            await self.applier.patch(NODE, name, body, namespace=None, cache=self.nodes)
        if verdict.ready != "True":
            await self._mark_pods_not_ready(name, now)
        if self.ready.get(name) != verdict.ready:
            self.ready[name] = verdict.ready
            self._requeue_all(but=name)
        return None if verdict.wake_in is None else verdict.wake_in + WAKE_MARGIN

    def _requeue_all(self, but: str = "") -> None:
        for node in self.nodes.items():
            other = key_of(node)[1]
            if other != but:
                self.queue.add(other)

    async def _mark_pods_not_ready(self, name: str, now: datetime) -> None:
        stamp = format_time(now)
        for pod in self.pods.by_index(NODE_INDEX, name):
            conditions = health.pod_not_ready(pod, stamp)
            if conditions is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            namespace, pod_name = key_of(pod)
            patched = await self.applier.patch(
                POD.Status, pod_name, {"status": {"conditions": conditions}}, namespace=namespace, cache=self.pods
            )
            if patched is not None:
                await self.applier.emit(
                    reference(patched, "v1", "Pod"), [plans.Event.warning("NodeNotReady", "Node is not ready")]
                )
