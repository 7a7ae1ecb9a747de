"""The TrainingJob controller: keys in, ``controller.trainingjob.reconcile``, plan applied. The I/O shell.

Watches only enqueue keys: TrainingJobs their own; the PyTorchJobs, TFJobs and JAXJobs a
TrainingJob controls (``ownerReferences``) their owner's. A worker re-reads the TrainingJob and
its owned job (named like it, of the kind its framework compiles to), asks the pure reconciler for
a plan and applies it: the owned job created (or replaced as read, for ``suspend``), the one
status merge-patch, then events. "AlreadyExists" on create counts as done.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.generic_resource import create_namespaced_resource
from lightkube.types import PatchType

from trainyard.api import trainingjob as tj
from trainyard.api.kinds import KINDS
from trainyard.api.meta import format_time
from trainyard.client import build, is_status, record_events, reference, to_dict, watch_forever
from trainyard.controller.trainingjob import TrainingJobObserved, TrainingJobPlan, reconcile
from trainyard.frameworks.base import OwnedKind
from trainyard.frameworks.trainingjob import owned_kind
from trainyard.operator.controller import NotLeading, work
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.workqueue import WorkQueue

log = logging.getLogger(__name__)

Key = tuple[str, str]

OWNED: tuple[OwnedKind, ...] = tuple(
    OwnedKind(
        KINDS[kind].api_version,
        kind,
        KINDS[kind].plural,
        purpose="the kubeflow.org/v1 job a TrainingJob compiles to",
        verbs=("get", "watch", "create", "update"),
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
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.workers = workers
        self.clock = clock
        self.metrics = metrics or OperatorMetrics()
        self.may_write = may_write
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(tj.CONTROLLER_NAME, lambda: len(self.queue), kind=tj.KIND)
        self.res = create_namespaced_resource(tj.GROUP, tj.VERSION, tj.KIND, tj.PLURAL)
        self.jobs = {
            k.kind: create_namespaced_resource(k.group, k.api_version.rpartition("/")[2], k.kind, k.plural)
            for k in OWNED
        }

    async def _served(self) -> bool:
        try:
            async for _ in self.client.list(self.res, namespace=self.namespace, chunk_size=1):
                break
        except ApiError as exc:
            if is_status(exc, 404):
                return False
            raise
        return True

    async def start(self, recheck: float = 30.0) -> None:
        """Wait until TrainingJobs are served (a real cluster needs the CRD installed), then run."""
        told = False
        while not await self._served():
            if not told:
                log.warning("%s not served by this cluster: install its CRD (deploy/)", tj.KIND)
                told = True
            await asyncio.sleep(recheck)
        await asyncio.gather(
            self._watch_trainingjobs(),
            *(self._watch_owned(kind) for kind in OWNED),
            *(work(self.queue, self.reconcile, self.metrics, tj.CONTROLLER_NAME) for _ in range(self.workers)),
        )

    async def _watch_trainingjobs(self) -> None:
        async for _, obj in watch_forever(self.client, self.res, namespace=self.namespace):
            self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    async def _watch_owned(self, kind: OwnedKind) -> None:
        async for _, obj in watch_forever(self.client, self.jobs[kind.kind], namespace=self.namespace):
            m = obj["metadata"]
            for ref in m.get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == tj.KIND and ref.get("apiVersion") == tj.API_VERSION:
                    self.queue.add((m["namespace"], ref["name"]))

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        try:
            tjob = to_dict(await self.client.get(self.res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                self.metrics.forget_job(tj.KIND, namespace, name)
                return None
            raise
        kind = owned_kind(tjob)
        try:
            job: dict[str, Any] | None = to_dict(await self.client.get(self.jobs[kind], name, namespace=namespace))
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            job = None
        if job is not None:
            job = {"apiVersion": KINDS[kind].api_version, "kind": kind, **job}
            if not any(r.get("uid") == tjob["metadata"]["uid"] for r in job["metadata"].get("ownerReferences") or []):
                job = None  # someone else's job of that name: never adopted, never overwritten
        plan = reconcile(TrainingJobObserved(trainingjob=tjob, job=job, now=self.clock()))
        await self.apply(tjob, plan)
        return None

    async def apply(self, tjob: dict[str, Any], plan: TrainingJobPlan) -> None:
        m = tjob["metadata"]
        if not self.may_write():
            raise NotLeading(f"not applying the plan of TrainingJob {m['namespace']}/{m['name']}: not leading")
        events: list[tuple[str, str, str]] = []
        for obj in plan.apply:
            events += await self._write(tjob, obj)
        if plan.status is not None:
            await self.client.patch(
                self.res.Status,
                m["name"],
                {"status": plan.status},
                namespace=m["namespace"],
                patch_type=PatchType.MERGE,
            )
            tjob = {**tjob, "status": {**(tjob.get("status") or {}), **plan.status}}
        self.metrics.observe_job(tjob, self.clock())
        events += [(e.type.value, e.reason, e.message) for e in plan.events]
        await self._emit(tjob, events)

    async def _write(self, tjob: dict[str, Any], obj: dict[str, Any]) -> list[tuple[str, str, str]]:
        m = tjob["metadata"]
        kind = obj["kind"]
        body = {**obj, "metadata": {**obj["metadata"], "namespace": m["namespace"]}}
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": tj.API_VERSION,
                "kind": tj.KIND,
                "name": m["name"],
                "uid": m["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        res = self.jobs[kind]
        if obj["metadata"].get("resourceVersion"):
            await self.client.replace(build(res, body))
            return []
        try:
            await self.client.create(build(res, body))
        except ApiError as exc:
            if is_status(exc, 409):
                return []
            await self._emit(tjob, [("Warning", f"FailedCreate{kind}", f"Error creating {kind} {m['name']}: {exc}")])
            raise
        return [("Normal", f"SuccessfulCreate{kind}", f"Created {kind}: {m['name']}")]

    async def _emit(self, tjob: dict[str, Any], events: Sequence[tuple[str, str, str]]) -> None:
        involved = reference(tjob, tj.API_VERSION, tj.KIND)
        await record_events(self.client, involved, events, component=tj.CONTROLLER_NAME, now=format_time(self.clock()))
