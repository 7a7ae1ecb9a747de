"""The JobSet controller's I/O shell: watch JobSets, Jobs and Services, sync one JobSet at a time, apply its plan.

It reaches the API server only through the client, as JobSet's controller manager does:
informers keep caches of JobSets, Jobs and Services; a JobSet is queued whenever it or one of
its Jobs changes, and ``decisions.sync`` decides. Child names are deterministic, so a create that
finds the object already there (a stale cache) counts as done. Status is written with a
resourceVersion precondition: a stale view gets a conflict and a retry. Resuming a Job whose pod
template changes (the JobSet's scheduling directives) first clears its ``status.startTime``, as
upstream does, since only a Job that never started may change its template.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import CascadeType, PatchType

from trainyard.api import jobset as api
from trainyard.api.meta import format_time
from trainyard.client.events import record_event, reference
from trainyard.client.resources import build, is_status, plain_resource, to_dict
from trainyard.cluster.jobsets import decisions
from trainyard.cluster.tasks import cancel_all
from trainyard.informer import Informer

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
JOBSET = plain_resource(api.GROUP, api.VERSION, api.KIND, api.PLURAL)
JOB = plain_resource("batch", "v1", "Job", "jobs")
SERVICE = plain_resource("", "v1", "Service", "services")
RETRY_SECONDS = 1.0
MAX_RETRY_SECONDS = 60.0


def _key(obj: Obj) -> Key:
    m = obj.get("metadata") or {}
    return m.get("namespace") or "", m.get("name") or ""


def _version(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0


def controller_of(obj: Obj) -> Obj | None:
    """The object's controlling JobSet reference, if a JobSet controls it."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == api.KIND and ref.get("apiVersion") == api.API_VERSION:
            return dict(ref)
    return None


class JobSetController:
    def __init__(self, client: AsyncClient, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.clock = clock
        self.jobsets: dict[Key, Obj] = {}
        self.jobs: dict[Key, Obj] = {}
        self.services: dict[Key, Obj] = {}
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._timers: dict[Key, asyncio.TimerHandle] = {}

    # -- caches ----------------------------------------------------------------------------------

    @staticmethod
    def _store(cache: dict[Key, Obj], obj: Obj) -> None:
        key = _key(obj)
        if _version(obj) >= _version(cache.get(key) or {}):
            cache[key] = obj

    def _on_jobset(self, kind: str, obj: Obj) -> None:
        if kind == "DELETED":
            self.jobsets.pop(_key(obj), None)
        else:
            self._store(self.jobsets, obj)
        self.enqueue(_key(obj))

    def _on_child(self, cache: dict[Key, Obj]) -> Callable[[str, Obj], None]:
        def handle(kind: str, obj: Obj) -> None:
            if kind == "DELETED":
                cache.pop(_key(obj), None)
            else:
                self._store(cache, obj)
            ref = controller_of(obj)
            if ref is not None:
                self.enqueue((_key(obj)[0], ref["name"]))

        return handle

    # -- queue -----------------------------------------------------------------------------------

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    def enqueue_after(self, key: Key, seconds: float) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._timers[key] = asyncio.get_running_loop().call_later(max(seconds, 0.0), self._fire, key)

    def _fire(self, key: Key) -> None:
        self._timers.pop(key, None)
        self.enqueue(key)

    async def run(self) -> None:
        informers = [
            Informer(self.client, JOBSET, self._on_jobset),
            Informer(self.client, JOB, self._on_child(self.jobs)),
            Informer(self.client, SERVICE, self._on_child(self.services)),
        ]
        tasks = [asyncio.create_task(i.run(), name=f"jobset-informer-{i.res.__name__}") for i in informers]
        try:
            for informer in informers:
                await informer.synced.wait()
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
            await self.sync(key)
            self._failures.pop(key, None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            count = self._failures[key] = self._failures.get(key, 0) + 1
            delay = min(RETRY_SECONDS * 2 ** (count - 1), MAX_RETRY_SECONDS)
            conflict = isinstance(exc, ApiError) and is_status(exc, 409)
            if not conflict:
                log.warning("syncing jobset %s/%s failed (%s); retrying in %.0fs", *key, exc, delay)
            self.enqueue_after(key, 0.05 if conflict and count < 5 else delay)

    # -- syncing ---------------------------------------------------------------------------------

    def _owned(self, cache: dict[Key, Obj], uid: str) -> list[Obj]:
        return [o for _, o in sorted(cache.items()) if (controller_of(o) or {}).get("uid") == uid]

    async def sync(self, key: Key) -> None:
        jobset = self.jobsets.get(key)
        if jobset is None:
            return
        uid = jobset["metadata"]["uid"]
        service = self.services.get((key[0], api.subdomain(jobset)))
        plan = decisions.sync(jobset, self._owned(self.jobs, uid), self.clock(), service_exists=service is not None)
        await self._apply(jobset, plan)

    async def _apply(self, jobset: Obj, plan: decisions.Plan) -> None:
        namespace, name = _key(jobset)
        for job_name in plan.delete:
            with contextlib.suppress(ApiError):
                # Foreground, as upstream: a replacement of the same name waits until the pods are gone.
                await self.client.delete(JOB, job_name, namespace=namespace, cascade=CascadeType.FOREGROUND)
        if plan.service is not None:
            await self._create(SERVICE, plan.service, self.services)
        for job in plan.create:
            await self._create(JOB, job, self.jobs)
        for job_name, suspend in plan.suspend.items():
            spec: Obj = {"suspend": suspend}
            template = plan.templates.get(job_name)
            if template:
                await self._forget_start(namespace, job_name)
                spec["template"] = template
            patch = {"spec": spec}
            patched = await self.client.patch(JOB, job_name, patch, namespace=namespace, patch_type=PatchType.MERGE)
            self._store(self.jobs, to_dict(patched))
        if plan.status is not None:
            ops = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": jobset["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/status", "value": plan.status},
            ]
            written = await self.client.patch(JOBSET.Status, name, ops, namespace=namespace, patch_type=PatchType.JSON)
            self._store(self.jobsets, to_dict(written))
        for event in plan.events:
            await self._event(jobset, event.type, event.reason, event.message)
        if plan.delete_jobset:
            with contextlib.suppress(ApiError):
                await self.client.delete(JOBSET, name, namespace=namespace, cascade=CascadeType.FOREGROUND)
        if plan.requeue_after is not None:
            self.enqueue_after((namespace, name), plan.requeue_after)

    async def _forget_start(self, namespace: str, job_name: str) -> None:
        """A Job that has started may not change its template: clear ``status.startTime`` first, as upstream."""
        job = self.jobs.get((namespace, job_name)) or {}
        if not (job.get("status") or {}).get("startTime"):
            return
        patch = {"status": {"startTime": None}}
        patched = await self.client.patch(JOB.Status, job_name, patch, namespace=namespace, patch_type=PatchType.MERGE)
        self._store(self.jobs, to_dict(patched))

    async def _create(self, res: Any, body: Obj, cache: dict[Key, Obj]) -> None:
        try:
            created = to_dict(await self.client.create(build(res, body)))
        except ApiError as exc:
            if is_status(exc, 409):
                return  # deterministic names: it is there already, our cache is behind
            raise
        self._store(cache, created)

    async def _event(self, jobset: Obj, type_: str, reason: str, message: str) -> None:
        involved = reference(jobset, api.API_VERSION, api.KIND)
        now = format_time(self.clock())
        await record_event(
            self.client, involved, type_=type_, reason=reason, message=message, component=decisions.COMPONENT, now=now
        )
