"""The TrainJob controller: keys in, ``controller.trainjob.reconcile``, plan applied. The I/O shell.

Watches only enqueue keys: TrainJobs their own; the JobSets, ConfigMaps, Secrets and PodGroups a
TrainJob controls their owner's (remembered by name in an ``OwnedIndex``); a runtime's every
TrainJob that names it (a runtime created after its TrainJobs starts them). A worker re-reads the
TrainJob, its runtime and its children, asks the pure reconciler for a plan and applies it:
host ports, children (created, or replaced as read), deletes, the one status write, then events.
"AlreadyExists" on create and "NotFound" on delete count as done.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.types import PatchType

from trainyard.api import jobset, labels, trainer
from trainyard.api.meta import format_time
from trainyard.client import build, is_status, record_events, reference, to_dict, watch_forever
from trainyard.controller.trainjob import TrainJobObserved, TrainJobPlan, TrainJobSettings, reconcile, runtime_ref
from trainyard.frameworks.base import OwnedKind
from trainyard.operator import sshkeys
from trainyard.operator.controller import NotLeading, OwnedIndex, resource, work
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator
from trainyard.operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]

TRAINJOB = OwnedKind(trainer.API_VERSION, trainer.TRAINJOB, trainer.TRAINJOBS)
OWNED: tuple[OwnedKind, ...] = (
    OwnedKind(
        jobset.API_VERSION,
        jobset.KIND,
        jobset.PLURAL,
        purpose="the JobSet that runs a TrainJob (list: checked at start that JobSets are served)",
        verbs=("get", "list", "watch", "create", "update", "delete"),
    ),
    OwnedKind(
        "v1", "ConfigMap", "configmaps", purpose="an MPI runtime's hostfile", verbs=("get", "watch", "create", "update")
    ),
    OwnedKind("v1", "Secret", "secrets", purpose="an MPI runtime's SSH keys", verbs=("get", "watch", "create")),
    OwnedKind(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", purpose="a runtime's podGroupPolicy.coscheduling gang"
    ),
)
"""Every kind a TrainJob owns (``deploy/``'s RBAC grants what the controller asks of each)."""
RUNTIME_VERBS = ("get", "watch")
"""What the controller asks of (Cluster)TrainingRuntimes."""


def _port_owner(namespace: str, name: str) -> str:
    # Not "<ns>/<name>": a v1 job of the same name holds its ports under that key.
    return f"trainjob:{namespace}/{name}"


class TrainJobController:
    def __init__(
        self,
        client: AsyncClient,
        settings: TrainJobSettings,
        *,
        namespace: str,
        workers: int,
        ports: PortAllocator,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: OperatorMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.client = client
        self.settings = settings
        self.namespace = namespace
        self.workers = workers
        self.ports = ports
        self.clock = clock
        self.metrics = metrics or OperatorMetrics()
        self.may_write = may_write
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(trainer.CONTROLLER_NAME, lambda: len(self.queue), kind=trainer.TRAINJOB)
        self.res = create_namespaced_resource(trainer.GROUP, trainer.VERSION, trainer.TRAINJOB, trainer.TRAINJOBS)
        self.runtimes = create_namespaced_resource(
            trainer.GROUP, trainer.VERSION, trainer.TRAINING_RUNTIME, trainer.TRAINING_RUNTIMES
        )
        self.cluster_runtimes = create_global_resource(
            trainer.GROUP, trainer.VERSION, trainer.CLUSTER_TRAINING_RUNTIME, trainer.CLUSTER_TRAINING_RUNTIMES
        )
        self.resources = {(k.api_version, k.kind): resource(k) for k in OWNED}
        self.index = OwnedIndex()
        self.watched: tuple[OwnedKind, ...] = OWNED
        # TrainJob key -> the runtime it names (kind, namespace or "", name), as the TrainJob watch last saw
        self.users: dict[Key, tuple[str, str, str]] = {}

    async def _serves(self, res: Any) -> bool:
        try:
            async for _ in self.client.list(res, namespace=self.namespace, chunk_size=1):
                break
        except ApiError as exc:
            if is_status(exc, 404):
                return False
            raise
        return True

    async def wait_served(self, recheck: float = 30.0) -> None:
        """Until the cluster serves TrainJobs and JobSets (a real cluster needs both CRDs installed).

        Owned kinds it does not serve (no scheduler-plugins PodGroup CRD) are not watched: a runtime
        asking for them gets its TrainJobs' creates refused, with the API server's reason in an event.
        """
        told = False
        while True:
            missing = [
                res.__name__
                for res in (self.res, self.resources[jobset.API_VERSION, jobset.KIND])
                if not await self._serves(res)
            ]
            if not missing:
                break
            if not told:
                log.warning(
                    "%s not served by this cluster: TrainJobs wait; install the trainer CRDs (deploy/) and the "
                    "JobSet controller (kubernetes-sigs/jobset v0.8+)",
                    " and ".join(missing),
                )
                told = True
            await asyncio.sleep(recheck)
        # Core kinds are always served (and RBAC grants no list of them); CRDs may be missing.
        self.watched = tuple(
            [k for k in OWNED if not k.group or await self._serves(self.resources[k.api_version, k.kind])]
        )

    async def start(self) -> None:
        """Wait until served, then run (beside the v1 kinds' controllers)."""
        await self.wait_served()
        await self.prime()  # again: TrainJobs created while their CRD was missing cannot be; cheap
        await self.run()

    async def prime(self) -> None:
        """Hold every existing TrainJob's port before anything allocates (after a restart); none if not served."""
        try:
            found = [to_dict(obj) async for obj in self.client.list(self.res, namespace=self.namespace)]
        except ApiError as exc:
            if is_status(exc, 404):
                return
            raise
        for obj in found:
            m = obj["metadata"]
            held = json.loads((m.get("annotations") or {}).get(labels.HOST_PORTS) or "{}")
            self.ports.hold(_port_owner(m["namespace"], m["name"]), [int(p) for p in held.values()])

    async def run(self) -> None:
        await asyncio.gather(
            self._watch_trainjobs(),
            self._watch_runtimes(self.runtimes, trainer.TRAINING_RUNTIME, self.namespace),
            self._watch_runtimes(self.cluster_runtimes, trainer.CLUSTER_TRAINING_RUNTIME, None),
            *(self._watch_owned(kind) for kind in self.watched),
            *(self._worker() for _ in range(self.workers)),
        )

    # -- event sources: every one only enqueues keys -------------------------------------------------

    async def _watch_trainjobs(self) -> None:
        async for event, obj in watch_forever(self.client, self.res, namespace=self.namespace):
            m = obj["metadata"]
            key = (m["namespace"], m["name"])
            if event == "DELETED":
                self.users.pop(key, None)
            else:
                _, kind, name = runtime_ref(obj)
                scope = m["namespace"] if kind == trainer.TRAINING_RUNTIME else ""
                self.users[key] = (kind, scope, name)
            self.queue.add(key)

    async def _watch_runtimes(self, res: Any, kind: str, namespace: str | None) -> None:
        async for _, obj in watch_forever(self.client, res, namespace=namespace):
            m = obj["metadata"]
            wanted = (kind, m.get("namespace") or "", m["name"])
            for key, uses in list(self.users.items()):
                if uses == wanted:
                    self.queue.add(key)

    async def _watch_owned(self, kind: OwnedKind) -> None:
        res = self.resources[kind.api_version, kind.kind]
        async for event, obj in watch_forever(self.client, res, namespace=self.namespace):
            m = obj["metadata"]
            owner = next(
                (
                    (m["namespace"], ref["name"])
                    for ref in m.get("ownerReferences") or []
                    if ref.get("controller") and ref.get("kind") == trainer.TRAINJOB
                ),
                None,
            )
            self.index.saw(kind, m["namespace"], m["name"], None if event == "DELETED" else owner)
            if owner is not None:
                self.queue.add(owner)

    # -- the worker loop ----------------------------------------------------------------------------

    async def _worker(self) -> None:
        await work(self.queue, self.reconcile, self.metrics, trainer.CONTROLLER_NAME)

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        try:
            tj = to_dict(await self.client.get(self.res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                self.ports.release(_port_owner(namespace, name))
                self.metrics.forget_job(trainer.TRAINJOB, namespace, name)
                return None
            raise
        host_ports = {
            k: int(v)
            for k, v in json.loads((tj["metadata"].get("annotations") or {}).get(labels.HOST_PORTS) or "{}").items()
        }
        self.ports.hold(_port_owner(namespace, name), host_ports.values())
        observed = TrainJobObserved(
            trainjob=tj,
            runtime=await self._runtime(tj),
            children=await self._children(key),
            now=self.clock(),
            host_ports=host_ports,
            key_pairs=sshkeys.key_pair,
        )
        plan = reconcile(observed, self.settings)
        await self.apply(tj, plan)
        return plan.requeue_after.total_seconds() if plan.requeue_after is not None else None

    async def _runtime(self, tj: dict[str, Any]) -> dict[str, Any] | None:
        _, kind, name = runtime_ref(tj)
        if not name or kind not in (trainer.TRAINING_RUNTIME, trainer.CLUSTER_TRAINING_RUNTIME):
            return None
        try:
            if kind == trainer.TRAINING_RUNTIME:
                return to_dict(await self.client.get(self.runtimes, name, namespace=tj["metadata"]["namespace"]))
            return to_dict(await self.client.get(self.cluster_runtimes, name))
        except ApiError as exc:
            if is_status(exc, 404):
                return None
            raise

    async def _children(self, key: Key) -> dict[tuple[str, str], dict[str, Any]]:
        found: dict[tuple[str, str], dict[str, Any]] = {}
        for kind, name in self.index.of(key):
            try:
                obj = to_dict(
                    await self.client.get(self.resources[kind.api_version, kind.kind], name, namespace=key[0])
                )
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
                continue
            found[kind.kind, name] = {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
        return found

    # -- applying a plan ------------------------------------------------------------------------------

    async def apply(self, tj: dict[str, Any], plan: TrainJobPlan) -> None:
        m = tj["metadata"]
        namespace, name = m["namespace"], m["name"]
        if not self.may_write():
            raise NotLeading(f"not applying the plan of TrainJob {namespace}/{name}: this replica no longer leads")
        if plan.allocate_ports:
            await self._record_ports(tj, plan.allocate_ports)
            return
        events: list[tuple[str, str, str]] = []
        for obj in plan.apply:
            events += await self._write(tj, obj)
        for ref in plan.delete:
            try:
                await self.client.delete(self.resources[ref.api_version, ref.kind], ref.name, namespace=namespace)
                events.append(("Normal", f"SuccessfulDelete{ref.kind}", f"Deleted {ref.kind}: {ref.name}"))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
        if plan.status is not None:
            # trainerStatus belongs to the status server: the copy read here may be older than its last write
            status = {k: v for k, v in plan.status.items() if k != "trainerStatus"}
            await self.client.patch(
                self.res.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
            )
            tj = {**tj, "status": {**(tj.get("status") or {}), **status}}
        self.metrics.observe_job(tj, self.clock())
        events += [(e.type.value, e.reason, e.message) for e in plan.events]
        await self._emit(tj, events)

    async def _write(self, tj: dict[str, Any], obj: dict[str, Any]) -> list[tuple[str, str, str]]:
        m = tj["metadata"]
        body = {**obj, "metadata": {**obj["metadata"], "namespace": m["namespace"]}}
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": trainer.API_VERSION,
                "kind": trainer.TRAINJOB,
                "name": m["name"],
                "uid": m["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        res = self.resources[obj["apiVersion"], obj["kind"]]
        if obj["metadata"].get("resourceVersion"):
            await self.client.replace(build(res, body))
            return []
        try:
            await self.client.create(build(res, body))
        except ApiError as exc:
            if is_status(exc, 409):
                return []
            kind = obj["kind"]
            await self._emit(
                tj, [("Warning", f"FailedCreate{kind}", f"Error creating {kind} {body['metadata']['name']}: {exc}")]
            )
            raise
        return [("Normal", f"SuccessfulCreate{obj['kind']}", f"Created {obj['kind']}: {obj['metadata']['name']}")]

    async def _record_ports(self, tj: dict[str, Any], keys: tuple[str, ...]) -> None:
        m = tj["metadata"]
        current = json.loads((m.get("annotations") or {}).get(labels.HOST_PORTS) or "{}")
        fresh = self.ports.allocate(_port_owner(m["namespace"], m["name"]), len(keys))
        current.update(dict(zip(keys, fresh, strict=True)))
        patch = {"metadata": {"annotations": {labels.HOST_PORTS: json.dumps(current, sort_keys=True)}}}
        await self.client.patch(self.res, m["name"], patch, namespace=m["namespace"], patch_type=PatchType.MERGE)

    async def _emit(self, tj: dict[str, Any], events: Sequence[tuple[str, str, str]]) -> None:
        involved = reference(tj, trainer.API_VERSION, trainer.TRAINJOB)
        await record_events(
            self.client, involved, events, component=trainer.CONTROLLER_NAME, now=format_time(self.clock())
        )
