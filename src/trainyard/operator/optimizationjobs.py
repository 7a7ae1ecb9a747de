"""The OptimizationJob controller: keys in, ``controller.optimizationjob.reconcile``, plan applied. The I/O shell.

Informers cache the OptimizationJobs and the TrainJobs (the manager's shared TrainJob informer,
indexed by controller owner); their events only enqueue keys: an OptimizationJob its own, a
TrainJob its controlling OptimizationJob's. A worker reads the OptimizationJob and its trials
from those caches, never from the API server, asks the pure reconciler for a plan and applies it:
the trial TrainJobs created (controlled by the OptimizationJob, so deleting it deletes them;
"AlreadyExists" counts as done, the names being deterministic), then the one status merge-patch
guarded by the resourceVersion it was computed from, then events. A TrainJob the API refuses
(its template or a quota) leaves the status ``Created`` False ``TrainJobsCreationFailed`` with the
API's answer, and the pass is retried with backoff.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource

from trainyard.api import trainer
from trainyard.api.meta import Obj, format_time
from trainyard.client.events import reference
from trainyard.client.resources import is_status
from trainyard.controller.optimizationjob import (
    OptimizationJobObserved,
    OptimizationJobPlan,
    creation_failed,
    reconcile,
)
from trainyard.frameworks.base import ChildKind
from trainyard.kit.applier import Applier, owned_by
from trainyard.kit.informer import OWNER_INDEX, Caches, Informer, SharedInformers, controller_of
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.served import wait_served
from trainyard.kit.worker import Waiting, work
from trainyard.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)

Key = tuple[str, str]
KIND = trainer.OPTIMIZATIONJOB
NAME = trainer.OPTIMIZATIONJOB_CONTROLLER
TAKEN_RECHECK = 30.0
"""Seconds until a trial's name that another TrainJob holds is looked at again."""

CHILD_KINDS: tuple[ChildKind, ...] = (
    ChildKind(
        trainer.API_VERSION,
        trainer.TRAINJOB,
        trainer.TRAINJOBS,
        purpose="an OptimizationJob's trials (list and watch: their informer; create: each new trial)",
        verbs=("list", "watch", "create"),
    ),
)
"""What an OptimizationJob owns; its garbage collector deletes them with it (no delete asked)."""


class OptimizationJobController:
    def __init__(
        self,
        client: AsyncClient,
        *,
        namespace: str,
        workers: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: OperatorMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
        informers: SharedInformers | None = None,
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.workers = workers
        self.clock = clock
        self.metrics = metrics or OperatorMetrics()
        self.applier = Applier(client, component=NAME, clock=clock, may_write=may_write)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(NAME, lambda: len(self.queue), kind=KIND)
        self.res = create_namespaced_resource(trainer.GROUP, trainer.VERSION, KIND, trainer.OPTIMIZATIONJOBS)
        self.trainjob_res = create_namespaced_resource(
            trainer.GROUP, trainer.VERSION, trainer.TRAINJOB, trainer.TRAINJOBS
        )
        # What the controller reads between events, it reads from these caches, never the API server.
        self.optimizationjobs = Informer(client, self.res, self._on_optimizationjob, namespace=namespace)
        shared = informers if informers is not None else SharedInformers(client)
        self.trainjobs = shared.informer(
            self.trainjob_res, self._on_trainjob, namespace=namespace, indexers={OWNER_INDEX: controller_of}
        )
        self.caches = Caches(NAME)

    async def start(self, recheck: float = 30.0) -> None:
        """Wait until OptimizationJobs are served (a real cluster needs the CRD installed), then run
        once both caches have listed (a pass must not take a trial not yet listed for a missing one)."""
        await wait_served(self.client, self.res, KIND, self.namespace, recheck=recheck, install="its CRD (deploy/)")
        observe = self.metrics.observer(NAME)
        await self.caches.sync({trainer.OPTIMIZATIONJOBS: self.optimizationjobs, trainer.TRAINJOBS: self.trainjobs})
        await asyncio.gather(
            self.caches.run(),
            *(work(self.queue, self.reconcile, name=NAME, observe=observe) for _ in range(self.workers)),
        )

    # -- event sources: every one only enqueues a key ------------------------------------------------

    def _on_optimizationjob(self, _: str, obj: Obj) -> None:
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_trainjob(self, _: str, obj: Obj) -> None:
        """Enqueue the OptimizationJob controlling a TrainJob that changed."""
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == KIND and ref.get("apiVersion") == trainer.API_VERSION:
                self.queue.add((m["namespace"], ref["name"]))

    # -- the worker loop: reads from the caches ---------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        job = self.optimizationjobs.get(namespace, name)
        if job is None:
            self.metrics.forget_job(KIND, namespace, name)
            return None
        trials = tuple(self.trainjobs.by_index(OWNER_INDEX, f"{KIND}/{namespace}/{name}"))
        plan = reconcile(OptimizationJobObserved(optimizationjob=job, trainjobs=trials, now=self.clock()))
        await self.apply(job, plan)
        return None

    async def apply(self, job: Obj, plan: OptimizationJobPlan) -> None:
        """The trial TrainJobs created, then the one status write, then events."""
        m = job["metadata"]
        self.applier.fence(f"applying the plan of OptimizationJob {m['namespace']}/{m['name']}")
        events: list[Event] = []
        for trainjob in plan.create:
            body = owned_by(trainjob, job, trainer.API_VERSION, KIND)
            try:
                created = await self.applier.create(self.trainjob_res, body, self.trainjobs)
            except ApiError as exc:
                await self._creation_failed(job, trainjob["metadata"]["name"], exc, events)
                raise
            if created is not None:
                events.append(
                    Event.normal("SuccessfulCreateTrainJob", f"Created TrainJob: {created['metadata']['name']}")
                )
            elif (taken := self._taken(job, trainjob["metadata"]["name"])) is not None:
                await self._creation_failed(job, trainjob["metadata"]["name"], taken, events)
                raise Waiting(taken, TAKEN_RECHECK)  # its deletion is no event of ours: look again later
        if plan.status is not None:
            try:
                job = await self.applier.write_status(self.res, job, plan.status, self.optimizationjobs)
            except ApiError as exc:
                if is_status(exc, 409):
                    await self._emit(job, events)  # what this pass did happened; its verdict is recomputed
                raise
        self.metrics.observe_job(job, self.clock())
        await self._emit(job, [*events, *plan.events])

    def _taken(self, job: Obj, name: str) -> str | None:
        """Why an existing TrainJob of a trial's name is not that trial (someone else's), or None."""
        found = self.trainjobs.get(job["metadata"]["namespace"], name)
        if found is None:  # the cache has not seen it yet: our own, made by an earlier pass
            return None
        uid = job["metadata"]["uid"]
        if any(r.get("controller") and r.get("uid") == uid for r in found["metadata"].get("ownerReferences") or []):
            return None
        return f"a TrainJob named {name} exists and is not this OptimizationJob's trial: delete or rename it"

    async def _creation_failed(self, job: Obj, name: str, exc: ApiError | str, events: list[Event]) -> None:
        """``Created`` False with the API's answer, and a Warning; the pass is retried (with backoff)."""
        message = exc if isinstance(exc, str) else f"Error creating TrainJob {name}: {exc}"
        status = copy.deepcopy(job.get("status") or {})
        creation_failed(status, message, format_time(self.clock()))
        try:
            if status != (job.get("status") or {}):
                job = await self.applier.write_status(self.res, job, status, self.optimizationjobs)
        finally:
            await self._emit(job, [*events, Event.warning("FailedCreateTrainJob", message)])

    async def _emit(self, job: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(job, trainer.API_VERSION, KIND), events)
