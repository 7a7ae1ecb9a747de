"""The embedded Kueue controller: queues every job that names a LocalQueue, as Kueue does.

It reaches the API server only through the client and stands on the controller kit. Two kinds
of pass share one work queue:

* **a job's pass** (Kueue's ``jobframework`` reconciler, for every row of
  ``api.kueue.integrations``): create the job's Workload (``api.kueue.workloads``); once the
  Workload is admitted, unsuspend the job; while it is not (or once it is evicted), keep the job
  suspended; when an evicted job's pods have stopped, release its quota (``Requeued``); when the
  job finishes, mark its Workload ``Finished`` (its quota is free again).
* **the scheduling pass** (Kueue's scheduler and its queue status): ``api.kueue.admission.decide``
  over every Workload and queue, then its Workload conditions, admissions and evictions, and the
  ClusterQueues' and LocalQueues' status, written only where they changed. Any change of a
  Workload, queue, flavor or namespace queues it; the queue coalesces a burst into one pass.

Events are Kueue's: ``CreatedWorkload``, ``Started``, ``Stopped`` and ``FinishedWorkload`` on
the job; ``QuotaReserved``, ``Admitted``, ``Pending`` and ``Preempted`` on the Workload.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.scheduling_v1 import PriorityClass

from trainyard.api import kueue
from trainyard.api.kueue import admission, integrations
from trainyard.api.kueue.integration import Integration
from trainyard.api.kueue.workloads import workload_for, workload_name
from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.client.events import reference
from trainyard.client.resources import global_resource, plain_resource
from trainyard.cluster.clients.kueue.metrics import QueueMetrics
from trainyard.cluster.tasks import cancel_all
from trainyard.kit.applier import Applier
from trainyard.kit.conditions import set_condition
from trainyard.kit.informer import Caches, Informer, key_of
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

Key = tuple[str, str, str]
"""("job", "<group>/<kind>", "<namespace>/<name>"), or SCHEDULE."""
SCHEDULE: Key = ("schedule", "", "")
SCHEDULE_BATCH = 0.02
"""Seconds a change waits for the others of its burst, so that one scheduling pass decides them all
(Kueue's scheduler also runs in cycles): a long line costs a pass per burst, not per write."""
COMPONENT = kueue.MANAGER


def _global(kind: str, plural: str) -> Any:
    return global_resource(kueue.GROUP, kueue.STORAGE_VERSION, kind, plural)


CLUSTER_QUEUE = _global("ClusterQueue", "clusterqueues")
RESOURCE_FLAVOR = _global("ResourceFlavor", "resourceflavors")
WORKLOAD_PRIORITY_CLASS = _global("WorkloadPriorityClass", "workloadpriorityclasses")
LOCAL_QUEUE = plain_resource(kueue.GROUP, kueue.STORAGE_VERSION, "LocalQueue", "localqueues")
WORKLOAD = plain_resource(kueue.GROUP, kueue.STORAGE_VERSION, "Workload", "workloads")


def _kind_key(integration: Integration) -> str:
    return f"{integration.group}/{integration.kind}"


class KueueController:
    def __init__(self, client: AsyncClient, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.clock = clock
        self.applier = Applier(client, component=COMPONENT, clock=clock)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.integrations = {_kind_key(i): i for i in integrations.integrations()}
        self.resources = {k: plain_resource(i.group, i.version, i.kind, i.plural) for k, i in self.integrations.items()}
        self.jobs = {k: Informer(client, res, self._on_job(k)) for k, res in self.resources.items()}
        # Every Workload's facts are kept, not the informer's usual few hundred: each scheduling
        # pass reads them all, and re-reading a long line's quantities every pass made it O(n²).
        self.workloads = Informer(client, WORKLOAD, self._on_workload, parsed=1_000_000)
        self.cluster_queues = Informer(client, CLUSTER_QUEUE, self._on_config, namespaced=False)
        self.local_queues = Informer(client, LOCAL_QUEUE, self._on_config)
        self.flavors = Informer(client, RESOURCE_FLAVOR, self._on_config, namespaced=False)
        self.workload_classes = Informer(client, WORKLOAD_PRIORITY_CLASS, namespaced=False)
        self.priority_classes = Informer(client, PriorityClass, namespaced=False)
        self.namespaces = Informer(client, Namespace, self._on_config, namespaced=False)
        # What pod sets are read from (a TrainJob's runtimes), watched once per kind.
        refs = {(r.group, r.kind): r for i in self.integrations.values() for r in i.references()}
        self.references = {
            kind: Informer(
                client,
                plain_resource(r.group, r.version, r.kind, r.plural)
                if r.namespaced
                else global_resource(r.group, r.version, r.kind, r.plural),
                self._on_reference,
                namespaced=r.namespaced,
            )
            for (_, kind), r in refs.items()
        }
        self._waiting_for_references: set[Key] = set()
        self.caches = Caches(COMPONENT)
        self.metrics = QueueMetrics()

    # -- event sources: every one only enqueues keys ----------------------------------------------

    def _on_job(self, kind_key: str) -> Callable[[str, Obj], None]:
        def handle(kind: str, obj: Obj) -> None:
            if integrations.queue_name(obj):
                namespace, name = key_of(obj)
                self.queue.add(("job", kind_key, f"{namespace}/{name}"))

        return handle

    def _on_workload(self, kind: str, obj: Obj) -> None:
        namespace = key_of(obj)[0]
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            if ref.get("controller"):
                group = str(ref.get("apiVersion", "")).rpartition("/")[0]
                kind_key = f"{group}/{ref.get('kind')}"
                if kind_key in self.integrations:
                    self.queue.add(("job", kind_key, f"{namespace}/{ref.get('name')}"))
        self.queue.add_after(SCHEDULE, SCHEDULE_BATCH)

    def _on_config(self, kind: str, obj: Obj) -> None:
        self.queue.add_after(SCHEDULE, SCHEDULE_BATCH)

    def _on_reference(self, kind: str, obj: Obj) -> None:
        waiting, self._waiting_for_references = self._waiting_for_references, set()
        for key in waiting:
            self.queue.add(key)

    def _lookup(self, kind: str, namespace: str, name: str) -> Obj | None:
        informer = self.references.get(kind)
        return informer.get(namespace, name) if informer is not None else None

    # -- the worker --------------------------------------------------------------------------------

    async def run(self) -> None:
        informers = {
            **{f"jobs {k}": inf for k, inf in self.jobs.items()},
            "workloads": self.workloads,
            "clusterqueues": self.cluster_queues,
            "localqueues": self.local_queues,
            "resourceflavors": self.flavors,
            "workloadpriorityclasses": self.workload_classes,
            "priorityclasses": self.priority_classes,
            "namespaces": self.namespaces,
            **{f"references {k}": inf for k, inf in self.references.items()},
        }
        await self.caches.sync(informers)
        self.queue.add(SCHEDULE)
        try:
            await work(self.queue, self._pass, name=COMPONENT)
        finally:
            self.queue.close()
            await cancel_all(list(self.caches.tasks.values()))

    async def _pass(self, key: Key) -> float | None:
        if key == SCHEDULE:
            await self.schedule()
            return None
        namespace, _, name = key[2].partition("/")
        await self.reconcile_job(key[1], namespace, name)
        return None

    def now(self) -> str:
        return format_time(self.clock())

    # -- a job's pass ------------------------------------------------------------------------------

    def _priority(self, job: Obj, integration: Integration) -> tuple[str, int, str] | None:
        labels = (job.get("metadata") or {}).get("labels") or {}
        wanted = labels.get(kueue.PRIORITY_CLASS_LABEL)
        if wanted:
            found = self.workload_classes.get("", wanted)
            if found is not None:
                return wanted, int(found.get("value") or 0), kueue.WORKLOAD_PRIORITY_SOURCE
        name = integration.priority_class(job)
        if name:
            found = self.priority_classes.get("", name)
            if found is not None:
                return name, int(found.get("value") or 0), kueue.POD_PRIORITY_SOURCE
        for pc in self.priority_classes.items():
            if pc.get("globalDefault"):
                return pc["metadata"]["name"], int(pc.get("value") or 0), kueue.POD_PRIORITY_SOURCE
        return None

    async def reconcile_job(self, kind_key: str, namespace: str, name: str) -> None:
        integration = self.integrations[kind_key]
        res = self.resources[kind_key]
        job = self.jobs[kind_key].get(namespace, name)
        if job is None or not integrations.queue_name(job) or (job["metadata"].get("deletionTimestamp")):
            return
        involved = reference(job, integration.api_version, integration.kind)
        m = job["metadata"]
        wl = self.workloads.get(namespace, workload_name(m["name"], m["uid"], integration.kind, integration.group))
        finish = integration.finished(job)
        if wl is None:
            if finish.finished:
                return
            podsets = integration.podsets(job, self._lookup)
            if podsets is None:  # its runtime is not there yet: its arrival brings the job back
                self._waiting_for_references.add(("job", kind_key, f"{namespace}/{name}"))
                return
            priority = self._priority(job, integration)
            body = workload_for(job, integration, integrations.queue_name(job), priority, podsets)
            created = await self.applier.create(WORKLOAD, body, self.workloads)
            if created is not None:
                wl_name = created["metadata"]["name"]
                await self.applier.emit(
                    involved, [Event.normal("CreatedWorkload", f"Created Workload: {namespace}/{wl_name}")]
                )
            if not integration.suspended(job):
                await self._suspend(res, integration, job, involved, "Not admitted by cluster queue")
            return
        if finish.finished:
            if not admission.is_true(wl, kueue.FINISHED):
                reason = kueue.SUCCEEDED if finish.success else kueue.FAILED
                message = finish.message or ("Job finished successfully" if finish.success else "Job failed")
                await self._conditions(wl, [(kueue.FINISHED, "True", reason, message)])
                await self.applier.emit(
                    involved,
                    [
                        Event.normal(
                            "FinishedWorkload", f"Workload '{namespace}/{wl['metadata']['name']}' is declared finished"
                        )
                    ],
                )
            return
        evicted = admission.condition(wl, kueue.EVICTED) if admission.is_true(wl, kueue.EVICTED) else None
        if admission.is_true(wl, kueue.ADMITTED) and evicted is None:
            if integration.suspended(job):
                await self.applier.patch(
                    res, name, integration.suspend_patch(False), namespace=namespace, cache=self.jobs[kind_key]
                )
                cq = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue", "")
                await self.applier.emit(involved, [Event.normal("Started", f"Admitted by clusterQueue {cq}")])
            return
        if not integration.suspended(job):
            message = str(evicted.get("message")) if evicted is not None else "Not admitted by cluster queue"
            await self._suspend(res, integration, job, involved, message)
            return
        if evicted is not None and admission.is_true(wl, kueue.QUOTA_RESERVED) and not integration.active(job):
            message = str(evicted.get("message") or "")
            await self._conditions(
                wl,
                [
                    (kueue.QUOTA_RESERVED, "False", kueue.PENDING, message),
                    (kueue.ADMITTED, "False", "NoReservation", "The workload has no reservation"),
                    (kueue.REQUEUED, "True", str(evicted.get("reason") or ""), message),
                ],
                admission_value=None,
            )

    async def _suspend(self, res: Any, integration: Integration, job: Obj, involved: Obj, message: str) -> None:
        namespace, name = key_of(job)
        kind_key = _kind_key(integration)
        await self.applier.patch(
            res, name, integration.suspend_patch(True), namespace=namespace, cache=self.jobs[kind_key]
        )
        await self.applier.emit(involved, [Event.normal("Stopped", message)])

    async def _conditions(
        self,
        wl: Obj,
        changes: list[tuple[str, str, str, str]],
        *,
        admission_value: Any = ...,
        events: list[Event] | None = None,
    ) -> bool:
        """Set Workload conditions (and ``status.admission``: None removes it); whether anything changed."""
        status = wl.get("status") or {}
        conditions: list[Any] = list(status.get("conditions") or [])
        changed = False
        generation = (wl.get("metadata") or {}).get("generation", 1)
        for type_, value, reason, message in changes:
            conditions, moved = set_condition(
                conditions, type_, value, reason, message, self.now(), observedGeneration=generation
            )
            changed = changed or moved
        patch: Obj = {"conditions": conditions}
        if admission_value is not ...:
            if status.get("admission") != admission_value:
                changed = True
            patch["admission"] = admission_value
        if not changed:
            return False
        await self.applier.write_status(WORKLOAD, wl, patch, self.workloads)
        if events:
            await self.applier.emit(reference(wl, f"{kueue.GROUP}/{kueue.STORAGE_VERSION}", "Workload"), events)
        return True

    # -- the scheduling pass -----------------------------------------------------------------------

    def config(self) -> admission.Config:
        return admission.Config(
            cluster_queues={cq["metadata"]["name"]: cq for cq in self.cluster_queues.items()},
            local_queues={key_of(lq): lq for lq in self.local_queues.items()},
            flavors=frozenset(f["metadata"]["name"] for f in self.flavors.items()),
            namespace_labels={
                ns["metadata"]["name"]: dict(ns["metadata"].get("labels") or {}) for ns in self.namespaces.items()
            },
        )

    async def schedule(self) -> None:
        config = self.config()
        decision = admission.decide(config, self.workloads.items(), self._facts)
        self.metrics.observe(config, decision)
        for admit in decision.admit:
            wl = self.workloads.get(*admit.key)
            if wl is None:
                continue
            cq = admit.admission["clusterQueue"]
            changes = [
                (kueue.QUOTA_RESERVED, "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"),
                (kueue.ADMITTED, "True", "Admitted", "The workload is admitted"),
            ]
            for reset in (kueue.EVICTED, kueue.PREEMPTED):
                previous = admission.condition(wl, reset)
                if previous is not None and previous.get("status") == "True":
                    changes.append((reset, "False", "QuotaReserved", f"Previously: {previous.get('message', '')}"))
            waited = self._waited(wl)
            events = [
                Event.normal(
                    "QuotaReserved", f"Quota reserved in ClusterQueue {cq}, wait time since queued was {waited}s"
                ),
                Event.normal("Admitted", f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s"),
            ]
            await self._conditions(wl, changes, admission_value=admit.admission, events=events)
        for evict in decision.evict:
            wl = self.workloads.get(*evict.key)
            if wl is None:
                continue
            changes = [(kueue.EVICTED, "True", evict.reason, evict.message)]
            if evict.preempted_reason:
                changes.append((kueue.PREEMPTED, "True", evict.preempted_reason, evict.message))
            event = Event.normal(
                "Preempted" if evict.preempted_reason else "EvictedDueTo" + evict.reason, evict.message
            )
            await self._conditions(wl, changes, events=[event])
        for waiting in decision.waiting:
            wl = self.workloads.get(*waiting.key)
            if wl is None:
                continue
            previous = admission.condition(wl, kueue.QUOTA_RESERVED) or {}
            if (previous.get("status"), previous.get("reason"), previous.get("message")) == (
                "False",
                waiting.reason,
                waiting.message,
            ):
                continue  # told already: most of a long line, on every pass
            events = [Event.normal("Pending", waiting.message)] if previous.get("message") != waiting.message else []
            await self._conditions(
                wl, [(kueue.QUOTA_RESERVED, "False", waiting.reason, waiting.message)], events=events
            )
        for name, status in decision.cluster_queue_status.items():
            cq = self.cluster_queues.get("", name)
            if cq is not None:
                await self._queue_status(CLUSTER_QUEUE, cq, status, self.cluster_queues)
        for key, status in decision.local_queue_status.items():
            lq = self.local_queues.get(*key)
            if lq is not None:
                await self._queue_status(LOCAL_QUEUE, lq, status, self.local_queues)

    def _facts(self, wl: Obj) -> admission.Facts:
        return self.workloads.parsed(admission.facts, wl)

    def _waited(self, wl: Obj) -> int:
        try:
            since = parse_time(admission.queued_at(wl))
        except ValueError:
            return 0
        return max(0, round((self.clock() - since).total_seconds()))

    async def _queue_status(self, res: Any, queue: Obj, wanted: Mapping[str, Any], cache: Informer) -> None:
        status = dict(queue.get("status") or {})
        conditions: list[Any] = list(status.get("conditions") or [])
        changed = False
        for c in wanted.get("conditions") or []:
            conditions, moved = set_condition(conditions, c["type"], c["status"], c["reason"], c["message"], self.now())
            changed = changed or moved
        new = {**{k: v for k, v in wanted.items() if k != "conditions"}, "conditions": conditions}
        if not changed and all(status.get(k) == v for k, v in new.items() if k != "conditions"):
            return
        await self.applier.write_status(res, queue, new, cache)
