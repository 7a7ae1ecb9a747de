"""The Job controller's I/O shell: watch Jobs and pods, reconcile one Job at a time, apply its plan.

It reaches the API server only through the client, as kube-controller-manager does, and stands on
the controller kit (``trainyard.kit``): informers keep the Jobs and the pods (filed by their
controlling Job), a Job is queued whenever it or one of its pods changes, ``decisions.reconcile``
decides, and the applier writes: every write's answer goes back into its cache, so the next pass
never works from an older view than its own writes. Status is written whole, with a
resourceVersion precondition: a stale view gets a conflict and a retry, never a double count.
Pods whose Job is gone keep no tracking finalizer. A pod the server refuses (a ResourceQuota's
403) is told on the Job as ``FailedCreate`` with the server's words and retried with backoff.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import plain_resource
from trainyard.cluster.clients.jobs import decisions
from trainyard.cluster.tasks import cancel_all
from trainyard.kit.applier import Applier
from trainyard.kit.informer import OWNER_INDEX, Caches, Informer, controller_of, key_of
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

Key = tuple[str, str]
JOB = plain_resource("batch", "v1", "Job", "jobs")
POD = plain_resource("", "v1", "Pod", "pods")
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
ORPHANS: Key = ("", "")
"""The queue key of the pass that releases pods whose Job is gone (no Job has an empty name)."""
UNFINALIZE = {"metadata": {"$deleteFromPrimitiveList/finalizers": [decisions.TRACKING_FINALIZER]}}


def job_of(pod: Obj) -> Obj | None:
    """The pod's controlling Job reference, if a batch/v1 Job controls it."""
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job" and ref.get("apiVersion") == "batch/v1":
            return dict(ref)
    return None


def pod_for(job: Obj, index: int | None = None) -> Obj:
    """A new pod of ``job``: its template, ``generateName: <job>-``, the tracking finalizer, a controller ref.

    With a completion ``index`` (Indexed Jobs), as upstream: ``generateName: <job>-<index>-``, the
    index as annotation and label ``batch.kubernetes.io/job-completion-index``, ``hostname``
    ``<job>-<index>`` and ``JOB_COMPLETION_INDEX`` in every container's env (from the annotation).
    """
    m = job["metadata"]
    template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
    tmeta = template.get("metadata") or {}
    meta: Obj = {
        "generateName": f"{m['name']}-" if index is None else f"{m['name']}-{index}-",
        "namespace": m["namespace"],
        "finalizers": [decisions.TRACKING_FINALIZER],
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": m["name"],
                "uid": m["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    for field in ("labels", "annotations"):
        if tmeta.get(field):
            meta[field] = dict(tmeta[field])
    spec: Obj = template.get("spec") or {}
    if index is not None:
        for field in ("labels", "annotations"):
            meta.setdefault(field, {})[decisions.COMPLETION_INDEX] = str(index)
        spec["hostname"] = f"{m['name']}-{index}"
        from_annotation = {"fieldRef": {"fieldPath": f"metadata.annotations['{decisions.COMPLETION_INDEX}']"}}
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            env = [e for e in container.get("env") or [] if e.get("name") != COMPLETION_INDEX_ENV]
            container["env"] = [{"name": COMPLETION_INDEX_ENV, "valueFrom": from_annotation}, *env]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class JobController:
    def __init__(
        self,
        client: AsyncClient,
        *,
        backoff: decisions.Backoff | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        pods: Informer | None = None,
    ) -> None:
        self.client = client
        self.backoff = backoff or decisions.Backoff()
        self.clock = clock
        self.applier = Applier(client, component=decisions.COMPONENT, clock=clock)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.jobs = Informer(client, JOB, self._on_job)
        # The process's shared pod informer (its owner runs it), or one the controller runs itself.
        self.pods = pods if pods is not None else Informer(client, POD)
        self._own_pods = pods is None
        self.pods.add_indexers({OWNER_INDEX: controller_of})
        self.pods.handlers.append(self._on_pod)
        self._orphans: set[Key] = set()
        self.caches = Caches(decisions.COMPONENT)

    # -- event sources: every one only enqueues keys ----------------------------------------------

    def _on_job(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            for pod in self.pods.by_index(OWNER_INDEX, f"Job/{key_of(obj)[0]}/{key_of(obj)[1]}"):
                self._orphans.add(key_of(pod))
                self.queue.add(ORPHANS)
        self.queue.add(key_of(obj))

    def _on_pod(self, kind: str, obj: Obj) -> None:
        namespace = key_of(obj)[0]
        ref = job_of(obj)
        if ref is not None:
            self.queue.add((namespace, ref["name"]))
        if kind != "DELETED" and decisions.tracked(obj) and not self._controlled(obj, ref):
            self._orphans.add(key_of(obj))
            self.queue.add(ORPHANS)

    def _controlled(self, pod: Obj, ref: Obj | None) -> bool:
        """Whether the Job that ``ref`` names is in the cache, as that incarnation."""
        job = self.jobs.get(key_of(pod)[0], ref["name"]) if ref is not None else None
        return job is not None and ref is not None and job["metadata"].get("uid") == ref.get("uid")

    # -- the worker --------------------------------------------------------------------------------

    async def run(self) -> None:
        informers = {"jobs": self.jobs, **({"pods": self.pods} if self._own_pods else {})}
        await self.caches.sync(informers)
        await self.pods.synced.wait()
        try:
            await work(self.queue, self._pass, name=decisions.COMPONENT)
        finally:
            self.queue.close()
            await cancel_all(list(self.caches.tasks.values()))

    async def _pass(self, key: Key) -> float | None:
        if key == ORPHANS:
            await self._release_orphans()
            return None
        return await self.reconcile(key)

    async def reconcile(self, key: Key) -> float | None:
        job = self.jobs.get(*key)
        if job is None:
            return None
        uid = job["metadata"]["uid"]
        owned = self.pods.by_index(OWNER_INDEX, f"Job/{key[0]}/{key[1]}")
        pods = sorted((p for p in owned if (job_of(p) or {}).get("uid") == uid), key=lambda p: p["metadata"]["name"])
        plan = decisions.reconcile(job, pods, self.clock(), self.backoff)
        await self._apply(job, plan)
        return plan.requeue_after

    async def _apply(self, job: Obj, plan: decisions.Plan) -> None:
        namespace, name = key_of(job)
        for pod_name in plan.release:
            await self._unfinalize(namespace, pod_name)
        for pod_name in [*plan.release, *plan.delete]:
            if await self.applier.delete(POD, pod_name, namespace=namespace, cache=self.pods) is not None:
                await self._emit(job, [Event.normal("SuccessfulDelete", f"Deleted pod: {pod_name}")])
        if plan.create_indexes:
            await self._create(job, plan.create_indexes)
        elif plan.create:
            await self._create(job, [None] * plan.create)
        if plan.status is not None:
            job = await self.applier.write_status(JOB, job, plan.status, self.jobs, whole=True)
        for pod_name in plan.unfinalize:
            await self._unfinalize(namespace, pod_name)
        await self._emit(job, plan.events)
        if plan.delete_job:
            # As the TTL-after-finished controller: foreground, so the pods go before the Job.
            await self.applier.delete(JOB, name, namespace=namespace, cache=self.jobs, propagation="Foreground")

    async def _create(self, job: Obj, indexes: Sequence[int | None]) -> None:
        for index in indexes:
            try:
                pod = await self.applier.create(POD, pod_for(job, index), self.pods)
            except ApiError as exc:
                # As kube's pod control: told on the Job, then retried with the queue's backoff
                # (a ResourceQuota's 403 passes once the namespace's usage falls).
                await self._emit(job, [Event.warning("FailedCreate", f"Error creating: {exc}")])
                raise
            if pod is not None:
                await self._emit(job, [Event.normal("SuccessfulCreate", f"Created pod: {pod['metadata']['name']}")])

    async def _unfinalize(self, namespace: str, name: str) -> None:
        await self.applier.patch(
            POD, name, UNFINALIZE, namespace=namespace, cache=self.pods, patch_type=PatchType.STRATEGIC
        )

    async def _release_orphans(self) -> None:
        """Drop the tracking finalizer of pods whose Job is gone (upstream's orphan worker)."""
        orphans, self._orphans = self._orphans, set()
        for key in orphans:
            pod = self.pods.get(*key)
            if pod is None or not decisions.tracked(pod):
                continue
            ref = job_of(pod)
            if self._controlled(pod, ref):
                continue  # adopted meanwhile, or the Job's cache entry arrived late
            if ref is not None and await self._job_exists(key[0], ref):
                continue
            await self._unfinalize(*key)

    async def _job_exists(self, namespace: str, ref: Obj) -> bool:
        found = await self.applier.get(JOB, ref["name"], namespace=namespace)
        return found is not None and (found.get("metadata") or {}).get("uid") == ref["uid"]

    async def _emit(self, job: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(job, "batch/v1", "Job"), events)
