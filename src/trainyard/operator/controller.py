"""The job controller: keys in, reconcile, plan applied. The I/O shell around ``reconcile``.

Watches on jobs and on the pods and Services they own only enqueue the job's key; a worker then
re-reads the job and its children, asks the pure reconciler for a plan and applies it. Nothing
here decides anything about the job: it observes and it acts.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.autoscaling_v2 import HorizontalPodAutoscaler as LkHpa
from lightkube.resources.core_v1 import Pod as LkPod
from lightkube.resources.core_v1 import Service as LkService
from lightkube.resources.scheduling_v1 import PriorityClass
from lightkube.types import PatchType
from pydantic import ValidationError

from trainyard.api import labels
from trainyard.api.autoscaling import HorizontalPodAutoscaler
from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.meta import format_time
from trainyard.api.podgroup import PodGroup, flavour
from trainyard.client import build, is_status, job_resource, record_event, selector, to_dict, watch_forever
from trainyard.controller import Observed, Plan, children, elastic, gang, reconcile
from trainyard.frameworks.base import Framework
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator
from trainyard.operator.settings import OperatorSettings
from trainyard.operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]
_CHILD_RES: dict[str, Any] = {"Pod": LkPod, "Service": LkService}


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
        self.metrics.watch_queue(plugin.info.controller_name, lambda: len(self.queue))
        # Leader election's fence: a replica that is no longer sure it leads writes nothing.
        self.may_write = may_write
        self.pod_groups: Any = None
        if gang.enabled(settings.controller):
            kind = flavour(settings.controller.gang_scheduler_name)
            self.pod_groups = create_namespaced_resource(kind.group, kind.version, "PodGroup", "podgroups")
        self.autoscaling = elastic.autoscales(plugin.info.kind)
        self.hpa_owners: set[Key] = set()
        """Jobs the HPA watch saw owning an HPA: read even when the job no longer asks for one."""

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
        tasks = [
            self._watch_jobs(),
            self._watch_children(LkPod),
            self._watch_children(LkService),
            *(self._worker() for _ in range(self.settings.workers)),
        ]
        if self.pod_groups is not None:
            await self._check_pod_groups()
            tasks.append(self._watch_pod_groups())
        if self.autoscaling:
            tasks.append(self._watch_hpas())
        await asyncio.gather(*tasks)

    async def _check_pod_groups(self) -> None:
        """Gang scheduling needs the PodGroup CRD; without it, stop at start as upstream does."""
        try:
            async for _ in self.client.list(self.pod_groups, namespace=self.settings.namespace, chunk_size=1):
                break
        except ApiError as exc:
            if is_status(exc, 404):
                kind = flavour(self.settings.controller.gang_scheduler_name)
                raise RuntimeError(
                    f"gang scheduler {kind.scheduler!r} needs the {kind.api_version} PodGroup CRD, "
                    "which this cluster does not serve; install it or run without --gang-scheduler-name"
                ) from exc
            raise

    # -- event sources: every one only enqueues a key ------------------------------------------------

    async def _watch_jobs(self) -> None:
        async for _, obj in watch_forever(self.client, self.res, namespace=self.settings.namespace):
            m = obj["metadata"]
            self.queue.add((m["namespace"], m["name"]))

    async def _watch_children(self, res: Any) -> None:
        owned = selector({labels.OPERATOR_NAME: self.plugin.info.controller_name})
        async for _, obj in watch_forever(self.client, res, namespace=self.settings.namespace, labels=owned):
            m = obj["metadata"]
            for ref in m.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == self.plugin.info.kind:
                    self.queue.add((m["namespace"], ref["name"]))

    async def _watch_pod_groups(self) -> None:
        async for _, obj in watch_forever(self.client, self.pod_groups, namespace=self.settings.namespace):
            m = obj["metadata"]
            for ref in m.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == self.plugin.info.kind:
                    self.queue.add((m["namespace"], ref["name"]))

    async def _watch_hpas(self) -> None:
        async for event, obj in watch_forever(self.client, LkHpa, namespace=self.settings.namespace):
            m = obj["metadata"]
            for ref in m.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == self.plugin.info.kind:
                    key = (m["namespace"], ref["name"])
                    (self.hpa_owners.discard if event == "DELETED" else self.hpa_owners.add)(key)
                    self.queue.add(key)

    # -- the worker loop -----------------------------------------------------------------------------

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            started = time.monotonic()
            try:
                requeue = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.metrics.reconciled(self.plugin.info.controller_name, time.monotonic() - started, "error")
                delay = self.queue.add_rate_limited(key)
                log.warning(
                    "reconcile %s/%s failed (%s); retrying in %.2fs",
                    *key,
                    exc,
                    delay,
                    exc_info=not isinstance(exc, (ApiError, NotLeading)),
                )
            else:
                result = "success" if requeue is None else "requeue_after"
                self.metrics.reconciled(self.plugin.info.controller_name, time.monotonic() - started, result)
                self.queue.forget(key)
                if requeue is not None:
                    self.queue.add_after(key, requeue)
            finally:
                self.queue.done(key)

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        owner = f"{namespace}/{name}"
        try:
            raw = to_dict(await self.client.get(self.res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                self.ports.release(owner)
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
        sel = {labels.OPERATOR_NAME: self.plugin.info.controller_name, labels.JOB_NAME: name}
        pods = tuple(
            [
                Pod.model_validate(to_dict(p))
                async for p in self.client.list(LkPod, namespace=namespace, labels=selector(sel))
            ]
        )
        services = tuple(
            [
                Service.model_validate(to_dict(s))
                async for s in self.client.list(LkService, namespace=namespace, labels=selector(sel))
            ]
        )
        group, classes = await self._observe_gang(job)
        hpa = await self._observe_hpa(job, key)
        observed = Observed(job, pods, services, self.clock(), pod_group=group, priority_classes=classes, hpa=hpa)
        plan = reconcile(observed, self.plugin, self.settings.controller)
        await self.apply(raw, plan)
        return plan.requeue_after.total_seconds() if plan.requeue_after is not None else None

    async def _observe_gang(self, job: TrainingJob) -> tuple[PodGroup | None, dict[str, int]]:
        """The job's PodGroup, and PriorityClass values when its minResources must be computed."""
        if self.pod_groups is None:
            return None, {}
        try:
            group = PodGroup.model_validate(
                to_dict(await self.client.get(self.pod_groups, job.name, namespace=job.namespace))
            )
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            group = None
        classes: dict[str, int] = {}
        if gang.needs_priority_classes(job, self.settings.controller):
            async for pc in self.client.list(PriorityClass):
                if pc.metadata is not None and pc.metadata.name and pc.value is not None:
                    classes[pc.metadata.name] = pc.value
        return group, classes

    async def _observe_hpa(self, job: TrainingJob, key: Key) -> HorizontalPodAutoscaler | None:
        """The HPA named after the job, read only for jobs that ask for one or (per the watch) have one."""
        if not self.autoscaling or not (elastic.wants_hpa(job) or key in self.hpa_owners):
            return None
        try:
            return HorizontalPodAutoscaler.model_validate(
                to_dict(await self.client.get(LkHpa, job.name, namespace=job.namespace))
            )
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            return None

    # -- applying a plan -------------------------------------------------------------------------------

    async def apply(self, job: dict[str, Any], plan: Plan) -> None:
        """Ports, deletes, creates, then the one status write, then events. Exists/gone is success."""
        m = job["metadata"]
        namespace, name = m["namespace"], m["name"]
        if not self.may_write():
            raise NotLeading(f"not applying the plan of {namespace}/{name}: this replica no longer leads")
        events: list[tuple[str, str, str]] = []
        if plan.delete_job:
            await self._delete_job(job, plan)
            return
        if plan.allocate_ports:
            await self._record_ports(job, plan.allocate_ports)
        if plan.pod_group is not None:
            await self._create_or_replace(self.pod_groups, plan.pod_group)
        if plan.hpa is not None:
            await self._create_or_replace(LkHpa, plan.hpa)
        if plan.delete_hpa is not None:
            await self._delete_named(LkHpa, plan.delete_hpa, namespace)
        for ref in plan.delete:
            if await self._delete_named(_CHILD_RES[ref.kind], ref.name, namespace):
                events.append(("Normal", f"SuccessfulDelete{ref.kind}", f"Deleted {ref.kind.lower()}: {ref.name}"))
        if plan.delete_pod_group is not None:
            events += await self._delete_pod_group(job, plan.delete_pod_group, namespace)
        for obj in plan.create:
            kind = obj.kind or "Pod"
            try:
                await self.client.create(build(_CHILD_RES[kind], obj.to_dict()))
            except ApiError as exc:
                if is_status(exc, 409):
                    continue
                await self._emit(job, [("Warning", f"FailedCreate{kind}", f"Error creating: {exc}")])
                raise
            events.append(("Normal", f"SuccessfulCreate{kind}", f"Created {kind.lower()}: {obj.name}"))
        if plan.status is not None:
            status = plan.status.to_dict()
            for rtype in (job.get("status") or {}).get("replicaStatuses") or {}:
                status.setdefault("replicaStatuses", {}).setdefault(rtype, None)
            await self.client.patch(
                self.res.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
            )
            self.metrics.status_written(self.plugin.info.kind, namespace, job.get("status"), status)
        events += [(e.type.value, e.reason, e.message) for e in plan.events]
        await self._emit(job, events)

    async def _create_or_replace(self, res: Any, obj: PodGroup | HorizontalPodAutoscaler) -> None:
        """Create the object, or replace it as read (a newer version gets a conflict, and a retry)."""
        body = build(res, obj.to_dict())
        if obj.metadata.resource_version is None:
            try:
                await self.client.create(body)
            except ApiError as exc:
                if not is_status(exc, 409):  # already there: the next pass sees it
                    raise
        else:
            await self.client.replace(body)

    async def _delete_named(self, res: Any, name: str, namespace: str) -> bool:
        """Delete; False when it was already gone (that is success too)."""
        try:
            await self.client.delete(res, name, namespace=namespace)
        except ApiError as exc:
            if is_status(exc, 404):
                return False
            raise
        return True

    async def _delete_pod_group(self, job: dict[str, Any], name: str, namespace: str) -> list[tuple[str, str, str]]:
        try:
            deleted = await self._delete_named(self.pod_groups, name, namespace)
        except ApiError as exc:
            await self._emit(job, [("Warning", "FailedDeletePodGroup", f"Error deleting: {exc}")])
            raise
        if not deleted:
            return []
        return [
            ("Normal", "JobTerminated", "Job has been terminated. Deleting PodGroup"),
            ("Normal", "SuccessfulDeletePodGroup", f"Deleted PodGroup: {name}"),
        ]

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

    async def _emit(self, job: dict[str, Any], events: list[tuple[str, str, str]]) -> None:
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
