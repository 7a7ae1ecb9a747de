"""The job controller: keys in, reconcile, plan applied. The I/O shell around ``reconcile``.

Watches on jobs and on every kind of child they own only enqueue the job's key: pods and
Services, and the kinds ``controller.owned_kinds`` names (the gang's PodGroups, the plugin's,
e.g. HPAs). A worker then re-reads the job and its children, replicas by the job's labels and
other owned children by name, as the watches last saw them controlled by a job of that name
(``OwnedIndex``); asks the pure reconciler for a plan; and applies it through one path for every
kind (lightkube's own classes for Kubernetes' groups, generic resources for CRDs), "already
exists" on create and "not found" on delete counting as done. Nothing here decides anything
about the job: it observes and it acts.
"""

from __future__ import annotations

import asyncio
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

from trainyard.api import labels
from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.meta import TypedObject, format_time
from trainyard.api.podgroup import flavour
from trainyard.client import build, is_status, job_resource, record_event, selector, to_dict, watch_forever
from trainyard.controller import ChildRef, Observed, Plan, children, gang, owned_kinds, reconcile
from trainyard.controller.children import POD, REPLICA_KINDS, SERVICE
from trainyard.frameworks.base import Framework, OwnedKind
from trainyard.operator import sshkeys
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator
from trainyard.operator.settings import OperatorSettings
from trainyard.operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]
Event = tuple[str, str, str]

REPLICA_VERBS: tuple[str, ...] = ("list", "watch", "create", "delete")
"""What this controller asks of pods and Services (``deploy/``'s RBAC grants exactly that)."""
OWNED_VERBS: tuple[str, ...] = ("get", "watch", "create", "update", "delete")
"""What it asks of every other owned kind: a watch (which starts with the objects that exist,
so no list), get by name, create, replace and delete (``deploy/``'s RBAC grants exactly that)."""


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


class OwnedIndex:
    """The owned children (other than replicas) of each job key, as the watches last saw them."""

    def __init__(self) -> None:
        self._owners: dict[tuple[OwnedKind, str, str], Key] = {}
        self._children: dict[Key, set[tuple[OwnedKind, str]]] = {}

    def saw(self, kind: OwnedKind, namespace: str, name: str, owner: Key | None) -> None:
        """A child changed: now controlled by a job ``owner`` (None: by none of ours, or gone)."""
        before = self._owners.pop((kind, namespace, name), None)
        if before is not None:
            self._children[before].discard((kind, name))
            if not self._children[before]:
                del self._children[before]
        if owner is not None:
            self._owners[kind, namespace, name] = owner
            self._children.setdefault(owner, set()).add((kind, name))

    def of(self, key: Key) -> list[tuple[OwnedKind, str]]:
        return sorted(self._children.get(key, ()), key=lambda c: (c[0].api_version, c[0].kind, c[1]))


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
        except Exception as exc:
            metrics.reconciled(name, time.monotonic() - started, "error", key, exc)
            delay = queue.add_rate_limited(key)
            log.warning(
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
        self.index = OwnedIndex()

    async def prime(self) -> None:
        """Hold the ports of every existing job before any worker allocates, so that after a
        restart a new job cannot be given ports an unreconciled job already has."""
        delay = 0.5
        while True:
            try:
                jobs = [to_dict(obj) async for obj in self.client.list(self.res, namespace=self.settings.namespace)]
            except Exception as exc:  # the API server may not answer yet: wait for it, as informers do
                log.warning("cannot list %s yet (%s); retrying in %.1fs", self.res.__name__, exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            break
        for raw in jobs:
            try:
                job = self.plugin.info.model.model_validate(raw)
            except ValidationError:
                continue
            self.ports.hold(f"{job.namespace}/{job.name}", children.allocated_ports(job).values())

    async def run(self) -> None:
        # Checked before any watch exists: a refusal then leaves no coroutine behind unawaited.
        await self._check_gang_crd()
        replicas = {labels.OPERATOR_NAME: self.plugin.info.controller_name}
        await asyncio.gather(
            self._watch_jobs(),
            *(self._watch(kind, selecting=replicas) for kind in REPLICA_KINDS),
            *(self._watch(kind, index=True) for kind in self.owned_kinds),
            *(self._worker() for _ in range(self.settings.workers)),
        )

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

    def _resource(self, api_version: str, kind: str) -> Any:
        try:
            return self.resources[api_version, kind]
        except KeyError:
            raise LookupError(f"{kind} ({api_version}) is no kind {self.plugin.info.kind}s own") from None

    # -- event sources: every one only enqueues a key ------------------------------------------------

    async def _watch_jobs(self) -> None:
        async for _, obj in watch_forever(self.client, self.res, namespace=self.settings.namespace):
            m = obj["metadata"]
            self.queue.add((m["namespace"], m["name"]))

    async def _watch(self, kind: OwnedKind, *, selecting: dict[str, str] | None = None, index: bool = False) -> None:
        """Enqueue the job controlling each child that changes; with ``index``, remember which it is."""
        res = self._resource(kind.api_version, kind.kind)
        namespace = self.settings.namespace
        watching = selector(selecting) if selecting is not None else None
        async for event, obj in watch_forever(self.client, res, namespace=namespace, labels=watching):
            m = obj["metadata"]
            owner = next(
                (
                    (m["namespace"], ref["name"])
                    for ref in m.get("ownerReferences") or []
                    if ref.get("controller") and ref.get("kind") == self.plugin.info.kind
                ),
                None,
            )
            if index:
                self.index.saw(kind, m["namespace"], m["name"], None if event == "DELETED" else owner)
            if owner is not None:
                self.queue.add(owner)

    # -- the worker loop -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        await work(self.queue, self.reconcile, self.metrics, self.plugin.info.controller_name)

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        owner = f"{namespace}/{name}"
        try:
            raw = to_dict(await self.client.get(self.res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                self.ports.release(owner)
                self.metrics.forget_job(self.plugin.info.kind, namespace, name)
                return None
            raise
        try:
            job = self.plugin.info.model.model_validate(raw)
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
        self.ports.hold(owner, children.allocated_ports(job).values())
        observed = await self._observe(job, key)
        plan = reconcile(observed, self.plugin, self.settings.controller)
        await self.apply(raw, plan)
        return plan.requeue_after.total_seconds() if plan.requeue_after is not None else None

    # -- reading a job's children ----------------------------------------------------------------------

    async def _observe(self, job: TrainingJob, key: Key) -> Observed:
        """The job's replicas by its labels, its other owned children by name, PriorityClasses if needed."""
        replica = selector({labels.OPERATOR_NAME: self.plugin.info.controller_name, labels.JOB_NAME: job.name})
        pods = tuple(Pod.model_validate(p) for p in await self._list(POD, key[0], replica))
        services = tuple(Service.model_validate(s) for s in await self._list(SERVICE, key[0], replica))
        owned = await self._read_owned(key)
        classes = await self._priority_classes(job)
        return Observed(
            job, pods, services, self.clock(), owned=owned, priority_classes=classes, key_pairs=sshkeys.key_pair
        )

    async def _list(self, kind: OwnedKind, namespace: str, selected: dict[str, Any]) -> list[dict[str, Any]]:
        res = self._resource(kind.api_version, kind.kind)
        return [to_dict(o) async for o in self.client.list(res, namespace=namespace, labels=selected)]

    async def _read_owned(self, key: Key) -> tuple[TypedObject, ...]:
        """Each owned child the watches saw controlled by a job of this name, read again (gone: skipped)."""
        found = []
        for kind, name in self.index.of(key):
            res = self._resource(kind.api_version, kind.kind)
            try:
                body = to_dict(await self.client.get(res, name, namespace=key[0]))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
                continue
            found.append(TypedObject.model_validate({"apiVersion": kind.api_version, "kind": kind.kind, **body}))
        return tuple(found)

    async def _priority_classes(self, job: TrainingJob) -> dict[str, int]:
        """PriorityClass values by name, only when the job's PodGroup minResources needs them."""
        classes: dict[str, int] = {}
        if gang.needs_priority_classes(job, self.settings.controller):
            async for pc in self.client.list(PriorityClass):
                if pc.metadata is not None and pc.metadata.name and pc.value is not None:
                    classes[pc.metadata.name] = pc.value
        return classes

    # -- applying a plan -------------------------------------------------------------------------------

    async def apply(self, job: dict[str, Any], plan: Plan) -> None:
        """Ports, owned children, deletes, creates, then the one status write, then events."""
        m = job["metadata"]
        namespace, name = m["namespace"], m["name"]
        if not self.may_write():
            raise NotLeading(f"not applying the plan of {namespace}/{name}: this replica no longer leads")
        if plan.delete_job:
            await self._delete_job(job, plan)
            return
        if plan.allocate_ports:
            await self._record_ports(job, plan.allocate_ports)
        for obj in plan.apply:
            await self._write(obj)
        for patch in plan.patch_status:
            res = self._resource(patch.child.api_version, patch.child.kind)
            await self.client.patch(
                res.Status, patch.child.name, {"status": patch.patch}, namespace=namespace, patch_type=PatchType.MERGE
            )
        events: list[Event] = []
        for ref in plan.delete:
            events += await self._delete(job, ref, namespace)
        for child in plan.create:
            events += await self._create_replica(job, child)
        if plan.status is not None:
            status = plan.status.to_dict()
            # Written only by the status server: the copy read at the start of this pass may be
            # older than what training code reported since, and a merge patch would put it back.
            status.pop("trainingProgress", None)
            for rtype in (job.get("status") or {}).get("replicaStatuses") or {}:
                status.setdefault("replicaStatuses", {}).setdefault(rtype, None)
            await self.client.patch(
                self.res.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
            )
            self.metrics.status_written(self.plugin.info.kind, namespace, job.get("status"), status)
            job = {**job, "status": {**(job.get("status") or {}), **status}}
        self.metrics.observe_job(job, self.clock())
        events += [(e.type.value, e.reason, e.message) for e in plan.events]
        await self._emit(job, events)

    async def _write(self, obj: TypedObject) -> None:
        """Create an owned child, or replace it as read (a newer version gets a conflict, and a retry)."""
        body = build(self._resource(obj.api_version or "", obj.kind or ""), obj.to_dict())
        if obj.metadata.resource_version is None:
            await self._create(body)
        else:
            await self.client.replace(body)

    async def _create_replica(self, job: dict[str, Any], child: Pod | Service) -> list[Event]:
        kind = child.kind or "Pod"
        try:
            created = await self._create(build(self._resource(child.api_version or "v1", kind), child.to_dict()))
        except ApiError as exc:
            await self._emit(job, [("Warning", f"FailedCreate{kind}", f"Error creating: {exc}")])
            raise
        return [("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {child.name}")] if created else []

    async def _create(self, body: Any) -> bool:
        """Create; False when it was already there (that is success too: the next pass sees it)."""
        try:
            await self.client.create(body)
        except ApiError as exc:
            if is_status(exc, 409):
                return False
            raise
        return True

    async def _delete(self, job: dict[str, Any], ref: ChildRef, namespace: str) -> list[Event]:
        """Delete a child; the events its deletion is told with, unless it was already gone."""
        told = ref.deletion()
        try:
            deleted = await self._delete_named(self._resource(ref.api_version, ref.kind), ref.name, namespace)
        except ApiError as exc:
            if told.failed:
                await self._emit(job, [("Warning", told.failed, f"Error deleting: {exc}")])
            raise
        return [(e.type.value, e.reason, e.message) for e in told.done] if deleted else []

    async def _delete_named(self, res: Any, name: str, namespace: str) -> bool:
        """Delete; False when it was already gone (that is success too)."""
        try:
            await self.client.delete(res, name, namespace=namespace)
        except ApiError as exc:
            if is_status(exc, 404):
                return False
            raise
        return True

    async def _delete_job(self, job: dict[str, Any], plan: Plan) -> None:
        """TTL: the job goes (its children follow through ownerReferences); the event only if we deleted it."""
        m = job["metadata"]
        if not await self._delete_named(self.res, m["name"], m["namespace"]):
            return
        self.metrics.job_deleted(self.plugin.info.kind, m["namespace"])
        await self._emit(job, [(e.type.value, e.reason, e.message) for e in plan.events])

    async def _record_ports(self, job: dict[str, Any], keys: tuple[str, ...]) -> None:
        m = job["metadata"]
        annotations = m.get("annotations") or {}
        current = json.loads(annotations.get(labels.HOST_PORTS) or "{}")
        fresh = self.ports.allocate(f"{m['namespace']}/{m['name']}", len(keys))
        current.update(dict(zip(keys, fresh, strict=True)))
        patch = {"metadata": {"annotations": {labels.HOST_PORTS: json.dumps(current, sort_keys=True)}}}
        await self.client.patch(self.res, m["name"], patch, namespace=m["namespace"], patch_type=PatchType.MERGE)

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
