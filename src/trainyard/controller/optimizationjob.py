"""The OptimizationJob reconciler: a pure function from an OptimizationJob and its TrainJobs to a plan.

Level-triggered, stateless (KEP-3562 §7.3): each pass reads the trials back from the TrainJobs
(``controller.optimizationtrials``), asks the search (``controller.search``, Optuna's samplers)
for as many new parameter sets as there is room for, and plans:

* **TrainJobs to create**: ``parallelTrials`` at most unfinished at a time, ``numTrials`` in all,
  named ``<job>-trial-<index>`` by their place in the history. A restart that recomputes a pass
  plans the same names, and "already exists" is done: no trial is ever made twice. The history
  given to the search is every trial so far, in index order: running ones with their parameters
  (taken), finished ones with their objective value, failed ones as failed.
* **The status**: upstream's ``conditions`` and ``result`` (the best finished trial by the
  objective's metric and direction, ties to the earlier trial) and trainyard's ``state``,
  ``trials``, counts and ``bestValue``.
* **Events**: each trial's end (``TrialSucceeded``, ``TrialFailed``), the job's end.

Conditions, as the KEP names them: ``Created`` True once its trials exist (``Created`` False,
``TrainJobsCreationFailed``, when they cannot be made, with the cause); ``Complete`` True
``MaxTrialsReached`` when all ``numTrials`` have finished, or ``SearchSpaceExhausted`` when a
grid has no point left. Upstream has no failure budget, so a failed trial only takes its point:
the search goes on, and the job is ``Failed`` (``AllTrialsFailed``) only when every trial it
ran has failed, so no result exists. A finished job is never reopened.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from trainyard.api import trainer
from trainyard.api.meta import Obj, format_time
from trainyard.controller.optimizationtrials import COMPLETE, FAILED, RUNNING, Trial, observe, trainjob_for, trial_name
from trainyard.controller.search import Algorithm, Direction, PastTrial
from trainyard.controller.search.space import from_optimizationjob
from trainyard.controller.search.suggest import seed_of, suggest
from trainyard.controller.trainjob import set_condition
from trainyard.kit.plans import Event

FINISHED = (trainer.COMPLETE, trainer.FAILED)
MAX_NAME = 63
"""A TrainJob's name is an RFC 1035 label of at most 63 characters, and a trial's is ``<job>-trial-<n>``."""
_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True)
class OptimizationJobObserved:
    optimizationjob: Obj
    trainjobs: tuple[Obj, ...]
    """Its trial TrainJobs as read (those not its own are ignored)."""
    now: datetime


@dataclass(frozen=True)
class OptimizationJobPlan:
    create: tuple[Obj, ...] = ()
    """Trial TrainJobs to create, in index order (their owner and namespace are the caller's to set)."""
    status: Obj | None = None
    """The whole new status, only when it differs from the observed one."""
    events: tuple[Event, ...] = ()


@dataclass(frozen=True)
class Search:
    """The spec as the search reads it."""

    metric: str
    direction: Direction
    algorithm: Algorithm
    trials: int
    parallel: int


def search_of(spec: Obj, uid: str = "") -> Search:
    """``uid``: the OptimizationJob's, which seeds a search whose spec names no seed."""
    objective = (spec.get("objectives") or [{}])[0]
    chosen = spec.get("searchAlgorithm") or {"random": {}}
    if "grid" in chosen:
        algorithm = Algorithm(name="grid", seed=seed_of(uid))
    else:
        seed = (chosen.get("random") or {}).get("seed")
        algorithm = Algorithm(name="random", seed=int(seed) if seed is not None else seed_of(uid))
    direction = Direction.MAXIMIZE if objective.get("direction") == "Maximize" else Direction.MINIMIZE
    return Search(
        metric=str(objective.get("metric") or ""),
        direction=direction,
        algorithm=algorithm,
        trials=int(spec.get("numTrials") or 1),
        parallel=int(spec.get("parallelTrials") or 1),
    )


def reconcile(observed: OptimizationJobObserved) -> OptimizationJobPlan:
    job = observed.optimizationjob
    old: Obj = job.get("status") or {}
    if job["metadata"].get("deletionTimestamp") or old.get("state") in FINISHED:
        return OptimizationJobPlan()  # a finished search is never reopened; its TrainJobs go with it
    spec = job.get("spec") or {}
    search = search_of(spec, str(job["metadata"].get("uid") or job["metadata"]["name"]))
    trials = observe(job, observed.trainjobs, search.metric)
    now = format_time(observed.now)
    status = copy.deepcopy(old)
    if (problem := name_problem(job["metadata"]["name"], search.trials)) is not None:
        creation_failed(status, problem, now)
        return _plan((), status, old, [])
    running = sum(1 for t in trials if t.state == RUNNING)
    room = min(search.parallel - running, search.trials - len(trials))
    exhausted = False
    new: list[Trial] = []
    if room > 0:
        history: Sequence[PastTrial] = [t.past() for t in trials]
        try:
            space = from_optimizationjob(spec.get("parameters") or [])
            suggested = suggest(space, search.algorithm, search.direction, history, room)
        except ValueError as exc:  # admission refuses such a space; one written past it is said here
            creation_failed(status, f"the search space cannot be searched: {exc}", now)
            return _plan((), status, old, [])
        exhausted = suggested.exhausted and len(suggested.assignments) < room
        start = max((t.index for t in trials), default=-1) + 1
        name = job["metadata"]["name"]
        new = [Trial(start + i, trial_name(name, start + i), dict(a)) for i, a in enumerate(suggested.assignments)]
    create = tuple(trainjob_for(job, t.index, t.assignments) for t in new)
    events = _trial_events(old, trials, search.metric)
    _write_status(status, search, [*trials, *new], exhausted, now, events)
    return _plan(create, status, old, events)


def _plan(create: tuple[Obj, ...], status: Obj, old: Obj, events: list[Event]) -> OptimizationJobPlan:
    return OptimizationJobPlan(create=create, status=status if status != old else None, events=tuple(events))


def name_problem(name: str, trials: int) -> str | None:
    """Why trial TrainJobs cannot be named after this OptimizationJob, or None."""
    longest = trial_name(name, trials - 1)
    if len(longest) > MAX_NAME:
        return (
            f"trial TrainJob names such as {longest} would be longer than {MAX_NAME} characters: "
            f"name the OptimizationJob with at most {MAX_NAME - len(longest) + len(name)} characters"
        )
    if not _LABEL.match(longest):
        return (
            f"trial TrainJob name {longest} is no RFC 1035 label (a TrainJob's name must be one): "
            "name the OptimizationJob with lower-case letters, digits and '-' only, starting with a letter"
        )
    return None


def creation_failed(status: Obj, message: str, now: str) -> None:
    """``Created`` False, ``TrainJobsCreationFailed``: the trials cannot be made (the message says why)."""
    set_condition(status, trainer.CREATED, "False", trainer.TRAINJOBS_CREATION_FAILED_REASON, message, now)
    status.setdefault("state", "Created")


def best_of(trials: Sequence[Trial], direction: Direction) -> Trial | None:
    """The finished trial with the best value; of equal values, the earlier."""
    done = [t for t in trials if t.state == COMPLETE and t.number is not None]
    sign = -1.0 if direction == Direction.MAXIMIZE else 1.0
    return min(done, key=lambda t: (sign * (t.number or 0.0), t.index), default=None)


def _write_status(
    status: Obj, search: Search, trials: list[Trial], exhausted: bool, now: str, events: list[Event]
) -> None:
    succeeded = [t for t in trials if t.state == COMPLETE]
    failed = [t for t in trials if t.state == FAILED]
    running = [t for t in trials if t.state == RUNNING]
    status["trials"] = [t.row() for t in trials]
    status["trialsRunning"], status["trialsSucceeded"], status["trialsFailed"] = (
        len(running),
        len(succeeded),
        len(failed),
    )
    best = best_of(trials, search.direction)
    if best is not None:
        status["result"] = {"trainJobName": best.name, "parameters": [dict(p) for p in best.row()["parameters"]]}
        status["bestValue"] = best.value
    if trials:
        set_condition(status, trainer.CREATED, "True", trainer.CREATED_REASON, "OptimizationJob is created", now)
    over = not running and (len(trials) >= search.trials or exhausted)
    if not over:
        status["state"] = "Running" if running else "Created"
        return
    counts = f"{len(succeeded)} succeeded, {len(failed)} failed"
    if best is None:
        last = failed[-1].message if failed else "no trial ran"
        message = f"all {len(trials)} trials failed, so there is no result; the last: {last}"
        _finish(status, trainer.FAILED, trainer.ALL_TRIALS_FAILED_REASON, message, now, events)
        return
    found = f"the best is {best.name} with {search.metric}={best.value}"
    if len(trials) >= search.trials:
        message = f"OptimizationJob ran its {len(trials)} trials ({counts}); {found}"
        _finish(status, trainer.COMPLETE, trainer.MAX_TRIALS_REACHED_REASON, message, now, events)
    else:
        message = f"the search space has no point left after {len(trials)} trials ({counts}); {found}"
        _finish(status, trainer.COMPLETE, trainer.SEARCH_SPACE_EXHAUSTED_REASON, message, now, events)


def _finish(status: Obj, type_: str, reason: str, message: str, now: str, events: list[Event]) -> None:
    status["state"] = type_
    set_condition(status, type_, "True", reason, message, now)
    events.append(Event.warning(reason, message) if type_ == trainer.FAILED else Event.normal(reason, message))


def _trial_events(old: Obj, trials: Sequence[Trial], metric: str) -> list[Event]:
    """One event per trial that finished since the status was written."""
    before = {str(r.get("name")): r.get("state") for r in old.get("trials") or [] if isinstance(r, dict)}
    events = []
    for t in trials:
        if t.state == RUNNING or before.get(t.name) == t.state:
            continue
        if t.state == COMPLETE:
            events.append(Event.normal("TrialSucceeded", f"Trial {t.name} finished: {metric}={t.value}"))
        else:
            events.append(Event.warning("TrialFailed", t.message))
    return events
