"""The JobSet controller's I/O shell: watch JobSets, Jobs and Services, reconcile one JobSet at a time, apply its plan.

It reaches the API server only through the client, as JobSet's controller manager does, and stands
on the controller kit (``trainyard.kit``): informers keep the JobSets and their Jobs and Services
(filed by their controlling JobSet); a JobSet is queued whenever it or one of its Jobs changes, and
``decisions.reconcile`` decides. Child names are deterministic, so a create that finds the object
already there (a stale cache) counts as done. Status is written whole, with a resourceVersion
precondition: a stale view gets a conflict and a retry. Resuming a Job whose pod template changes
(the JobSet's scheduling directives) first clears its ``status.startTime``, as upstream does,
since only a Job that never started may change its template.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.api import jobset as api
from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import plain_resource
from trainyard.cluster.clients.jobsets import decisions
from trainyard.cluster.tasks import cancel_all
from trainyard.kit.applier import Applier
from trainyard.kit.informer import OWNER_INDEX, Caches, Informer, controller_of, key_of
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

Key = tuple[str, str]
JOBSET = plain_resource(api.GROUP, api.VERSION, api.KIND, api.PLURAL)
JOB = plain_resource("batch", "v1", "Job", "jobs")
SERVICE = plain_resource("", "v1", "Service", "services")


def jobset_of(obj: Obj) -> Obj | None:
    """The object's controlling JobSet reference, if a JobSet controls it."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == api.KIND and ref.get("apiVersion") == api.API_VERSION:
            return dict(ref)
    return None


class JobSetController:
    def __init__(self, client: AsyncClient, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.clock = clock
        self.applier = Applier(client, component=decisions.COMPONENT, clock=clock)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.jobsets = Informer(client, JOBSET, self._on_jobset)
        self.jobs = Informer(client, JOB, self._on_child, indexers={OWNER_INDEX: controller_of})
        self.services = Informer(client, SERVICE, self._on_child)
        self.caches = Caches(decisions.COMPONENT)

    # -- event sources: every one only enqueues a key ---------------------------------------------

    def _on_jobset(self, _: str, obj: Obj) -> None:
        self.queue.add(key_of(obj))

    def _on_child(self, _: str, obj: Obj) -> None:
        ref = jobset_of(obj)
        if ref is not None:
            self.queue.add((key_of(obj)[0], ref["name"]))

    # -- the worker --------------------------------------------------------------------------------

    async def run(self) -> None:
        await self.caches.sync({"jobsets": self.jobsets, "jobs": self.jobs, "services": self.services})
        try:
            await work(self.queue, self.reconcile, name=decisions.COMPONENT)
        finally:
            self.queue.close()
            await cancel_all(list(self.caches.tasks.values()))

    async def reconcile(self, key: Key) -> float | None:
        jobset = self.jobsets.get(*key)
        if jobset is None:
            return None
        uid = jobset["metadata"]["uid"]
        owned = self.jobs.by_index(OWNER_INDEX, f"{api.KIND}/{key[0]}/{key[1]}")
        jobs = sorted((j for j in owned if (jobset_of(j) or {}).get("uid") == uid), key=key_of)
        service = self.services.get(key[0], api.subdomain(jobset))
        plan = decisions.reconcile(jobset, jobs, self.clock(), service_exists=service is not None)
        await self._apply(jobset, plan)
        return plan.requeue_after

    async def _apply(self, jobset: Obj, plan: decisions.Plan) -> None:
        namespace, name = key_of(jobset)
        for job_name in plan.delete:
            # Foreground, as upstream: a replacement of the same name waits until the pods are gone.
            await self.applier.delete(JOB, job_name, namespace=namespace, cache=self.jobs, propagation="Foreground")
        if plan.service is not None:
            await self.applier.create(SERVICE, plan.service, self.services)
        for job in plan.create:
            await self.applier.create(JOB, job, self.jobs)
        for job_name, suspend in plan.suspend.items():
            spec: Obj = {"suspend": suspend}
            template = plan.templates.get(job_name)
            if template:
                await self._forget_start(namespace, job_name)
                spec["template"] = template
            await self.applier.patch(JOB, job_name, {"spec": spec}, namespace=namespace, cache=self.jobs)
        if plan.status is not None:
            jobset = await self.applier.write_status(JOBSET, jobset, plan.status, self.jobsets, whole=True)
        await self._emit(jobset, plan.events)
        if plan.delete_jobset:
            await self.applier.delete(JOBSET, name, namespace=namespace, cache=self.jobsets, propagation="Foreground")

    async def _forget_start(self, namespace: str, job_name: str) -> None:
        """A Job that has started may not change its template: clear ``status.startTime`` first, as upstream."""
        job = self.jobs.get(namespace, job_name) or {}
        if not (job.get("status") or {}).get("startTime"):
            return
        patch = {"status": {"startTime": None}}
        await self.applier.patch(JOB.Status, job_name, patch, namespace=namespace, cache=self.jobs)

    async def _emit(self, jobset: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(jobset, api.API_VERSION, api.KIND), events)
