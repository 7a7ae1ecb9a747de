"""Katib's Experiment controller: keys in, ``controller.katib.experiment.reconcile``, plan applied.

Informers cache the Experiments, their Suggestions (named like them) and their Trials (filed by
the ``katib.kubeflow.org/experiment`` label); an event of any of them only enqueues its
Experiment's key. A worker reads the three from the caches, the finished Trials' objective values
from the observation store (medianstop's median), asks the pure reconciler for a plan (the search
runs in a thread: Optuna's TPE over a long history takes longer than a loop turn should) and
applies it in an order that makes a crash harmless: the Suggestion (created, or its
``spec.requests``), its status with the new assignments, then the Trials made from them, the
Trials to delete, the Experiment's one status write, events. "AlreadyExists" on create counts as done.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.api import katib
from trainyard.api.katib import default_experiment
from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import is_status, plain_resource
from trainyard.controller.katib.experiment import ExperimentObserved, ExperimentPlan, reconcile, trial_state
from trainyard.kit.applier import Applier, owned_by
from trainyard.kit.informer import Caches, Informer, label_index
from trainyard.kit.plans import Event
from trainyard.kit.queue import WorkQueue
from trainyard.kit.served import wait_served
from trainyard.kit.worker import work
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.observations import ObservationStore

log = logging.getLogger(__name__)

Key = tuple[str, str]
CONTROLLER_NAME = "experiment-controller"
"""The event source of Katib's Experiment controller (as Katib's manager names it)."""
EXPERIMENT_INDEX = "experiment"

INSTALL = "Katib's CRDs (deploy/crds)"
EXPERIMENTS = plain_resource(katib.GROUP, katib.VERSION, katib.EXPERIMENT, katib.EXPERIMENTS)
SUGGESTIONS = plain_resource(katib.GROUP, katib.VERSION, katib.SUGGESTION, katib.SUGGESTIONS)
TRIALS = plain_resource(katib.GROUP, katib.VERSION, katib.TRIAL, katib.TRIALS)


def owned(obj: Obj | None, owner: Obj) -> bool:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner["metadata"]["uid"] for r in refs)


class ExperimentController:
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
    ) -> None:
        self.client = client
        self.store = store
        self.namespace = namespace
        self.workers = workers
        self.clock = clock
        self.metrics = metrics or OperatorMetrics()
        self.applier = Applier(client, component=CONTROLLER_NAME, clock=clock, may_write=may_write)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.metrics.watch_queue(CONTROLLER_NAME, lambda: len(self.queue), kind=katib.EXPERIMENT)
        self.experiments = Informer(client, EXPERIMENTS, self._on_experiment, namespace=self.namespace)
        self.suggestions = Informer(client, SUGGESTIONS, self._on_child, namespace=self.namespace)
        self.trials = Informer(
            client,
            TRIALS,
            self._on_child,
            namespace=self.namespace,
            indexers={EXPERIMENT_INDEX: label_index(katib.EXPERIMENT_LABEL)},
        )
        self.caches = Caches(CONTROLLER_NAME)

    async def start(self, recheck: float = 30.0) -> None:
        await wait_served(self.client, EXPERIMENTS, katib.EXPERIMENT, self.namespace, recheck=recheck, install=INSTALL)
        observe = self.metrics.observer(CONTROLLER_NAME)
        await self.caches.sync(
            {katib.EXPERIMENTS: self.experiments, katib.SUGGESTIONS: self.suggestions, katib.TRIALS: self.trials}
        )
        await asyncio.gather(
            self.caches.run(),
            *(work(self.queue, self.reconcile, name=CONTROLLER_NAME, observe=observe) for _ in range(self.workers)),
        )

    # -- event sources: every one only enqueues a key ------------------------------------------------

    def _on_experiment(self, _: str, obj: Obj) -> None:
        self.queue.add((obj["metadata"]["namespace"], obj["metadata"]["name"]))

    def _on_child(self, _: str, obj: Obj) -> None:
        m = obj["metadata"]
        name = (m.get("labels") or {}).get(katib.EXPERIMENT_LABEL)
        if name:
            self.queue.add((m["namespace"], name))

    # -- the worker loop: reads from the caches ---------------------------------------------------------

    def observed(self, key: Key) -> ExperimentObserved | None:
        namespace, name = key
        cached = self.experiments.get(namespace, name)
        if cached is None:
            return None
        # Katib's defaults, as admission fills them: a cluster without trainyard's webhook has none.
        experiment = copy.deepcopy(cached)
        default_experiment(experiment)
        suggestion = self.suggestions.get(namespace, name)
        trials = tuple(t for t in self.trials.by_index(EXPERIMENT_INDEX, f"{namespace}/{name}") if owned(t, experiment))
        spec = experiment.get("spec") or {}
        objective = str((spec.get("objective") or {}).get("objectiveMetricName") or "")
        # Only medianstop compares trials' series: no store reads for the others.
        stopping = bool((spec.get("earlyStopping") or {}).get("algorithmName"))
        series = {
            t["metadata"]["name"]: [
                v.value for v in self.store.values(namespace, t["metadata"]["name"]) if v.name == objective
            ]
            for t in trials
            if stopping and trial_state(t) == katib.SUCCEEDED
        }
        return ExperimentObserved(
            experiment=experiment,
            suggestion=suggestion if owned(suggestion, experiment) else None,
            trials=trials,
            series=series,
            now=self.clock(),
        )

    async def reconcile(self, key: Key) -> float | None:
        observed = self.observed(key)
        if observed is None:
            self.metrics.forget_job(katib.EXPERIMENT, *key)
            return None
        plan = await asyncio.to_thread(reconcile, observed)
        await self.apply(observed, plan)
        return None

    async def apply(self, observed: ExperimentObserved, plan: ExperimentPlan) -> None:
        experiment = observed.experiment
        m = experiment["metadata"]
        self.applier.fence(f"applying the plan of Experiment {m['namespace']}/{m['name']}")
        events: list[Event] = []
        suggestion = observed.suggestion
        if plan.suggestion is not None:
            body = owned_by(plan.suggestion, experiment, katib.API_VERSION, katib.EXPERIMENT)
            suggestion = await self.applier.write(SUGGESTIONS, body, self.suggestions)
            if suggestion is None:  # created meanwhile by an earlier pass: this pass's view is stale
                return
        if plan.suggestion_status is not None and suggestion is not None:
            await self.applier.write_status(
                SUGGESTIONS, suggestion, plan.suggestion_status, self.suggestions, whole=True
            )
        for trial in plan.create:
            body = owned_by(trial, experiment, katib.API_VERSION, katib.EXPERIMENT)
            try:
                created = await self.applier.create(TRIALS, body, self.trials)
            except ApiError as exc:
                await self._emit(
                    experiment,
                    [
                        *events,
                        Event.warning(
                            "FailedCreateTrial",
                            f"Error creating Trial {trial['metadata']['name']}: {exc.status.message}",
                        ),
                    ],
                )
                raise
            if created is not None:
                events.append(Event.normal("TrialCreated", f"Created Trial: {trial['metadata']['name']}"))
        for name in plan.delete:
            await self.applier.delete(
                TRIALS, name, namespace=m["namespace"], cache=self.trials, propagation="Background"
            )
            events.append(Event.normal("TrialDeleted", f"Deleted Trial {name}: more than parallelTrialCount active"))
        if plan.status is not None:
            try:
                # Whole: the summary's lists go when empty (a merge-patch would keep a stale pendingTrialList).
                experiment = await self.applier.write_status(
                    EXPERIMENTS, experiment, plan.status, self.experiments, whole=True
                )
            except ApiError as exc:
                if is_status(exc, 409):
                    await self._emit(experiment, events)
                raise
        self.metrics.observe_job(experiment, self.clock())
        await self._emit(experiment, [*events, *plan.events])

    async def _emit(self, experiment: Obj, events: Sequence[Event]) -> None:
        await self.applier.emit(reference(experiment, katib.API_VERSION, katib.EXPERIMENT), events)
