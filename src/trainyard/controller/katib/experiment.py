"""The Experiment reconciler: a pure function from an Experiment, its Suggestion and Trials to a plan.

Katib's experiment and suggestion controllers in one pass, level-triggered:

* the **trials summary** (``status.trials``, the per-state lists and counts) and
  ``currentOptimalTrial``: the trial whose objective (by its metric strategy) is best, first in
  suggestion order on ties, as Katib's ``updateTrialsSummary``;
* the **verdict**, in Katib's order: goal reached, ``maxFailedTrialCount`` failed (Failed,
  ``ExperimentFailed``), ``maxTrialCount`` finished, the search space used up (a grid);
* while it runs, **how many trials**: ``parallelTrialCount`` active at most, ``maxTrialCount`` in
  all; more active than allowed (the count was lowered) deletes the newest;
* the **Suggestion**: created with the Experiment's algorithm, its ``spec.requests`` the number
  of parameter sets wanted so far; the missing ones come from the search (``controller.search``,
  Optuna) and are appended to its ``status.suggestions``, each with its deterministic trial name
  and, under ``medianstop``, the early-stopping rule the finished trials give;
* the **Trials**: one per assignment that has none yet, made from ``trialTemplate``.

A finished Experiment whose ``resumePolicy`` is ``LongRunning`` or ``FromVolume`` restarts when
``maxTrialCount`` is raised (Katib's ``Restarting``). New assignments are written into the
Suggestion before their Trials are created: a pass that dies between the two makes the same
Trials next time, and a Trial is never suggested twice (the history is the Suggestion's list).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from trainyard.api import katib
from trainyard.api.katib.templates import TemplateError
from trainyard.api.meta import Obj, format_time
from trainyard.controller.katib.conditions import is_true, mark
from trainyard.controller.katib.template import render, trial
from trainyard.controller.search import Algorithm, Direction, PastTrial, TrialState, medianstop
from trainyard.controller.search.metrics import objective_value
from trainyard.controller.search.space import from_katib
from trainyard.controller.search.suggest import seed_of, suggest, trial_name
from trainyard.kit.plans import Event

FINISHED = (katib.SUCCEEDED, katib.FAILED)
# A Trial's state, in the order Katib tests it (a Trial may carry several True conditions).
TRIAL_STATES = (
    (katib.KILLED, "killedTrialList", "trialsKilled"),
    (katib.FAILED, "failedTrialList", "trialsFailed"),
    (katib.SUCCEEDED, "succeededTrialList", "trialsSucceeded"),
    (katib.EARLY_STOPPED, "earlyStoppedTrialList", "trialsEarlyStopped"),
    (katib.RUNNING, "runningTrialList", "trialsRunning"),
    (katib.METRICS_UNAVAILABLE, "metricsUnavailableTrialList", "trialMetricsUnavailable"),
)
PENDING = ("pendingTrialList", "trialsPending")


@dataclass(frozen=True)
class ExperimentObserved:
    experiment: Obj
    suggestion: Obj | None
    """The Suggestion named like the Experiment and owned by it; None when absent."""
    trials: tuple[Obj, ...]
    """Its Trials (labelled with its name and owned by it)."""
    series: Mapping[str, Sequence[float]]
    """The objective's reported values of each finished trial, by trial name (medianstop reads them)."""
    now: datetime


@dataclass(frozen=True)
class ExperimentPlan:
    suggestion: Obj | None = None
    """The Suggestion to create (no ``resourceVersion``) or replace as read (a new ``spec.requests``)."""
    suggestion_status: Obj | None = None
    """The Suggestion's whole new status (new assignments appended), written before any Trial."""
    create: tuple[Obj, ...] = ()
    """Trials to create."""
    delete: tuple[str, ...] = ()
    """Names of Trials to delete (more active than ``parallelTrialCount``)."""
    status: Obj | None = None
    """The Experiment's whole new status, when it differs."""
    events: tuple[Event, ...] = ()


def trial_state(trial_obj: Obj) -> str:
    """The Trial's state as Katib's summary reads it: a condition type, or "Pending"."""
    status = trial_obj.get("status") or {}
    return next((type_ for type_, _, _ in TRIAL_STATES if is_true(status, type_)), "Pending")


def direction(experiment: Obj) -> Direction:
    kind = str(((experiment.get("spec") or {}).get("objective") or {}).get("type") or "minimize")
    return Direction.MAXIMIZE if kind == Direction.MAXIMIZE else Direction.MINIMIZE


def trial_value(trial_obj: Obj) -> float | None:
    """The Trial's objective value by its metric strategy (Katib's ``getObjectiveMetricValue``)."""
    objective = (trial_obj.get("spec") or {}).get("objective") or {}
    name = str(objective.get("objectiveMetricName") or "")
    strategies = {s.get("name"): s.get("value") for s in objective.get("metricStrategies") or []}
    observation = (trial_obj.get("status") or {}).get("observation")
    if not observation:
        return None
    return objective_value(observation, name, str(strategies.get(name) or "latest"))


def _ordered(observed: ExperimentObserved) -> list[Obj]:
    """The Trials in suggestion order (then by creation), so ties and histories are stable."""
    assigned = [str(a.get("name")) for a in _assignments(observed.suggestion)]
    rank = {name: i for i, name in enumerate(assigned)}
    return sorted(
        observed.trials,
        key=lambda t: (
            rank.get(t["metadata"]["name"], len(rank)),
            str(t["metadata"].get("creationTimestamp")),
            t["metadata"]["name"],
        ),
    )


def _assignments(suggestion: Obj | None) -> list[Obj]:
    return list(((suggestion or {}).get("status") or {}).get("suggestions") or [])


def summarize(experiment: Obj, trials: Sequence[Obj], status: Obj) -> bool:
    """Katib's trials summary into ``status``; whether the objective's goal is reached."""
    for _, listed, counted in (*TRIAL_STATES, (None, *PENDING)):
        status.pop(listed, None)
        status[counted] = 0
    status["trials"] = len(trials)
    objective = (experiment.get("spec") or {}).get("objective") or {}
    goal = objective.get("goal")
    maximize = direction(experiment) == Direction.MAXIMIZE
    best: tuple[float, Obj] | None = None
    reached = False
    for t in trials:
        state = trial_state(t)
        listed, counted = next(((lst, cnt) for type_, lst, cnt in TRIAL_STATES if type_ == state), PENDING)
        status.setdefault(listed, []).append(t["metadata"]["name"])
        status[counted] += 1
        value = trial_value(t)
        if value is None:
            continue
        if best is None or (value > best[0] if maximize else value < best[0]):
            best = (value, t)
        if goal is not None and (best[0] >= float(goal) if maximize else best[0] <= float(goal)):
            reached = True
    if best is not None:
        t = best[1]
        status["currentOptimalTrial"] = {
            "bestTrialName": t["metadata"]["name"],
            "parameterAssignments": copy.deepcopy((t.get("spec") or {}).get("parameterAssignments") or []),
            "observation": copy.deepcopy((t.get("status") or {}).get("observation") or {}),
        }
    return reached


def _restartable(experiment: Obj, status: Obj) -> bool:
    spec = experiment.get("spec") or {}
    succeeded = next((c for c in status.get("conditions") or [] if c.get("type") == katib.SUCCEEDED), None)
    return (
        succeeded is not None
        and succeeded.get("status") == "True"
        and succeeded.get("reason") == katib.MAX_TRIALS_REACHED
        and spec.get("resumePolicy") in (katib.LONG_RUNNING, katib.FROM_VOLUME)
        and spec.get("maxTrialCount") is not None
        and int(spec["maxTrialCount"]) > int(status.get("trials") or 0)
    )


def _verdict(experiment: Obj, status: Obj, reached: bool, exhausted: bool) -> tuple[str, str, str] | None:
    """(condition, reason, message) when the Experiment is done, in Katib's order; None while it runs."""
    spec = experiment.get("spec") or {}
    finished = sum(
        int(status.get(k) or 0)
        for k in ("trialsSucceeded", "trialsFailed", "trialsKilled", "trialsEarlyStopped", "trialMetricsUnavailable")
    )
    failed = int(status.get("trialsFailed") or 0) + int(status.get("trialMetricsUnavailable") or 0)
    active = int(status.get("trialsPending") or 0) + int(status.get("trialsRunning") or 0)
    if reached:
        return katib.SUCCEEDED, katib.GOAL_REACHED, "Experiment has succeeded because Objective goal has reached"
    max_failed = spec.get("maxFailedTrialCount")
    if max_failed is not None and failed and failed >= int(max_failed):
        return katib.FAILED, katib.EXPERIMENT_FAILED, "Experiment has failed because max failed count has reached"
    max_trials = spec.get("maxTrialCount")
    if max_trials is not None and finished >= int(max_trials):
        return katib.SUCCEEDED, katib.MAX_TRIALS_REACHED, "Experiment has succeeded because max trial count has reached"
    if exhausted and active == 0:
        return (
            katib.SUCCEEDED,
            katib.SUGGESTION_END_REACHED,
            "Experiment has succeeded because suggestion service has reached the end",
        )
    return None


def _exhausted(suggestion: Obj | None) -> bool:
    status = (suggestion or {}).get("status") or {}
    found = next((c for c in status.get("conditions") or [] if c.get("type") == katib.SUCCEEDED), None)
    return found is not None and found.get("status") == "True" and found.get("reason") == SUGGESTION_END


SUGGESTION_END = "SuggestionEndReached"
"""The reason of a Suggestion whose algorithm has nothing more to suggest (a grid fully taken)."""


def reconcile(observed: ExperimentObserved) -> ExperimentPlan:
    experiment = observed.experiment
    if experiment["metadata"].get("deletionTimestamp"):
        return ExperimentPlan()
    now = format_time(observed.now)
    old: Obj = experiment.get("status") or {}
    status = copy.deepcopy(old)
    status.setdefault("startTime", now)
    if not status.get("conditions"):
        mark(status, katib.CREATED, "ExperimentCreated", "Experiment is created", now)
    trials = _ordered(observed)
    reached = summarize(experiment, trials, status)
    events: list[Event] = []
    if any(is_true(status, c) for c in FINISHED):
        if not _restartable(experiment, status):
            done = _finish(old, status, events)
            return replace(done, suggestion_status=_suggestion_done(experiment, observed.suggestion, now))
        # As Katib: the verdict goes, Restarting comes (Running follows on the next pass).
        status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") not in FINISHED]
        mark(status, katib.RESTARTING, "ExperimentRestarting", "Experiment is restarted", now)
        status.pop("completionTime", None)
        events.append(Event.normal("ExperimentRestarting", "Experiment is restarted: maxTrialCount was raised"))
    else:
        verdict = _verdict(experiment, status, reached, _exhausted(observed.suggestion))
        if verdict is not None:
            type_, reason, message = verdict
            mark(status, type_, reason, message, now, ends=(katib.RUNNING, katib.RESTARTING))
            status["completionTime"] = now
            events.append(Event.warning(reason, message) if type_ == katib.FAILED else Event.normal(reason, message))
            return _finish(old, status, events)
        mark(status, katib.RUNNING, "ExperimentRunning", "Experiment is running", now, ends=(katib.RESTARTING,))
    plan = _trials(observed, trials, status)
    return ExperimentPlan(
        suggestion=plan.suggestion,
        suggestion_status=plan.suggestion_status,
        create=plan.create,
        delete=plan.delete,
        status=status if status != old else None,
        events=(*events, *plan.events),
    )


def _suggestion_done(experiment: Obj, suggestion: Obj | None, now: str) -> Obj | None:
    """A finished Experiment's Suggestion marked Succeeded, as Katib's cleanup does under ``Never``
    and ``FromVolume`` (``LongRunning`` keeps it running, ready for more trials); None: as it is."""
    policy = (experiment.get("spec") or {}).get("resumePolicy") or katib.NEVER_RESUME
    status = copy.deepcopy((suggestion or {}).get("status") or {})
    if suggestion is None or policy not in (katib.NEVER_RESUME, katib.FROM_VOLUME) or is_true(status, katib.SUCCEEDED):
        return None
    message = (
        "Suggestion is succeeded, can't be restarted"
        if policy == katib.NEVER_RESUME
        else "Suggestion is succeeded, can be restarted"
    )
    mark(status, katib.SUCCEEDED, "Experiment is succeeded", message, now, ends=(katib.RUNNING,))
    status.setdefault("completionTime", now)
    return status


def _finish(old: Obj, status: Obj, events: list[Event]) -> ExperimentPlan:
    return ExperimentPlan(status=status if status != old else None, events=tuple(events))


def _trials(observed: ExperimentObserved, trials: Sequence[Obj], status: Obj) -> ExperimentPlan:
    """How many Trials to add or delete, the Suggestion's requests and new assignments, the Trials."""
    experiment = observed.experiment
    spec = experiment.get("spec") or {}
    parallel = int(spec.get("parallelTrialCount") or 3)
    active_names = [*(status.get("pendingTrialList") or []), *(status.get("runningTrialList") or [])]
    active = len(active_names)
    finished = len(trials) - active
    if active > parallel:
        # The newest go first, as Katib's deleteTrials.
        newest = sorted(
            (t for t in trials if t["metadata"]["name"] in active_names),
            key=lambda t: str(t["metadata"].get("creationTimestamp")),
            reverse=True,
        )
        doomed = tuple(t["metadata"]["name"] for t in newest[: active - parallel])
        return _dropped(observed.suggestion, doomed)
    max_trials = spec.get("maxTrialCount")
    wanted = parallel if max_trials is None else min(int(max_trials) - finished, parallel)
    add = max(wanted - active, 0)
    # An early-stopped trial without an observation is run again under its name (Katib's count).
    requests = (
        len(trials)
        + add
        - sum(
            1
            for t in trials
            if trial_state(t) == katib.EARLY_STOPPED and not (t.get("status") or {}).get("observation")
        )
    )
    suggestion = observed.suggestion
    if suggestion is None:
        return ExperimentPlan(suggestion=new_suggestion(experiment, requests))
    out_suggestion: Obj | None = None
    if int((suggestion.get("spec") or {}).get("requests") or 0) != requests:
        out_suggestion = copy.deepcopy(suggestion)
        out_suggestion["spec"]["requests"] = requests
    assignments = _assignments(suggestion)
    new_status: Obj | None = None
    missing = requests - len(assignments)
    if missing > 0 and not _exhausted(suggestion):
        new_status = _suggested(observed, trials, suggestion, missing)
        assignments = list(new_status.get("suggestions") or [])
    creating, events = _new_trials(experiment, assignments, {t["metadata"]["name"] for t in trials}, add)
    return ExperimentPlan(suggestion=out_suggestion, suggestion_status=new_status, create=creating, events=events)


def _new_trials(
    experiment: Obj, assignments: Sequence[Obj], have: set[str], add: int
) -> tuple[tuple[Obj, ...], tuple[Event, ...]]:
    """Up to ``add`` Trials for the assignments that have none yet, in suggestion order."""
    creating: list[Obj] = []
    for assignment in assignments:
        if len(creating) >= add:
            break
        name = str(assignment.get("name"))
        if name in have:
            continue
        values = {str(p.get("name")): str(p.get("value")) for p in assignment.get("parameterAssignments") or []}
        try:
            job = render(experiment, name, values)
        except TemplateError as exc:
            return tuple(creating), (Event.warning("TrialTemplateInvalid", str(exc)),)
        creating.append(trial(experiment, assignment, job))
    return tuple(creating), ()


def _dropped(suggestion: Obj | None, doomed: tuple[str, ...]) -> ExperimentPlan:
    """Delete ``doomed`` Trials, their assignments gone from the Suggestion first (or they would be
    made again), its ``spec.requests`` lowered to match."""
    if suggestion is None:
        return ExperimentPlan(delete=doomed)
    status = copy.deepcopy(suggestion.get("status") or {})
    status["suggestions"] = [a for a in _assignments(suggestion) if a.get("name") not in doomed]
    status["suggestionCount"] = len(status["suggestions"])
    replaced = copy.deepcopy(suggestion)
    replaced["spec"]["requests"] = len(status["suggestions"])
    return ExperimentPlan(suggestion=replaced, suggestion_status=status, delete=doomed)


def new_suggestion(experiment: Obj, requests: int) -> Obj:
    spec = experiment.get("spec") or {}
    body: Obj = {
        "apiVersion": katib.API_VERSION,
        "kind": katib.SUGGESTION,
        "metadata": {
            "name": experiment["metadata"]["name"],
            "namespace": experiment["metadata"]["namespace"],
            "labels": {katib.EXPERIMENT_LABEL: experiment["metadata"]["name"]},
        },
        "spec": {
            "algorithm": copy.deepcopy(spec.get("algorithm") or {}),
            "requests": requests,
            "resumePolicy": spec.get("resumePolicy") or katib.NEVER_RESUME,
        },
    }
    if spec.get("earlyStopping"):
        body["spec"]["earlyStopping"] = copy.deepcopy(spec["earlyStopping"])
    return body


def _settings(spec: Obj | None) -> dict[str, str]:
    return {str(s.get("name")): str(s.get("value")) for s in (spec or {}).get("algorithmSettings") or []}


def history(suggestion: Obj, trials: Sequence[Obj]) -> list[PastTrial]:
    """Every assignment so far, in order, with what became of its Trial."""
    by_name = {t["metadata"]["name"]: t for t in trials}
    past = []
    for assignment in _assignments(suggestion):
        values = {str(p.get("name")): str(p.get("value")) for p in assignment.get("parameterAssignments") or []}
        found = by_name.get(str(assignment.get("name")))
        state, value = TrialState.RUNNING, None
        if found is not None:
            kind = trial_state(found)
            value = trial_value(found)
            if kind == katib.SUCCEEDED and value is not None:
                state = TrialState.COMPLETE
            elif kind == katib.EARLY_STOPPED and value is not None:
                state = TrialState.PRUNED
            elif kind in (katib.FAILED, katib.KILLED, katib.METRICS_UNAVAILABLE, katib.SUCCEEDED):
                state, value = TrialState.FAILED, None
        past.append(PastTrial(values, state, value))
    return past


def _suggested(observed: ExperimentObserved, trials: Sequence[Obj], suggestion: Obj, count: int) -> Obj:
    """The Suggestion's new status: ``count`` more assignments from the search, or its end."""
    experiment = observed.experiment
    spec = experiment.get("spec") or {}
    now = format_time(observed.now)
    status = copy.deepcopy(suggestion.get("status") or {})
    status.setdefault("startTime", now)
    uid = str(experiment["metadata"].get("uid") or experiment["metadata"]["name"])
    algorithm_spec = spec.get("algorithm") or {}
    settings = _settings(algorithm_spec)
    # Without Katib's random_state, each Experiment draws its own sequence, the same on every pass.
    seed = None if "random_state" in settings else seed_of(uid)
    algorithm = Algorithm(str(algorithm_spec.get("algorithmName") or "random"), settings, seed)
    past = history(suggestion, trials)
    result = suggest(from_katib(list(spec.get("parameters") or [])), algorithm, direction(experiment), past, count)
    rules = _rules(observed, trials)
    assignments = list(status.get("suggestions") or [])
    # A name is never reused: not an assignment's, nor a Trial's still being deleted.
    taken = {str(a.get("name")) for a in assignments} | {t["metadata"]["name"] for t in trials}
    index = len(past)
    for values in result.assignments:
        name = trial_name(experiment["metadata"]["name"], str(experiment["metadata"].get("uid") or ""), index)
        while name in taken:
            index += 1
            name = trial_name(experiment["metadata"]["name"], str(experiment["metadata"].get("uid") or ""), index)
        taken.add(name)
        entry: Obj = {
            "name": name,
            "parameterAssignments": [{"name": k, "value": v} for k, v in values.items()],
        }
        if rules:
            entry["earlyStoppingRules"] = copy.deepcopy(rules)
        assignments.append(entry)
    status["suggestions"] = assignments
    status["suggestionCount"] = len(assignments)
    if not status.get("conditions"):
        mark(status, katib.CREATED, "SuggestionCreated", "Suggestion is created", now)
    if result.exhausted and len(result.assignments) < count:
        mark(
            status,
            katib.SUCCEEDED,
            SUGGESTION_END,
            "Suggestion has reached the end of the search space",
            now,
            ends=(katib.RUNNING,),
        )
    else:
        # A Suggestion that a finished Experiment marked Succeeded runs again when it restarts.
        mark(status, katib.RUNNING, "SuggestionRunning", "Suggestion is running", now, ends=(katib.SUCCEEDED,))
        status.pop("completionTime", None)
    return status


def _rules(observed: ExperimentObserved, trials: Sequence[Obj]) -> list[Obj]:
    """The early-stopping rules a new trial gets: medianstop's, from the trials that succeeded."""
    spec = observed.experiment.get("spec") or {}
    early = spec.get("earlyStopping") or {}
    if early.get("algorithmName") != "medianstop":
        return []
    objective = str((spec.get("objective") or {}).get("objectiveMetricName") or "")
    completed = [
        observed.series[t["metadata"]["name"]]
        for t in trials
        if trial_state(t) == katib.SUCCEEDED and t["metadata"]["name"] in observed.series
    ]
    rule = medianstop.rule(objective, direction(observed.experiment), completed, _settings(early))
    if rule is None:
        return []
    return [{"name": rule.name, "value": repr(rule.value), "comparison": rule.comparison, "startStep": rule.start_step}]
