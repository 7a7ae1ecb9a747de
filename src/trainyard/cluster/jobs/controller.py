"""The Job controller's I/O shell: watch Jobs and pods, sync one Job at a time, apply its plan.

It reaches the API server only through the client, as kube-controller-manager does: informers
(``trainyard.informer``'s reflector) keep caches of Jobs and pods, a Job is queued whenever it or
one of its pods changes, and ``decisions.sync`` decides. Every write's answer goes back into the
caches (newer resourceVersions only), so the next sync never works from an older view than its
own writes; a Job's pods just created are awaited before it is synced again (upstream's
expectations). Status is written with a resourceVersion precondition: a stale view gets a
conflict and a retry, never a double count. Pods whose Job is gone keep no tracking finalizer.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import CascadeType, PatchType

from trainyard.api.meta import format_time
from trainyard.client.events import record_event, reference
from trainyard.client.resources import build, is_status, plain_resource, to_dict
from trainyard.cluster.jobs import decisions
from trainyard.cluster.tasks import cancel_all
from trainyard.informer import Informer

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
JOB = plain_resource("batch", "v1", "Job", "jobs")
POD = plain_resource("", "v1", "Pod", "pods")
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0
EXPECTATION_SECONDS = 60.0  # how long created pods are awaited before syncing anyway
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
ORPHANS: Key = ("", "")
"""The queue key of the pass that releases pods whose Job is gone (no Job has an empty name)."""
UNFINALIZE = {"metadata": {"$deleteFromPrimitiveList/finalizers": [decisions.TRACKING_FINALIZER]}}


def _key(obj: Obj) -> Key:
    m = obj.get("metadata") or {}
    return m.get("namespace") or "", m.get("name") or ""


def _version(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def controller_of(pod: Obj) -> Obj | None:
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
        # The process's shared pod informer (its owner runs it), or one the controller runs itself.
        self._pods = pods if pods is not None else Informer(client, POD)
        self._own_pods = pods is None
        self._pods.handlers.append(self._on_pod)
        self.backoff = backoff or decisions.Backoff()
        self.clock = clock
        self.jobs: dict[Key, Obj] = {}
        self.pods: dict[Key, Obj] = {}
        self.owned: dict[str, set[Key]] = {}  # job uid -> its pods' keys
        self.expected: dict[str, tuple[set[Key], float]] = {}  # job uid -> pods created, not yet seen; since
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._orphans: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._timers: dict[Key, asyncio.TimerHandle] = {}
        self._jobs_synced = asyncio.Event()

    # -- caches ----------------------------------------------------------------------------------

    def _store_job(self, obj: Obj) -> None:
        key = _key(obj)
        if _version(obj) >= _version(self.jobs.get(key) or {}):
            self.jobs[key] = obj

    def _store_pod(self, obj: Obj) -> None:
        key = _key(obj)
        current = self.pods.get(key)
        if current is not None and _version(obj) < _version(current):
            return
        self._unindex(key)
        self.pods[key] = obj
        ref = controller_of(obj)
        if ref is not None:
            self.owned.setdefault(ref["uid"], set()).add(key)
            pending = self.expected.get(ref["uid"])
            if pending is not None:
                pending[0].discard(key)

    def _unindex(self, key: Key) -> None:
        old = self.pods.get(key)
        ref = controller_of(old) if old is not None else None
        if ref is not None:
            self.owned.get(ref["uid"], set()).discard(key)

    def _on_job(self, kind: str, obj: Obj) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self.jobs.pop(key, None)
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            for pod_key in self.owned.get(uid, set()):
                self._orphans.add(pod_key)
                self.enqueue(ORPHANS)
        else:
            self._store_job(obj)
        self.enqueue(key)

    def _on_pod(self, kind: str, obj: Obj) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self._unindex(key)
            self.pods.pop(key, None)
        else:
            self._store_pod(obj)
        ref = controller_of(obj)
        if ref is not None:
            self.enqueue((key[0], ref["name"]))
        if kind != "DELETED" and decisions.tracked(obj):
            job = self.jobs.get((key[0], ref["name"])) if ref is not None else None
            if job is None or job["metadata"].get("uid") != (ref or {}).get("uid"):
                self._orphans.add(key)
                self.enqueue(ORPHANS)

    # -- queue -----------------------------------------------------------------------------------

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def enqueue_after(self, key: Key, seconds: float) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            if timer.when() <= asyncio.get_running_loop().time() + seconds:
                self._timers[key] = timer
                return
            timer.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(seconds, self._fire, key)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    async def run(self) -> None:
        informers = [Informer(self.client, JOB, self._on_job), *([self._pods] if self._own_pods else [])]
        tasks = [asyncio.create_task(i.run(), name=f"job-informer-{i.res.__name__}") for i in informers]
        try:
            for informer in (*informers, self._pods):
                await informer.synced.wait()
            self._jobs_synced.set()
            while True:
                key = await self._queue.get()
                self._queued.discard(key)
                await self._process(key)
        finally:
            await cancel_all(tasks)
            for timer in self._timers.values():
                timer.cancel()

    async def _process(self, key: Key) -> None:
        try:
            if key == ORPHANS:
                await self._release_orphans()
            else:
                await self.sync(key)
            self._failures.pop(key, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            count = self._failures[key] = self._failures.get(key, 0) + 1
            delay = min(RETRY_SECONDS * 2 ** (count - 1), MAX_RETRY_SECONDS)
            conflict = isinstance(exc, ApiError) and (is_status(exc, 409) or is_status(exc, 422))
            if not conflict:
                log.warning("syncing job %s/%s failed (%s); retrying in %.0fs", *key, exc, delay)
            self.enqueue_after(key, 0.05 if conflict and count < 5 else delay)

    # -- syncing ---------------------------------------------------------------------------------

    async def sync(self, key: Key) -> None:
        job = self.jobs.get(key)
        if job is None:
            return
        uid = job["metadata"]["uid"]
        pending = self.expected.get(uid)
        loop_now = asyncio.get_running_loop().time()
        if pending is not None:
            if pending[0] and loop_now - pending[1] < EXPECTATION_SECONDS:
                return  # the pods it created are not in the cache yet: their arrival queues the Job again
            del self.expected[uid]
        pods = [self.pods[k] for k in sorted(self.owned.get(uid, set())) if k in self.pods]
        plan = decisions.sync(job, pods, self.clock(), self.backoff)
        await self._apply(job, plan)

    async def _apply(self, job: Obj, plan: decisions.Plan) -> None:
        namespace, name = _key(job)
        for pod_name in plan.release:
            await self._unfinalize(namespace, pod_name)
        for pod_name in [*plan.release, *plan.delete]:
            with contextlib.suppress(ApiError):
                await self.client.delete(POD, pod_name, namespace=namespace)
                await self._event(job, "Normal", "SuccessfulDelete", f"Deleted pod: {pod_name}")
        if plan.create_indexes:
            await self._create(job, plan.create_indexes)
        elif plan.create:
            await self._create(job, [None] * plan.create)
        if plan.status is not None:
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": job["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/status", "value": plan.status},
            ]
            written = await self.client.patch(JOB.Status, name, patch, namespace=namespace, patch_type=PatchType.JSON)
            self._store_job(to_dict(written))
        for pod_name in plan.unfinalize:
            await self._unfinalize(namespace, pod_name)
        for event in plan.events:
            await self._event(job, event.type, event.reason, event.message)
        if plan.delete_job:
            with contextlib.suppress(ApiError):
                # As the TTL-after-finished controller: foreground, so the pods go before the Job.
                await self.client.delete(JOB, name, namespace=namespace, cascade=CascadeType.FOREGROUND)
        if plan.requeue_after is not None:
            self.enqueue_after((namespace, name), plan.requeue_after)

    async def _create(self, job: Obj, indexes: Sequence[int | None]) -> None:
        uid = job["metadata"]["uid"]
        created: set[Key] = set()
        self.expected[uid] = (created, asyncio.get_running_loop().time())
        for index in indexes:
            pod = to_dict(await self.client.create(build(POD, pod_for(job, index))))
            key = _key(pod)
            created.add(key)
            self._store_pod(pod)  # seen at once: the informer's copy is the same or newer
            await self._event(job, "Normal", "SuccessfulCreate", f"Created pod: {key[1]}")

    async def _unfinalize(self, namespace: str, name: str) -> None:
        try:
            patched = await self.client.patch(
                POD, name, UNFINALIZE, namespace=namespace, patch_type=PatchType.STRATEGIC
            )
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            return
        self._store_pod(to_dict(patched))

    async def _release_orphans(self) -> None:
        """Drop the tracking finalizer of pods whose Job is gone (upstream's orphan worker)."""
        await self._jobs_synced.wait()
        orphans, self._orphans = self._orphans, set()
        for key in orphans:
            pod = self.pods.get(key)
            if pod is None or not decisions.tracked(pod):
                continue
            ref = controller_of(pod)
            job = self.jobs.get((key[0], ref["name"])) if ref is not None else None
            if ref is not None and job is not None and job["metadata"].get("uid") == ref["uid"]:
                continue  # adopted meanwhile, or the Job's cache entry arrived late
            if ref is not None and await self._job_exists(key[0], ref):
                continue
            await self._unfinalize(*key)

    async def _job_exists(self, namespace: str, ref: Obj) -> bool:
        try:
            found = to_dict(await self.client.get(JOB, ref["name"], namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                return False
            raise
        return bool((found.get("metadata") or {}).get("uid") == ref["uid"])

    async def _event(self, job: Obj, type_: str, reason: str, message: str) -> None:
        involved = reference(job, "batch/v1", "Job")
        now = format_time(self.clock())
        await record_event(
            self.client, involved, type_=type_, reason=reason, message=message, component=decisions.COMPONENT, now=now
        )
