"""The job controller: keys in, reconcile, plan applied. The I/O shell around ``reconcile``.

Informers (``trainyard.informer``) cache the jobs, their pods and Services, and every other kind
they own (``controller.owned_kinds``: the gang's PodGroups, the plugin's, e.g. HPAs); a change to
any of them only enqueues the key of the job it belongs to. A worker then reads the job and its
children from those caches, never from the API server: replicas by the job's label index, other
children by their controller owner; asks the pure reconciler for a plan; and applies it through
one path for every kind (lightkube's own classes for Kubernetes' groups, generic resources for
CRDs), "already exists" on create and "not found" on delete counting as done. Every answer to a
write goes back into its cache, and the status write carries the job's resourceVersion, so a cache
that lags can neither make a pass create twice nor land a status computed from an older job.
Nothing here decides anything about the job: it observes and it acts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import importlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.scheduling_v1 import PriorityClass
from lightkube.types import PatchType
from pydantic import ValidationError

from trainyard.api import conditions, labels
from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.defaults import apply_defaults
from trainyard.api.meta import TypedObject, format_time
from trainyard.api.podgroup import flavour
from trainyard.client.events import record_event
from trainyard.client.resources import build, is_status, job_resource, selector, to_dict
from trainyard.client.transport import delete
from trainyard.controller import ChildRef, Observed, Plan, children, gang, owned_kinds, reconcile
from trainyard.controller.children import POD, REPLICA_KINDS, SERVICE
from trainyard.frameworks.base import Framework, OwnedKind
from trainyard.informer import Caches, Informer, SharedInformers, controller_of, label_index, patch_status
from trainyard.operator import sshkeys
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator, PortsExhausted
from trainyard.operator.settings import OperatorSettings
from trainyard.operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]
Event = tuple[str, str, str]
JOB_INDEX = "job"
"""Replicas filed by ``namespace/job-name`` (their job-name label)."""
JOB_MODELS = 2048
"""Jobs whose models (as read, and defaulted) the jobs' informer keeps: every job of a sweep is
worked on in turn, so fewer than the sweep's size were all dropped before the job's next pass
(a 1,000-job sweep parsed and defaulted each job again on every pass); 30 KB a job."""
OWNER_INDEX = "controller"
"""Other owned children filed by ``Kind/namespace/name`` of their controller owner."""

REPLICA_VERBS: tuple[str, ...] = ("list", "watch", "create", "delete")
"""What this controller asks of pods and Services (``deploy/``'s RBAC grants exactly that)."""
OWNED_VERBS: tuple[str, ...] = ("list", "watch", "create", "update", "delete")
"""What it asks of every other owned kind: list and watch (its informer), create, replace and delete
(``deploy/``'s RBAC grants exactly that)."""


def resource(kind: OwnedKind) -> Any:
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


PORTS_RECHECK_SECONDS = 30.0
"""How long a job waiting for host ports waits at most before it looks again (it is woken as they come back)."""


class Waiting(Exception):
    """A pass that cannot go on yet for a reason its job's user was told: requeued, not rate-limited."""

    def __init__(self, message: str, after: float) -> None:
        super().__init__(message)
        self.after = after


async def work(
    queue: WorkQueue[Key], reconcile: Callable[[Key], Awaitable[float | None]], metrics: OperatorMetrics, name: str
) -> None:
    """One worker: keys from ``queue`` through ``reconcile`` forever; a failure is retried rate-limited,
    a pass that asks for it runs again after its delay; ``metrics`` count each under ``name``."""
    while True:
        key = await queue.get()
        started = time.monotonic()
        try:
            requeue = await reconcile(key)
        except asyncio.CancelledError:
            raise
        except Waiting as waiting:
            metrics.reconciled(name, time.monotonic() - started, "requeue_after", key)
            log.debug("%s: %s/%s waits: %s", name, *key, waiting)
            queue.forget(key)
            queue.add_after(key, waiting.after)
        except Exception as exc:
            metrics.reconciled(name, time.monotonic() - started, "error", key, exc)
            delay = queue.add_rate_limited(key)
            stale = isinstance(exc, ApiError) and is_status(exc, 409)
            log.log(
                logging.DEBUG if stale else logging.WARNING,  # a cache behind a write: routine, soon retried
                "%s: reconcile %s/%s failed (%s); retrying in %.2fs",
                name,
                *key,
                exc,
                delay,
                exc_info=not isinstance(exc, (ApiError, NotLeading)),
            )
        else:
            result = "success" if requeue is None else "requeue_after"
            metrics.reconciled(name, time.monotonic() - started, result, key)
            queue.forget(key)
            if requeue is not None:
                queue.add_after(key, requeue)
        finally:
            queue.done(key)


@functools.cache
def _typed(api_version: str, kind: str) -> Callable[[dict[str, Any]], TypedObject]:
    """The parser of a cached child of this kind (cached objects lack their type fields): one
    function per kind, so that ``Informer.parsed`` knows a version it parsed before."""

    def parse(body: dict[str, Any]) -> TypedObject:
        return TypedObject.model_validate({"apiVersion": api_version, "kind": kind, **body})

    return parse


class NotLeading(RuntimeError):
    """Raised instead of writing when leader election says this replica may have lost the lease."""


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
        self.may_write = may_write
        self.owned_kinds = owned_kinds(plugin, settings.controller)
        self.resources = {(k.api_version, k.kind): resource(k) for k in (*REPLICA_KINDS, *self.owned_kinds)}
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
        self.owned = {
            k: shared.informer(
                self._resource(k.api_version, k.kind),
                self._on_child,
                namespace=namespace,
                indexers={OWNER_INDEX: controller_of},
            )
            for k in self.owned_kinds
        }
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
            *((k.plural, self.owned[k]) for k in self.owned_kinds),
        ]

    async def run(self) -> None:
        await self.prime()
        await asyncio.gather(self.caches.run(), *(self._worker() for _ in range(self.settings.workers)))

    async def _check_gang_crd(self) -> None:
        """Gang scheduling needs the PodGroup CRD; without it, stop at start as upstream does."""
        kind = gang.owned_kind(self.settings.controller)
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
        """The informer of a kind this controller writes (replicas by kind, other owned kinds)."""
        if (api_version, kind) in {(k.api_version, k.kind) for k in REPLICA_KINDS}:
            return self.replicas[kind]
        return next(i for k, i in self.owned.items() if (k.api_version, k.kind) == (api_version, kind))

    def _resource(self, api_version: str, kind: str) -> Any:
        try:
            return self.resources[api_version, kind]
        except KeyError:
            raise LookupError(f"{kind} ({api_version}) is no kind {self.plugin.info.kind}s own") from None

    # -- event sources: every one only enqueues a key ------------------------------------------------

    def _on_job(self, _: str, obj: dict[str, Any]) -> None:
        m = obj["metadata"]
        self.queue.add((m["namespace"], m["name"]))

    def _on_child(self, _: str, obj: dict[str, Any]) -> None:
        """Enqueue the job controlling a child that changed."""
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == self.plugin.info.kind:
                self.queue.add((m["namespace"], ref["name"]))

    # -- the worker loop -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        await work(self.queue, self.reconcile, self.metrics, self.plugin.info.controller_name)

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
            # Admission validates jobs; one that still does not parse cannot be reconciled.
            log.error(
                "%s %s does not match the %s schema: %s",
                self.plugin.info.kind,
                owner,
                self.plugin.info.kind,
                exc,
            )
            return None
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
        seen = [*observed.pods, *observed.services, *observed.owned]
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
        owned = self._read_owned(key)
        classes = await self._priority_classes(job)
        return Observed(
            job,
            pods,
            services,
            self.clock(),
            owned=owned,
            priority_classes=classes,
            key_pairs=sshkeys.key_pair,
            defaulted=defaulted,
        )

    def _read_owned(self, key: Key) -> tuple[TypedObject, ...]:
        """Each owned child the caches hold controlled by a job of this name."""
        controller = f"{self.plugin.info.kind}/{key[0]}/{key[1]}"
        return tuple(
            self.owned[kind].parsed(_typed(kind.api_version, kind.kind), body)
            for kind in sorted(self.owned_kinds, key=lambda k: (k.api_version, k.kind))
            for body in self.owned[kind].by_index(OWNER_INDEX, controller)
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
        if not self.may_write():
            raise NotLeading(f"not applying the plan of {namespace}/{name}: this replica no longer leads")
        if plan.delete_job:
            await self._delete_job(job, plan)
            return
        if plan.allocate_ports:
            job = await self._record_ports(job, plan.allocate_ports)
        for obj in plan.apply:
            await self._write(obj)
        for patch in plan.patch_status:
            res = self._resource(patch.child.api_version, patch.child.kind)
            patched = await self.client.patch(
                res.Status, patch.child.name, {"status": patch.patch}, namespace=namespace, patch_type=PatchType.MERGE
            )
            self._cache(patch.child.api_version, patch.child.kind).mutated(to_dict(patched))
        events: list[Event] = []
        for ref in plan.delete:
            events += await self._delete(job, ref, namespace, (uids or {}).get((ref.kind, ref.name)), tell=not finished)
        for child in plan.create:
            events += await self._create_replica(job, child)
        if plan.status is not None:
            try:
                job = await self._write_status(job, plan.status.to_dict())
            except ApiError as exc:
                if is_status(exc, 409):
                    await self._emit(job, events)  # what this pass did happened; its verdict is recomputed
                raise
        self.metrics.observe_job(job, self.clock())
        events += [(e.type.value, e.reason, e.message) for e in plan.events]
        await self._emit(job, events)

    async def _write_status(self, job: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """The pass's one status write, guarded by the resourceVersion it was computed from.

        The job was read from the cache, which may lag: a status computed from an older copy (the
        restart ledger in it, above all) must not land, so the server refuses it (409) and the
        pass runs again on the newer job.
        """
        m = job["metadata"]
        # Written only by the status server: the copy read at the start of this pass may be
        # older than what training code reported since, and a merge patch would put it back.
        status.pop("trainingProgress", None)
        for rtype in (job.get("status") or {}).get("replicaStatuses") or {}:
            status.setdefault("replicaStatuses", {}).setdefault(rtype, None)
        patched = await patch_status(self.client, self.jobs, self.res, job, status)
        self.metrics.status_written(self.plugin.info.kind, m["namespace"], job.get("status"), status)
        return patched

    async def _write(self, obj: TypedObject) -> None:
        """Create an owned child, or replace it as read (a newer version gets a conflict, and a retry)."""
        body = build(self._resource(obj.api_version or "", obj.kind or ""), obj.to_dict())
        written = await self._create(body) if obj.metadata.resource_version is None else await self.client.replace(body)
        if written is not None:
            self._cache(obj.api_version or "", obj.kind or "").mutated(to_dict(written))

    async def _create_replica(self, job: dict[str, Any], child: Pod | Service) -> list[Event]:
        kind = child.kind or "Pod"
        try:
            created = await self._create(build(self._resource(child.api_version or "v1", kind), child.to_dict()))
            if created is not None:
                self.replicas[kind].mutated(to_dict(created))
        except ApiError as exc:
            await self._emit(job, [("Warning", f"FailedCreate{kind}", f"Error creating: {exc}")])
            raise
        return [("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {child.name}")] if created else []

    async def _create(self, body: Any) -> Any:
        """Create; None when it was already there (that is success too: the next pass sees it)."""
        try:
            return await self.client.create(body)
        except ApiError as exc:
            if is_status(exc, 409):
                return None
            raise

    async def _delete(
        self, job: dict[str, Any], ref: ChildRef, namespace: str, uid: str | None, *, tell: bool = True
    ) -> list[Event]:
        """Delete a child; the events its deletion is told with, unless it was already gone.

        ``tell`` False: the watch's DELETED of a replica deleted here enqueues no pass (``Informer.removed``).
        """
        told = ref.deletion()
        try:
            res = self._resource(ref.api_version, ref.kind)
            deleted = await delete(self.client, res, ref.name, namespace=namespace, uid=uid)
        except ApiError as exc:
            if told.failed:
                await self._emit(job, [("Warning", told.failed, f"Error deleting: {exc}")])
            raise
        if deleted is None:
            return []
        # The next pass must see it terminating or gone, not delete (and tell) it again before the watch says so.
        cache = self._cache(ref.api_version, ref.kind)
        # Silence only for this controller's own replica caches: the owned kinds' are shared.
        cache.removed(deleted, tell=tell or cache not in self.replicas.values())
        return [(e.type.value, e.reason, e.message) for e in told.done]

    async def _delete_job(self, job: dict[str, Any], plan: Plan) -> None:
        """TTL: the job goes (its children follow through ownerReferences); the event only if we deleted it."""
        m = job["metadata"]
        deleted = await delete(self.client, self.res, m["name"], namespace=m["namespace"], uid=m.get("uid"))
        if deleted is None:
            return
        self.jobs.removed(deleted)
        self.metrics.job_deleted(self.plugin.info.kind, m["namespace"])
        await self._emit(job, [(e.type.value, e.reason, e.message) for e in plan.events])

    async def _record_ports(self, job: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
        """Ports for ``keys`` from the allocator, into the job's annotation; the job as cached after."""
        m = job["metadata"]
        if not self.may_write():
            raise NotLeading(f"not recording ports of {m['namespace']}/{m['name']}: this replica no longer leads")
        annotations = m.get("annotations") or {}
        current = json.loads(annotations.get(labels.HOST_PORTS) or "{}")
        key = (m["namespace"], m["name"])
        try:
            fresh = self.ports.allocate(f"{key[0]}/{key[1]}", len(keys), wake=functools.partial(self.queue.add, key))
        except PortsExhausted as exc:
            if exc.first:
                await self._emit(job, [("Warning", "PortsExhausted", str(exc))])
            raise Waiting(str(exc), PORTS_RECHECK_SECONDS) from exc
        current.update(dict(zip(keys, fresh, strict=True)))
        patch = {"metadata": {"annotations": {labels.HOST_PORTS: json.dumps(current, sort_keys=True)}}}
        patched = await self.client.patch(
            self.res, m["name"], patch, namespace=m["namespace"], patch_type=PatchType.MERGE
        )
        answer = to_dict(patched)
        self.jobs.mutated(answer)
        # As cached (its model shared through ``parsed``), unless the watch brought a newer one.
        return self.jobs.get(m["namespace"], m["name"]) or answer

    async def _emit(self, job: dict[str, Any], events: Sequence[Event]) -> None:
        m = job["metadata"]
        involved = {
            "apiVersion": job.get("apiVersion", self.plugin.info.api_version),
            "kind": self.plugin.info.kind,
            "name": m["name"],
            "namespace": m["namespace"],
            "uid": m.get("uid"),
        }
        now = format_time(self.clock())
        for type_, reason, message in events:
            await record_event(
                self.client,
                involved,
                type_=type_,
                reason=reason,
                message=message,
                component=self.plugin.info.controller_name,
                now=now,
            )
