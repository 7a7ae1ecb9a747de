"""Katib's Trial controller and its metrics collection: the I/O shell of ``controller.katib.trial``.

Informers cache the Trials and every kind a Trial's job may be (``api.katib.kinds``, shared with
the other controllers); a job's event enqueues the Trial controlling it. A pass reads the Trial and
its job from the caches, collects the Trial's metrics into the observation store, asks the pure
reconciler for a plan and applies it: the job created (owned by the Trial) or deleted, the one
status write, events, a requeue while early-stopping rules need fresh values.

Collection, by ``spec.metricsCollector.collector.kind``, as Katib's collectors read:

* ``StdOut`` (Katib's default): the primary container's log of the primary pod (the one
  ``primaryPodLabels`` select, else the first by name among the job's pods that has
  ``primaryContainerName``), read through the API (``pods/log``), parsed with the collector's
  ``metricsFormat`` filters or Katib's default ``name=value`` one. Read when the job finished, and
  while it runs only if the Trial has early-stopping rules to check.
* ``File``: the metrics file (TEXT lines as StdOut's, or JSON lines), which the primary container's
  wrapped command prints, marked, when the training exits (``controller.katib.template``); read
  then, so such a Trial is not stopped early.
* ``Push``: what the training code reported with ``trainyard.runtime.report()`` into the job's
  status (``trainerStatus``, ``trainingProgress``): each new report appends its values.
* ``None``: nothing is collected (the Trial ends ``MetricsUnavailable``, as in Katib).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Pod

from trainyard.api import katib
from trainyard.api.katib.conditions import holds
from trainyard.api.katib.kinds import TrialKind, trial_kinds
from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import is_status, plain_resource, selector, to_dict
from trainyard.controller.katib import trial as pure
from trainyard.controller.katib.template import FILE_PREFIX
from trainyard.controller.search import MetricValue
from trainyard.controller.search.metrics import parse_json, parse_text
from trainyard.kit.applier import Applier, owned_by
from trainyard.kit.informer import Caches, Informer, SharedInformers
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.served import served, wait_served
from trainyard.kit.worker import work
from trainyard.operator.katib import INSTALL, TRIALS, owned
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.observations import ObservationStore

log = logging.getLogger(__name__)

Key = tuple[str, str]
CONTROLLER_NAME = "trial-controller"


def collector_kind(trial: Obj) -> str:
    spec = trial.get("spec") or {}
    return str(((spec.get("metricsCollector") or {}).get("collector") or {}).get("kind") or katib.STDOUT_COLLECTOR)


def filters(trial: Obj) -> list[str]:
    source = ((trial.get("spec") or {}).get("metricsCollector") or {}).get("source") or {}
    return [str(f) for f in (source.get("filter") or {}).get("metricsFormat") or []] or [katib.DEFAULT_FILTER]


def file_format(trial: Obj) -> str:
    source = ((trial.get("spec") or {}).get("metricsCollector") or {}).get("source") or {}
    return str((source.get("fileSystemPath") or {}).get("format") or "TEXT")


def primary_pod(trial: Obj, pods: Sequence[Obj]) -> Obj | None:
    spec = trial.get("spec") or {}
    wanted = spec.get("primaryPodLabels") or {}
    container = spec.get("primaryContainerName")
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        labels = pod["metadata"].get("labels") or {}
        if any(labels.get(k) != v for k, v in wanted.items()):
            continue
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if container and container not in names:
            continue
        return pod
    return None


class TrialController:
    def __init__(
        self,
        client: AsyncClient,
        store: ObservationStore,
        *,
        namespace: str,
        workers: int,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: OperatorMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
        informers: SharedInformers | None = None,
    ) -> None:
        self.client = client
        self.store = store
        self.namespace = namespace
        self.workers = workers
        self.clock = clock
        self.metrics = metrics or OperatorMetrics()
        self.applier = Applier(client, component=CONTROLLER_NAME, clock=clock, may_write=may_write)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(CONTROLLER_NAME, lambda: len(self.queue), kind=katib.TRIAL)
        self.trials = Informer(client, TRIALS, self._on_trial, namespace=self.namespace)
        self.shared = informers if informers is not None else SharedInformers(client)
        self.kinds = trial_kinds()
        self.resources = {key: plain_resource(k.group, k.version, k.kind, k.plural) for key, k in self.kinds.items()}
        self.jobs: dict[tuple[str, str], Informer] = {}
        self.caches = Caches(CONTROLLER_NAME)

    async def start(self, recheck: float = 30.0) -> None:
        await wait_served(self.client, TRIALS, katib.TRIAL, self.namespace, recheck=recheck, install=INSTALL)
        # Only kinds the cluster serves get an informer (a real one may lack a family's CRDs).
        for key, res in self.resources.items():
            if await served(self.client, res, self.namespace):
                self.jobs[key] = self.shared.informer(res, self._on_job, namespace=self.namespace)
        observe = self.metrics.observer(CONTROLLER_NAME)
        await self.caches.sync({katib.TRIALS: self.trials, **{f"{k[1]} ({k[0]})": inf for k, inf in self.jobs.items()}})
        await asyncio.gather(
            self.caches.run(),
            *(work(self.queue, self.reconcile, name=CONTROLLER_NAME, observe=observe) for _ in range(self.workers)),
        )

    # -- event sources: every one only enqueues a key ------------------------------------------------

    def _on_trial(self, kind: str, obj: Obj) -> None:
        m = obj["metadata"]
        if kind == "DELETED":
            self.store.forget(m["namespace"], m["name"])
            return
        self.queue.add((m["namespace"], m["name"]))

    def _on_job(self, _: str, obj: Obj) -> None:
        m = obj["metadata"]
        for ref in m.get("ownerReferences") or []:
            if ref.get("controller") and ref.get("kind") == katib.TRIAL and ref.get("apiVersion") == katib.API_VERSION:
                self.queue.add((m["namespace"], ref["name"]))

    # -- the worker loop ------------------------------------------------------------------------------

    async def reconcile(self, key: Key) -> float | None:
        namespace, name = key
        trial = self.trials.get(namespace, name)
        if trial is None:
            return None
        run = (trial.get("spec") or {}).get("runSpec") or {}
        kind_key = (str(run.get("apiVersion") or ""), str(run.get("kind") or ""))
        kind = self.kinds.get(kind_key)
        if kind is None or kind_key not in self.jobs:
            await self._unsupported(trial, kind_key)
            return None
        job = self.jobs[kind_key].get(namespace, name)
        if job is not None:
            job = {"apiVersion": kind.api_version, "kind": kind.kind, **job}
            if not owned(job, trial):
                job = None  # someone else's job of that name: never adopted, never overwritten
        if job is not None and not pure.finished(trial):
            await self.collect(trial, kind, job)
        values = tuple(self.store.values(namespace, name))
        plan = pure.reconcile(pure.TrialObserved(trial=trial, job=job, values=values, now=self.clock()))
        await self.apply(trial, kind, plan)
        return plan.requeue

    async def collect(self, trial: Obj, kind: TrialKind, job: Obj) -> None:
        """The Trial's metrics so far into the store, from where its collector kind reads them."""
        m = trial["metadata"]
        spec = trial.get("spec") or {}
        names = pure.metric_names(trial)
        collector = collector_kind(trial)
        if collector == katib.PUSH_COLLECTOR:
            reported = kind.reported(job)
            if reported is None or not reported.metrics:
                return
            fresh = [
                MetricValue(n, float(reported.metrics[n]), reported.updated) for n in names if n in reported.metrics
            ]
            stored = self.store.values(m["namespace"], m["name"])
            # A pass that sees the same report again (another event of the job) adds nothing; reports
            # within one second share a timestamp, so the values tell them apart.
            if fresh and stored[-len(fresh) :] != fresh:
                self.store.append(m["namespace"], m["name"], fresh)
            return
        if collector not in (katib.STDOUT_COLLECTOR, katib.FILE_COLLECTOR):
            return
        done = any(holds(str(spec[c]), job) for c in ("successCondition", "failureCondition") if spec.get(c))
        # The file's lines reach the output only when the training exits (``template``): read then.
        if not done and (collector == katib.FILE_COLLECTOR or not spec.get("earlyStoppingRules")):
            return
        lines = await self._log(trial, kind, job)
        if lines is None:
            return
        if collector == katib.FILE_COLLECTOR:
            lines = [line.removeprefix(FILE_PREFIX) for line in lines if line.startswith(FILE_PREFIX)]
            if file_format(trial) == "JSON":
                self.store.replace(m["namespace"], m["name"], parse_json(lines, names))
                return
        self.store.replace(m["namespace"], m["name"], parse_text(lines, names, filters(trial)))

    async def _log(self, trial: Obj, kind: TrialKind, job: Obj) -> list[str] | None:
        namespace = trial["metadata"]["namespace"]
        try:
            pods = [
                to_dict(p)
                async for p in self.client.list(
                    Pod, namespace=namespace, labels=selector(kind.pod_labels(job["metadata"]["name"]))
                )
            ]
        except ApiError as exc:
            log.warning("trial %s/%s: listing its pods failed: %s", namespace, trial["metadata"]["name"], exc)
            return None
        pod = primary_pod(trial, pods)
        if pod is None:
            return None
        container = (trial.get("spec") or {}).get("primaryContainerName")
        try:
            return [
                line
                async for line in self.client.log(pod["metadata"]["name"], namespace=namespace, container=container)
            ]
        except ApiError as exc:
            if not is_status(exc, 400) and not is_status(exc, 404):
                raise
            return None  # not started yet, or gone: what was read before stays

    async def apply(self, trial: Obj, kind: TrialKind, plan: pure.TrialPlan) -> None:
        m = trial["metadata"]
        self.applier.fence(f"applying the plan of Trial {m['namespace']}/{m['name']}")
        key = (kind.api_version, kind.kind)
        if plan.create is not None:
            body = owned_by(plan.create, trial, katib.API_VERSION, katib.TRIAL)
            try:
                await self.applier.create(self.resources[key], body, self.jobs[key])
            except ApiError as exc:
                await self._emit(
                    trial,
                    [Event.warning("FailedCreateJob", f"Error creating {kind.kind} {m['name']}: {exc.status.message}")],
                )
                raise
        if plan.delete:
            await self.applier.delete(
                self.resources[key], m["name"], namespace=m["namespace"], cache=self.jobs[key], propagation="Background"
            )
        if plan.status is not None:
            await self.applier.write_status(TRIALS, trial, plan.status, self.trials)
        await self._emit(trial, plan.events)

    async def _unsupported(self, trial: Obj, kind_key: tuple[str, str]) -> None:
        """A Trial whose job kind no informer serves ends Failed, saying which kinds do."""
        if pure.finished(trial):
            return
        served_kinds = ", ".join(f"{k} ({v})" for v, k in sorted(self.jobs))
        message = (
            f"trialSpec is {kind_key[1]} ({kind_key[0] or 'no apiVersion'}), which this cluster does not serve "
            f"as a trial: use one of {served_kinds}"
        )
        status = pure.unsupported(trial, message, self.clock())
        await self.applier.write_status(TRIALS, trial, status, self.trials)
        await self._emit(trial, [Event.warning("TrialKindNotSupported", message)])

    async def _emit(self, trial: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(trial, katib.API_VERSION, katib.TRIAL), events)
