"""The TrainJob controller: keys in, ``controller.trainjob.reconcile``, plan applied. The I/O shell.

Informers (``trainyard.kit.informer``) cache the TrainJobs, the TrainingRuntimes and
ClusterTrainingRuntimes, and every kind a TrainJob owns (JobSets, ConfigMaps, Secrets, PodGroups;
indexed by controller owner). Their events only enqueue keys: a TrainJob its own; a child its
controlling TrainJob's; a runtime every TrainJob that names it (the TrainJobs' runtime index: a
runtime created after its TrainJobs starts them). A worker reads the TrainJob, its runtime and its
children from those caches, never from the API server, asks the pure reconciler for a plan and
applies it: host ports, children (created, or replaced as read), deletes, the one status write,
then events. "AlreadyExists" on create and "NotFound" on delete count as done. Every write's answer
goes back into its cache; the status write carries the TrainJob's resourceVersion and a delete the
uid the pass saw, so a cache that lags can neither land a status computed from an older TrainJob
nor delete a newer child of the same name.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_global_resource, create_namespaced_resource

from trainyard.api import jobset, labels, trainer
from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import is_status
from trainyard.controller.trainjob import (
    TrainJobObserved,
    TrainJobPlan,
    TrainJobSettings,
    finished,
    reconcile,
    runtime_ref,
)
from trainyard.frameworks.base import ChildKind
from trainyard.kit.applier import Applier, owned_by
from trainyard.kit.informer import OWNER_INDEX, Caches, Indexer, Informer, controller_of
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.served import served
from trainyard.kit.worker import Waiting, work
from trainyard.operator import sshkeys
from trainyard.operator.controller import PORTS_RECHECK_SECONDS, record_ports, resource
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator, PortsExhausted

log = logging.getLogger(__name__)

Key = tuple[str, str]

TRAINJOB = ChildKind(trainer.API_VERSION, trainer.TRAINJOB, trainer.TRAINJOBS)
CHILD_KINDS: tuple[ChildKind, ...] = (
    ChildKind(
        jobset.API_VERSION,
        jobset.KIND,
        jobset.PLURAL,
        purpose="the JobSet that runs a TrainJob (list: its informer, and checked at start that JobSets are served)",
        verbs=("list", "watch", "create", "update", "delete"),
    ),
    ChildKind(
        "v1",
        "ConfigMap",
        "configmaps",
        purpose="an MPI runtime's hostfile",
        verbs=("list", "watch", "create", "update"),
    ),
    ChildKind("v1", "Secret", "secrets", purpose="an MPI runtime's SSH keys", verbs=("list", "watch", "create")),
    ChildKind(
        "scheduling.x-k8s.io/v1alpha1", "PodGroup", "podgroups", purpose="a runtime's podGroupPolicy.coscheduling gang"
    ),
)
"""Every kind a TrainJob owns (``deploy/``'s RBAC grants what the controller asks of each)."""
STATUS_SERVER_FIELD = "trainerStatus"
"""The status field training code reports through the status server; the one field this controller never writes."""
RUNTIME_VERBS = ("list", "watch")
"""What the controller asks of (Cluster)TrainingRuntimes: their informers."""
RUNTIME_INDEX = "runtime"
"""TrainJobs filed by ``Kind/namespace/name`` of the runtime they name (namespace "" for a cluster one)."""


def _port_owner(namespace: str, name: str) -> str:
    # Not "<ns>/<name>": a v1 job of the same name holds its ports under that key.
    return f"trainjob:{namespace}/{name}"


def _runtime_key(kind: str, namespace: str, name: str) -> str:
    return f"{kind}/{namespace if kind == trainer.TRAINING_RUNTIME else ''}/{name}"


def runtime_of(obj: Obj) -> Iterable[str]:
    """Indexer: the runtime a TrainJob names."""
    _, kind, name = runtime_ref(obj)
    yield _runtime_key(kind, obj["metadata"].get("namespace") or "", name)


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
        # trainerStatus is the status server's (training code reports it): never written here.
        self.applier = Applier(
            client,
            component=trainer.CONTROLLER_NAME,
            clock=clock,
            may_write=may_write,
            owned_elsewhere=(STATUS_SERVER_FIELD,),
        )
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(trainer.CONTROLLER_NAME, lambda: len(self.queue), kind=trainer.TRAINJOB)
        self.res = create_namespaced_resource(trainer.GROUP, trainer.VERSION, trainer.TRAINJOB, trainer.TRAINJOBS)
        self.resources = {(k.api_version, k.kind): resource(k) for k in CHILD_KINDS}
        self.watched: tuple[ChildKind, ...] = CHILD_KINDS
        # What the controller reads between events, it reads from these caches, never the API server.
        ns = namespace
        by_owner: dict[str, Indexer] = {OWNER_INDEX: controller_of}
        self.trainjobs = Informer(
            client, self.res, self._on_trainjob, namespace=ns, indexers={RUNTIME_INDEX: runtime_of}
        )
        self.runtimes = {
            trainer.TRAINING_RUNTIME: Informer(
                client,
                create_namespaced_resource(
                    trainer.GROUP, trainer.VERSION, trainer.TRAINING_RUNTIME, trainer.TRAINING_RUNTIMES
                ),
                functools.partial(self._on_runtime, trainer.TRAINING_RUNTIME),
                namespace=ns,
            ),
            trainer.CLUSTER_TRAINING_RUNTIME: Informer(
                client,
                create_global_resource(
                    trainer.GROUP, trainer.VERSION, trainer.CLUSTER_TRAINING_RUNTIME, trainer.CLUSTER_TRAINING_RUNTIMES
                ),
                functools.partial(self._on_runtime, trainer.CLUSTER_TRAINING_RUNTIME),
                namespaced=False,
            ),
        }
        self.child_caches = {
            (k.api_version, k.kind): Informer(
                client, self.resources[k.api_version, k.kind], self._on_child, namespace=ns, indexers=by_owner
            )
            for k in CHILD_KINDS
        }
        self.caches = Caches(trainer.CONTROLLER_NAME)

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
                if not await served(self.client, res, self.namespace)
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
            [
                k
                for k in CHILD_KINDS
                if not k.group or await served(self.client, self.resources[k.api_version, k.kind], self.namespace)
            ]
        )

    async def start(self) -> None:
        """Wait until served, then run (beside the v1 kinds' controllers)."""
        await self.wait_served()
        await self.prime()  # again: the Operator's prime found no TrainJobs served if their CRD came later
        await self.run()

    async def prime(self) -> None:
        """Start the TrainJob cache and hold every existing TrainJob's port from it before anything
        allocates (after a restart); nothing while TrainJobs are not served. Idempotent."""
        if trainer.TRAINJOBS not in self.caches.tasks and not await served(self.client, self.res, self.namespace):
            return
        await self.caches.sync({trainer.TRAINJOBS: self.trainjobs})
        for obj in self.trainjobs.items():
            self._hold_ports(obj)

    async def run(self) -> None:
        """Every cache synced first (a pass must not take a child not yet listed for a missing one)."""
        await self.caches.sync(
            {
                trainer.TRAINJOBS: self.trainjobs,
                **self.runtimes,
                **{kind.plural: self.child_caches[kind.api_version, kind.kind] for kind in self.watched},
            }
        )
        await asyncio.gather(self.caches.run(), *(self._worker() for _ in range(self.workers)))

    # -- event sources: every one only enqueues keys -------------------------------------------------

    def _on_trainjob(self, _: str, obj: Obj) -> None:
        m = obj["metadata"]
        self.queue.add((m["namespace"], m["name"]))

    def _on_runtime(self, kind: str, _: str, obj: Obj) -> None:
        """Enqueue every TrainJob naming a runtime that changed (one created after them starts them)."""
        m = obj["metadata"]
        for tj in self.trainjobs.by_index(RUNTIME_INDEX, _runtime_key(kind, m.get("namespace") or "", m["name"])):
            self.queue.add((tj["metadata"]["namespace"], tj["metadata"]["name"]))

    def _on_child(self, _: str, obj: Obj) -> None:
        """Enqueue the TrainJob controlling a child that changed."""
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == trainer.TRAINJOB:
                self.queue.add((m["namespace"], ref["name"]))

    # -- the worker loop ----------------------------------------------------------------------------

    async def _worker(self) -> None:
        name = trainer.CONTROLLER_NAME
        await work(self.queue, self.reconcile, name=name, observe=self.metrics.observer(name))

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        tj = self.trainjobs.get(namespace, name)
        if tj is None:
            self.ports.release(_port_owner(namespace, name))
            self.metrics.forget_job(trainer.TRAINJOB, namespace, name)
            return None
        host_ports = _host_ports(tj)
        self._hold_ports(tj)
        children = self._children(key)
        observed = TrainJobObserved(
            trainjob=tj,
            runtime=self._runtime(tj),
            children=children,
            now=self.clock(),
            host_ports=host_ports,
            key_pairs=sshkeys.key_pair,
        )
        plan = reconcile(observed, self.settings)
        await self.apply(tj, plan, uids={k: c["metadata"].get("uid") for k, c in children.items()})
        return plan.requeue_after.total_seconds() if plan.requeue_after is not None else None

    def _hold_ports(self, tj: Obj) -> None:
        """Keep a TrainJob's recorded port from other jobs until it has finished: a finished
        TrainJob's JobSet has ended or is stopping its pods, and a pod still listening keeps the
        port from the allocator, which binds each port it draws. Finished jobs that kept theirs
        exhausted the range (its annotation still records the port)."""
        owner = _port_owner(tj["metadata"]["namespace"], tj["metadata"]["name"])
        if finished(tj.get("status") or {}):
            self.ports.release(owner)
        else:
            self.ports.hold(owner, _host_ports(tj).values())

    # -- reading a TrainJob's world, from the caches ----------------------------------------------------

    def _runtime(self, tj: Obj) -> Obj | None:
        _, kind, name = runtime_ref(tj)
        cache = self.runtimes.get(kind)
        if not name or cache is None:
            return None
        found = cache.get(tj["metadata"]["namespace"] if kind == trainer.TRAINING_RUNTIME else "", name)
        return None if found is None else {"apiVersion": trainer.API_VERSION, "kind": kind, **found}

    def _children(self, key: Key) -> dict[tuple[str, str], Obj]:
        """Each child the caches hold controlled by a TrainJob of this name, by (kind, name)."""
        controller = f"{trainer.TRAINJOB}/{key[0]}/{key[1]}"
        return {
            (kind.kind, obj["metadata"]["name"]): {"apiVersion": kind.api_version, "kind": kind.kind, **obj}
            for kind in self.watched
            for obj in self.child_caches[kind.api_version, kind.kind].by_index(OWNER_INDEX, controller)
        }

    # -- applying a plan ------------------------------------------------------------------------------

    async def apply(
        self, tj: Obj, plan: TrainJobPlan, uids: Mapping[tuple[str, str], str | None] | None = None
    ) -> None:
        """Ports (alone: the next pass builds with them), writes, deletes, the status write, then events.

        ``uids``: the children the plan was computed from, so a delete removes exactly the object
        the pass saw, never a newer one of the same name.
        """
        m = tj["metadata"]
        namespace, name = m["namespace"], m["name"]
        self.applier.fence(f"applying the plan of TrainJob {namespace}/{name}")
        if plan.allocate_ports:
            await self._record_ports(tj, plan.allocate_ports)
            return
        events: list[Event] = []
        for obj in plan.apply:
            events += await self._write(tj, obj)
        for ref in plan.delete:
            res, cache = self.resources[ref.api_version, ref.kind], self.child_caches[ref.api_version, ref.kind]
            uid = (uids or {}).get((ref.kind, ref.name))
            deleted = await self.applier.delete(res, ref.name, namespace=namespace, uid=uid, cache=cache)
            if deleted is not None:
                events.append(Event.normal(f"SuccessfulDelete{ref.kind}", f"Deleted {ref.kind}: {ref.name}"))
        if plan.status is not None:
            try:
                tj = await self.applier.write_status(self.res, tj, plan.status, self.trainjobs)
            except ApiError as exc:
                if is_status(exc, 409):
                    await self._emit(tj, events)  # what this pass did happened; its verdict is recomputed
                raise
        self.metrics.observe_job(tj, self.clock())
        await self._emit(tj, [*events, *plan.events])

    async def _write(self, tj: Obj, obj: Obj) -> list[Event]:
        body = owned_by(obj, tj, trainer.API_VERSION, trainer.TRAINJOB)
        kind = obj["kind"]
        res, cache = self.resources[obj["apiVersion"], kind], self.child_caches[obj["apiVersion"], kind]
        if obj["metadata"].get("resourceVersion"):
            # replaced as read: a newer version gets a conflict, and the pass runs again on it
            await self.applier.replace(res, body, cache)
            return []
        try:
            created = await self.applier.create(res, body, cache)
        except ApiError as exc:
            message = f"Error creating {kind} {body['metadata']['name']}: {exc}"
            await self._emit(tj, [Event.warning(f"FailedCreate{kind}", message)])
            raise
        return (
            [Event.normal(f"SuccessfulCreate{kind}", f"Created {kind}: {obj['metadata']['name']}")] if created else []
        )

    async def _record_ports(self, tj: Obj, keys: tuple[str, ...]) -> None:
        m = tj["metadata"]
        key = (m["namespace"], m["name"])
        try:
            fresh = self.ports.allocate(_port_owner(*key), len(keys), wake=functools.partial(self.queue.add, key))
        except PortsExhausted as exc:
            if exc.first:
                await self._emit(tj, [Event.warning("PortsExhausted", str(exc))])
            raise Waiting(str(exc), PORTS_RECHECK_SECONDS) from exc
        await record_ports(self.applier, self.res, tj, dict(zip(keys, fresh, strict=True)), self.trainjobs)

    async def _emit(self, tj: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(tj, trainer.API_VERSION, trainer.TRAINJOB), events)


def _host_ports(tj: Obj) -> dict[str, int]:
    raw = (tj["metadata"].get("annotations") or {}).get(labels.HOST_PORTS) or "{}"
    return {k: int(v) for k, v in json.loads(raw).items()}
