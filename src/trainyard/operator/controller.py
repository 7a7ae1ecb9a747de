"""The job controller: keys in, reconcile, plan applied. The I/O shell around ``reconcile``.

Informers (``trainyard.kit.informer``) cache the jobs, their pods and Services, and every other kind
they own (``controller.child_kinds``: the gang's PodGroups, the plugin's, e.g. HPAs); a change to
any of them only enqueues the key of the job it belongs to. A worker then reads the job and its
children from those caches, never from the API server: replicas by the job's label index, other
children by their controller owner; asks the pure reconciler for a plan; and applies it through
one path for every kind (lightkube's own classes for Kubernetes' groups, generic resources for
CRDs), "already exists" on create and "not found" on delete counting as done. Every answer to a
write goes back into its cache, and the status write carries the job's resourceVersion, so a cache
that lags can neither make a pass create twice nor land a status computed from an older job.
Nothing here decides anything about the job: it observes and it acts. A pod the server refuses
is told on the job as training-operator tells it (a Warning ``FailedCreatePod``, ``Error creating:
<the server's words>``); a ResourceQuota's refusal waits (``Waiting``, no failure counted, the
job's status untouched as upstream's) until a quota of that namespace changes, which wakes the
refused jobs of that namespace only (``refused``), or 30 s pass.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import importlib
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import ResourceQuota
from lightkube.resources.scheduling_v1 import PriorityClass
from pydantic import ValidationError

from trainyard.api import conditions, labels
from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.defaults import apply_defaults
from trainyard.api.meta import TypedObject, format_time
from trainyard.api.podgroup import flavour
from trainyard.api.validation import type_errors
from trainyard.client.events import reference
from trainyard.client.resources import is_status, job_resource, quota_refusal, selector
from trainyard.controller import ChildRef, Observed, Plan, child_kinds, children, gang, reconcile
from trainyard.controller.children import POD, REPLICA_KINDS, SERVICE
from trainyard.frameworks.base import ChildKind, Framework
from trainyard.kit.applier import Applier
from trainyard.kit.conditions import set_condition
from trainyard.kit.informer import OWNER_INDEX, Caches, Informer, SharedInformers, controller_of, label_index
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import Permanent, Waiting, work
from trainyard.operator import sshkeys
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator, PortsExhausted
from trainyard.operator.settings import OperatorSettings

log = logging.getLogger(__name__)

Key = tuple[str, str]
JOB_INDEX = "job"
"""Replicas filed by ``namespace/job-name`` (their job-name label)."""
JOB_MODELS = 2048
"""Jobs whose models (as read, and defaulted) the jobs' informer keeps: every job of a sweep is
worked on in turn, so fewer than the sweep's size were all dropped before the job's next pass
(a 1,000-job sweep parsed and defaulted each job again on every pass); 30 KB a job."""

REPLICA_VERBS: tuple[str, ...] = ("list", "watch", "create", "delete")
"""What this controller asks of pods and Services (``deploy/``'s RBAC grants exactly that)."""
CHILD_VERBS: tuple[str, ...] = ("list", "watch", "create", "update", "delete")
"""What it asks of every other child kind: list and watch (its informer), create, replace and delete
(``deploy/``'s RBAC grants exactly that)."""


def resource(kind: ChildKind) -> Any:
    """The lightkube resource class of a kind: lightkube's own for Kubernetes' groups, else generic.

    Looked up in ``lightkube.resources`` by module name rather than through lightkube's registry,
    where another part of the process (the embedded scheduler) may have put a generic ``Pod``.
    """
    group, _, version = kind.api_version.rpartition("/")
    if group.endswith(".k8s.io") or "." not in group:
        module = f"{group.removesuffix('.k8s.io').replace('.', '_') or 'core'}_{version}"
        try:
            return getattr(importlib.import_module(f"lightkube.resources.{module}"), kind.kind)
        except (ImportError, AttributeError):
            pass
    return create_namespaced_resource(group, version, kind.kind, kind.plural)


STATUS_SERVER_FIELD = "trainingProgress"
"""The status field training code reports through the status server; the one field this controller never writes."""
PORTS_RECHECK_SECONDS = 30.0
QUOTA_RECHECK_SECONDS = 30.0  # should a quota's change be missed, a refused pod is tried again this often
"""How long a job waiting for host ports waits at most before it looks again (it is woken as they come back)."""


@functools.cache
def _typed(api_version: str, kind: str) -> Callable[[dict[str, Any]], TypedObject]:
    """The parser of a cached child of this kind (cached objects lack their type fields): one
    function per kind, so that ``Informer.parsed`` knows a version it parsed before."""

    def parse(body: dict[str, Any]) -> TypedObject:
        return TypedObject.model_validate({"apiVersion": api_version, "kind": kind, **body})

    return parse


class JobController:
    def __init__(
        self,
        client: AsyncClient,
        plugin: Framework,
        settings: OperatorSettings,
        *,
        ports: PortAllocator,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: OperatorMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
        informers: SharedInformers | None = None,
    ) -> None:
        self.client = client
        self.plugin = plugin
        self.settings = settings
        self.ports = ports
        self.clock = clock
        self.res = job_resource(plugin.info)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics = metrics or OperatorMetrics()
        self.metrics.watch_queue(plugin.info.controller_name, lambda: len(self.queue), kind=plugin.info.kind)
        # Leader election's fence: a replica that is no longer sure it leads writes nothing.
        # trainingProgress is the status server's (training code reports it): never written here.
        self.applier = Applier(
            client,
            component=plugin.info.controller_name,
            clock=clock,
            may_write=may_write,
            owned_elsewhere=(STATUS_SERVER_FIELD,),
        )
        self.child_kinds = child_kinds(plugin, settings.controller)
        self.resources = {(k.api_version, k.kind): resource(k) for k in (*REPLICA_KINDS, *self.child_kinds)}
        # What the operator reads between events, it reads from these caches, never the API server.
        # The jobs and what any kind may own come from the manager's shared informers; the replicas
        # are this kind's alone (selected by its operator-name label).
        namespace = settings.namespace
        shared = informers if informers is not None else SharedInformers(client)
        self.jobs = shared.informer(self.res, self._on_job, namespace=namespace, parsed=JOB_MODELS)
        model, info = plugin.info.model, plugin.info
        # A cached version's model and its defaulted copy, each made once (``Informer.parsed``).
        self._model: Callable[[dict[str, Any]], TrainingJob] = model.model_validate
        self._defaults: Callable[[dict[str, Any]], TrainingJob] = lambda raw: apply_defaults(
            self.jobs.parsed(self._model, raw), info
        )
        ours = selector({labels.OPERATOR_NAME: plugin.info.controller_name})
        self.replicas = {
            k.kind: Informer(
                client,
                self._resource(k.api_version, k.kind),
                self._on_child,
                namespace=namespace,
                labels=ours,
                indexers={JOB_INDEX: label_index(labels.JOB_NAME)},
            )
            for k in REPLICA_KINDS
        }
        self.child_caches = {
            k: shared.informer(
                self._resource(k.api_version, k.kind),
                self._on_child,
                namespace=namespace,
                indexers={OWNER_INDEX: controller_of},
            )
            for k in self.child_kinds
        }
        # Jobs whose pod a ResourceQuota refused, by namespace: a change of that namespace's
        # quotas (its status.used falling, above all) wakes exactly these, never a scan of jobs.
        self.refused: dict[str, set[Key]] = {}
        # And what was refused, by job and pod: the next pass's Created condition says it.
        self.refusals: dict[Key, dict[str, str]] = {}
        self.quotas = shared.informer(ResourceQuota, self._on_quota, namespace=namespace)
        self.caches = Caches(plugin.info.controller_name)

    async def prime(self) -> None:
        """Start the informers and wait for their first lists; then hold the ports of every existing
        job before any worker allocates, so that after a restart a new job cannot be given ports an
        unreconciled job already has. Idempotent."""
        # Checked before any watch exists: a missing PodGroup CRD is refused at once, not waited for.
        await self._check_gang_crd()
        await self.caches.sync(dict(self._informers()))
        for raw in self.jobs.items():
            try:
                job = self.plugin.info.model.model_validate(raw)
            except ValidationError:
                continue
            self._hold_ports(job, self._pods(job.namespace, job.name))

    def _informers(self) -> list[tuple[str, Informer]]:
        return [
            (self.plugin.info.plural, self.jobs),
            *((k.plural, self.replicas[k.kind]) for k in REPLICA_KINDS),
            *((k.plural, self.child_caches[k]) for k in self.child_kinds),
            ("resourcequotas", self.quotas),
        ]

    async def run(self) -> None:
        await self.prime()
        await asyncio.gather(self.caches.run(), *(self._worker() for _ in range(self.settings.workers)))

    async def _check_gang_crd(self) -> None:
        """Gang scheduling needs the PodGroup CRD; without it, stop at start as upstream does."""
        kind = gang.group_kind(self.settings.controller)
        if kind is None:
            return
        groups = self._resource(kind.api_version, kind.kind)
        try:
            async for _ in self.client.list(groups, namespace=self.settings.namespace, chunk_size=1):
                break
        except ApiError as exc:
            if is_status(exc, 404):
                scheduler = flavour(self.settings.controller.gang_scheduler_name).scheduler
                raise RuntimeError(
                    f"gang scheduler {scheduler!r} needs the {kind.api_version} PodGroup CRD, "
                    "which this cluster does not serve; install it or run without --gang-scheduler-name"
                ) from exc
            raise

    def _cache(self, api_version: str, kind: str) -> Informer:
        """The informer of a kind this controller writes (replicas by kind, the other child kinds)."""
        if (api_version, kind) in {(k.api_version, k.kind) for k in REPLICA_KINDS}:
            return self.replicas[kind]
        return next(i for k, i in self.child_caches.items() if (k.api_version, k.kind) == (api_version, kind))

    def _resource(self, api_version: str, kind: str) -> Any:
        try:
            return self.resources[api_version, kind]
        except KeyError:
            raise LookupError(f"{kind} ({api_version}) is no kind {self.plugin.info.kind}s own") from None

    # -- event sources: every one only enqueues a key ------------------------------------------------

    def _on_job(self, kind: str, obj: dict[str, Any]) -> None:
        m = obj["metadata"]
        if kind == "DELETED":
            self.refusals.pop((m["namespace"], m["name"]), None)
        self.queue.add((m["namespace"], m["name"]))

    def _on_quota(self, _: str, obj: dict[str, Any]) -> None:
        for key in self.refused.pop(obj["metadata"].get("namespace") or "", ()):
            self.queue.add(key)

    def _on_child(self, _: str, obj: dict[str, Any]) -> None:
        """Enqueue the job controlling a child that changed."""
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == self.plugin.info.kind:
                self.queue.add((m["namespace"], ref["name"]))

    # -- the worker loop -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        name = self.plugin.info.controller_name
        observe = self.metrics.observer(name)
        await work(self.queue, self.reconcile, name=name, observe=observe, on_permanent=self._tell_permanent)

    async def _tell_permanent(self, key: Key, exc: Permanent) -> None:
        """A job that cannot be reconciled until it changes fails, as upstream's operators fail a
        job whose spec they cannot read: a Failed condition and a Warning event name the cause."""
        raw = self.jobs.get(*key)
        if raw is None:
            return
        now = format_time(self.clock())
        old = (raw.get("status") or {}).get("conditions") or []
        new, changed = set_condition(old, "Failed", "True", exc.reason, exc.message, now, lastUpdateTime=now)
        if not changed:
            return
        await self.applier.write_status(self.res, raw, {"conditions": new}, self.jobs)
        await self._emit(raw, [Event.warning(exc.reason, exc.message)])

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        owner = f"{namespace}/{name}"
        raw = self.jobs.get(namespace, name)
        if raw is None:
            self.ports.release(owner)
            self.metrics.forget_job(self.plugin.info.kind, namespace, name)
            return None
        try:
            job = self.jobs.parsed(self._model, raw)
        except ValidationError as exc:
            # Admission validates jobs; one that still does not parse (written where no webhook
            # runs) cannot be reconciled until it changes. Upstream's words (MPIJob's validation).
            kind = self.plugin.info.kind
            because = "; ".join(str(error) for error in type_errors(exc))
            raise Permanent(f"{kind}FailedValidation", f"{kind} failed validation because {because}") from exc
        observed = await self._observe(job, key, self.jobs.parsed(self._defaults, raw))
        self._hold_ports(job, observed.pods)
        plan = reconcile(observed, self.plugin, self.settings.controller)
        if plan.allocate_ports:
            # The one input a pass cannot compute (the allocator is here): recorded first, then the
            # pass is computed again with it, so that it goes on to what follows (the PodGroup, or
            # the replicas) in this pass and its one status write, not in a second pass and write.
            raw = await self._record_ports(raw, plan.allocate_ports)
            job = self.jobs.parsed(self._model, raw)
            observed = dataclasses.replace(observed, job=job, defaulted=self.jobs.parsed(self._defaults, raw))
            plan = reconcile(observed, self.plugin, self.settings.controller)
        seen = [*observed.pods, *observed.services, *observed.other_children]
        uids = {(c.kind or "", c.name): c.metadata.uid or "" for c in seen}
        await self.apply(raw, plan, uids=uids, finished=conditions.is_finished(job.status))
        return plan.requeue_after.total_seconds() if plan.requeue_after is not None else None

    def _hold_ports(self, job: TrainingJob, pods: Sequence[Pod]) -> None:
        """Keep the ports a job recorded from other jobs while it needs them (children.held_ports)."""
        owner = f"{job.namespace}/{job.name}"
        held = children.held_ports(job, pods)
        if held:
            self.ports.hold(owner, held.values())
        else:
            self.ports.release(owner)

    # -- reading a job's children, from the caches -----------------------------------------------------

    def _pods(self, namespace: str, name: str) -> tuple[Pod, ...]:
        cache = self.replicas[POD.kind]
        return tuple(cache.parsed(Pod.model_validate, p) for p in cache.by_index(JOB_INDEX, f"{namespace}/{name}"))

    async def _observe(self, job: TrainingJob, key: Key, defaulted: TrainingJob) -> Observed:
        """The job's replicas by its labels, its other owned children by controller, PriorityClasses if needed."""
        filed = f"{key[0]}/{job.name}"
        svc_cache = self.replicas[SERVICE.kind]
        pods = self._pods(key[0], job.name)
        services = tuple(svc_cache.parsed(Service.model_validate, s) for s in svc_cache.by_index(JOB_INDEX, filed))
        other_children = self._read_other_children(key)
        classes = await self._priority_classes(job)
        return Observed(
            job,
            pods,
            services,
            self.clock(),
            other_children=other_children,
            priority_classes=classes,
            key_pairs=sshkeys.key_pair,
            defaulted=defaulted,
            refused=dict(self.refusals.get(key, {})),
        )

    def _read_other_children(self, key: Key) -> tuple[TypedObject, ...]:
        """Each child of the other kinds the caches hold controlled by a job of this name."""
        controller = f"{self.plugin.info.kind}/{key[0]}/{key[1]}"
        return tuple(
            self.child_caches[kind].parsed(_typed(kind.api_version, kind.kind), body)
            for kind in sorted(self.child_kinds, key=lambda k: (k.api_version, k.kind))
            for body in self.child_caches[kind].by_index(OWNER_INDEX, controller)
        )

    async def _priority_classes(self, job: TrainingJob) -> dict[str, int]:
        """PriorityClass values by name, only when the job's PodGroup minResources needs them."""
        classes: dict[str, int] = {}
        if gang.needs_priority_classes(job, self.settings.controller):
            async for pc in self.client.list(PriorityClass):
                if pc.metadata is not None and pc.metadata.name and pc.value is not None:
                    classes[pc.metadata.name] = pc.value
        return classes

    # -- applying a plan -------------------------------------------------------------------------------

    async def apply(
        self,
        job: dict[str, Any],
        plan: Plan,
        uids: dict[tuple[str, str], str] | None = None,
        *,
        finished: bool = False,
    ) -> None:
        """Ports, owned children, deletes, creates, then the one status write, then events.

        ``uids``: the children the plan was computed from, so a delete removes exactly the object
        the pass saw, never a newer one of the same name. ``finished``: the job was finished when
        the pass began, so the plan is its clean-up, after which a pass has nothing left to do:
        the watch's word that the replicas it deleted are gone calls for none.
        """
        m = job["metadata"]
        namespace, name = m["namespace"], m["name"]
        self.applier.fence(f"applying the plan of {namespace}/{name}")
        if plan.delete_job:
            await self._delete_job(job, plan)
            return
        if plan.allocate_ports:
            job = await self._record_ports(job, plan.allocate_ports)
        for obj in plan.apply:
            kind = (obj.api_version or "", obj.kind or "")
            await self.applier.write(self._resource(*kind), obj.to_dict(), self._cache(*kind))
        for patch in plan.patch_status:
            target = patch.child
            res = self._resource(target.api_version, target.kind)
            cache = self._cache(target.api_version, target.kind)
            await self.applier.patch(res.Status, target.name, {"status": patch.patch}, namespace=namespace, cache=cache)
        events: list[Event] = []
        for ref in plan.delete:
            events += await self._delete(job, ref, namespace, (uids or {}).get((ref.kind, ref.name)), tell=not finished)
        refused: list[Waiting] = []
        for child in plan.create:
            try:
                events += await self._create_replica(job, child)
            except Waiting as waiting:
                refused.append(waiting)  # the status is still written: the job says why it waits
        if plan.status is not None:
            try:
                job = await self._write_status(job, plan.status.to_dict())
            except ApiError as exc:
                if is_status(exc, 409):
                    await self._emit(job, events)  # what this pass did happened; its verdict is recomputed
                raise
        self.metrics.observe_job(job, self.clock())
        await self._emit(job, [*events, *plan.events])
        if refused:
            raise refused[0]

    async def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """The pass's one status write, guarded by the resourceVersion it was computed from.

        The job was read from the cache, which may lag: a status computed from an older copy (the
        restart ledger in it, above all) must not land, so the server refuses it (409) and the
        pass runs again on the newer job.
        """
        m = job["metadata"]
        for rtype in (job.get("status") or {}).get("replicaStatuses") or {}:
            status.setdefault("replicaStatuses", {}).setdefault(rtype, None)
        patched = await self.applier.write_status(self.res, job, status, self.jobs)
        self.metrics.status_written(self.plugin.info.kind, m["namespace"], job.get("status"), status)
        return patched

    async def _create_replica(self, job: dict[str, Any], child: Pod | Service) -> list[Event]:
        kind = child.kind or "Pod"
        res = self._resource(child.api_version or "v1", kind)
        try:
            created = await self.applier.create(res, child.to_dict(), self.replicas[kind])
        except ApiError as exc:
            await self._emit(job, [Event.warning(f"FailedCreate{kind}", f"Error creating: {exc}")])
            if quota_refusal(exc):
                # As training-operator: the event, then again later; here, as soon as a quota of the
                # namespace changes (``_on_quota``), or after a while should that word be missed.
                m = job["metadata"]
                key = (m["namespace"], m["name"])
                self.refused.setdefault(m["namespace"], set()).add(key)
                told = self.refusals.setdefault(key, {})
                new = told.get(child.name) != str(exc)
                told[child.name] = str(exc)
                # A refusal not yet in the job's status is told by a pass at once, then waits.
                raise Waiting(f"Error creating: {exc}", 0.0 if new else QUOTA_RECHECK_SECONDS) from exc
            raise
        job_key = (job["metadata"]["namespace"], job["metadata"]["name"])
        if child.name in self.refusals.get(job_key, {}):
            del self.refusals[job_key][child.name]
            if not self.refusals[job_key]:
                del self.refusals[job_key]
        return [Event.normal(f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {child.name}")] if created else []

    async def _delete(
        self, job: dict[str, Any], ref: ChildRef, namespace: str, uid: str | None, *, tell: bool = True
    ) -> list[Event]:
        """Delete a child; the events its deletion is told with, unless it was already gone.

        ``tell`` False: the watch's DELETED of a replica deleted here enqueues no pass (``Informer.removed``).
        """
        told = ref.deletion()
        # The next pass must see it terminating or gone, not delete (and tell) it again before the watch says so.
        cache = self._cache(ref.api_version, ref.kind)
        try:
            res = self._resource(ref.api_version, ref.kind)
            # Silence only for this controller's own replica caches: the owned kinds' are shared.
            tell = tell or cache not in self.replicas.values()
            deleted = await self.applier.delete(res, ref.name, namespace=namespace, uid=uid, cache=cache, tell=tell)
        except ApiError as exc:
            if told.failed:
                await self._emit(job, [Event.warning(told.failed, f"Error deleting: {exc}")])
            raise
        return [] if deleted is None else list(told.done)

    async def _delete_job(self, job: dict[str, Any], plan: Plan) -> None:
        """TTL: the job goes (its children follow through ownerReferences); the event only if we deleted it."""
        m = job["metadata"]
        deleted = await self.applier.delete(
            self.res, m["name"], namespace=m["namespace"], uid=m.get("uid"), cache=self.jobs
        )
        if deleted is None:
            return
        self.metrics.job_deleted(self.plugin.info.kind, m["namespace"])
        await self._emit(job, plan.events)

    async def _record_ports(self, job: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        """Ports for ``keys`` from the allocator, into the job's annotation; the job as cached after."""
        m = job["metadata"]
        self.applier.fence(f"recording ports of {m['namespace']}/{m['name']}")
        key = (m["namespace"], m["name"])
        try:
            fresh = self.ports.allocate(f"{key[0]}/{key[1]}", len(keys), wake=functools.partial(self.queue.add, key))
        except PortsExhausted as exc:
            if exc.first:
                await self._emit(job, [Event.warning("PortsExhausted", str(exc))])
            raise Waiting(str(exc), PORTS_RECHECK_SECONDS) from exc
        await record_ports(self.applier, self.res, job, dict(zip(keys, fresh, strict=True)), self.jobs)
        # As cached (its model shared through ``parsed``), unless the watch brought a newer one.
        return self.jobs.get(m["namespace"], m["name"]) or job

    async def _emit(self, job: dict[str, Any], events: Sequence[Event]) -> None:
        involved = reference(job, job.get("apiVersion", self.plugin.info.api_version), self.plugin.info.kind)
        await self.applier.emit(involved, events)


async def record_ports(applier: Applier, res: Any, job: dict[str, Any], ports: dict[str, int], cache: Informer) -> None:
    """Add ``ports`` (by key) to the host ports a job's annotation records: what its pods are built with."""
    m = job["metadata"]
    current = json.loads((m.get("annotations") or {}).get(labels.HOST_PORTS) or "{}")
    current.update(ports)
    patch = {"metadata": {"annotations": {labels.HOST_PORTS: json.dumps(current, sort_keys=True)}}}
    await applier.patch(res, m["name"], patch, namespace=m["namespace"], cache=cache)
