"""The TrainingJob controller: keys in, ``controller.trainingjob.reconcile``, plan applied. The I/O shell.

Informers (``trainyard.kit.informer``) cache the TrainingJobs and the PyTorchJobs, TFJobs and JAXJobs
they may own; their events only enqueue keys: a TrainingJob its own, an owned job its controlling
TrainingJob's (``ownerReferences``). A worker reads the TrainingJob and its owned job (named like
it, of the kind its framework compiles to) from those caches, never from the API server, asks the
pure reconciler for a plan and applies it: the owned job created (or replaced as read, for
``suspend``), the one status merge-patch, then events. "AlreadyExists" on create counts as done.
Every write's answer goes back into its cache, and the status write carries the TrainingJob's
resourceVersion, so a cache that lags cannot land a status computed from an older TrainingJob.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource

from trainyard.api import trainingjob as tj
from trainyard.api.kinds import KINDS
from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import is_status
from trainyard.controller.trainingjob import TrainingJobObserved, TrainingJobPlan, reconcile
from trainyard.frameworks.base import ChildKind
from trainyard.frameworks.trainingjob import job_kind
from trainyard.kit.applier import Applier, owned_by
from trainyard.kit.informer import Caches, Informer, SharedInformers
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.served import wait_served
from trainyard.kit.worker import work
from trainyard.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)

Key = tuple[str, str]

CHILD_KINDS: tuple[ChildKind, ...] = tuple(
    ChildKind(
        KINDS[kind].api_version,
        kind,
        KINDS[kind].plural,
        purpose="the kubeflow.org/v1 job a TrainingJob compiles to",
        verbs=("list", "watch", "create", "update"),
    )
    for kind in dict.fromkeys(tj.FRAMEWORK_KINDS.values())
)
"""Every kind a TrainingJob may own (``deploy/``'s RBAC grants what the controller asks of each)."""


class TrainingJobController:
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
        self.applier = Applier(client, component=tj.CONTROLLER_NAME, clock=clock, may_write=may_write)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(tj.CONTROLLER_NAME, lambda: len(self.queue), kind=tj.KIND)
        self.res = create_namespaced_resource(tj.GROUP, tj.VERSION, tj.KIND, tj.PLURAL)
        self.jobs = {
            k.kind: create_namespaced_resource(k.group, k.api_version.rpartition("/")[2], k.kind, k.plural)
            for k in CHILD_KINDS
        }
        # What the controller reads between events, it reads from these caches, never the API server.
        self.trainingjobs = Informer(client, self.res, self._on_trainingjob, namespace=namespace)
        shared = informers if informers is not None else SharedInformers(client)
        self.child_caches = {
            kind: shared.informer(res, self._on_job, namespace=namespace) for kind, res in self.jobs.items()
        }
        self.caches = Caches(tj.CONTROLLER_NAME)

    async def start(self, recheck: float = 30.0) -> None:
        """Wait until TrainingJobs are served (a real cluster needs the CRD installed), then run once
        every cache has listed (a pass must not take an owned job not yet listed for a missing one)."""
        await wait_served(self.client, self.res, tj.KIND, self.namespace, recheck=recheck, install="its CRD (deploy/)")
        name, observe = tj.CONTROLLER_NAME, self.metrics.observer(tj.CONTROLLER_NAME)
        await self.caches.sync(
            {tj.PLURAL: self.trainingjobs, **{k.plural: self.child_caches[k.kind] for k in CHILD_KINDS}}
        )
        await asyncio.gather(
            self.caches.run(),
            *(work(self.queue, self.reconcile, name=name, observe=observe) for _ in range(self.workers)),
        )

    # -- event sources: every one only enqueues a key ------------------------------------------------

    def _on_trainingjob(self, _: str, obj: Obj) -> None:
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_job(self, _: str, obj: Obj) -> None:
        """Enqueue the TrainingJob controlling an owned job that changed."""
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == tj.KIND and ref.get("apiVersion") == tj.API_VERSION:
                self.queue.add((m["namespace"], ref["name"]))

    # -- the worker loop: reads from the caches ---------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        tjob = self.trainingjobs.get(namespace, name)
        if tjob is None:
            self.metrics.forget_job(tj.KIND, namespace, name)
            return None
        kind = job_kind(tjob)
        job = self.child_caches[kind].get(namespace, name)
        if job is not None:
            job = {"apiVersion": KINDS[kind].api_version, "kind": kind, **job}
            if not any(r.get("uid") == tjob["metadata"]["uid"] for r in job["metadata"].get("ownerReferences") or []):
                job = None  # someone else's job of that name: never adopted, never overwritten
        plan = reconcile(TrainingJobObserved(trainingjob=tjob, job=job, now=self.clock()))
        await self.apply(tjob, plan)
        return None

    async def apply(self, tjob: Obj, plan: TrainingJobPlan) -> None:
        """The owned job written, then the one status write, then events."""
        m = tjob["metadata"]
        self.applier.fence(f"applying the plan of TrainingJob {m['namespace']}/{m['name']}")
        events: list[Event] = []
        for obj in plan.apply:
            events += await self._write(tjob, obj)
        if plan.status is not None:
            try:
                tjob = await self.applier.write_status(self.res, tjob, plan.status, self.trainingjobs)
            except ApiError as exc:
                if is_status(exc, 409):
                    await self._emit(tjob, events)  # what this pass did happened; its verdict is recomputed
                raise
        self.metrics.observe_job(tjob, self.clock())
        await self._emit(tjob, [*events, *plan.events])

    async def _write(self, tjob: Obj, obj: Obj) -> list[Event]:
        name = tjob["metadata"]["name"]
        kind = obj["kind"]
        body = owned_by(obj, tjob, tj.API_VERSION, tj.KIND)
        res = self.jobs[kind]
        if obj["metadata"].get("resourceVersion"):
            # replaced as read: a newer version gets a conflict, and the pass runs again on it
            await self.applier.replace(res, body, self.child_caches[kind])
            return []
        try:
            created = await self.applier.create(res, body, self.child_caches[kind])
        except ApiError as exc:
            await self._emit(tjob, [Event.warning(f"FailedCreate{kind}", f"Error creating {kind} {name}: {exc}")])
            raise
        return [Event.normal(f"SuccessfulCreate{kind}", f"Created {kind}: {name}")] if created else []

    async def _emit(self, tjob: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(tjob, tj.API_VERSION, tj.KIND), events)
