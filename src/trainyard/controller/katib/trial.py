"""The Trial reconciler: a pure function from a Trial, its job and its collected metrics to a plan.

As Katib's trial controller, level-triggered:

* no job yet: create ``spec.runSpec`` (named like the Trial, owned by it); a job that vanishes
  before the Trial finished (deleted by hand) ends the Trial ``Killed``;
* the job's ``failureCondition`` holds: ``Failed``, with the job's reason and message;
* its ``successCondition`` holds: ``Succeeded`` with ``status.observation`` from the metrics
  collected, or ``MetricsUnavailable`` when the objective was never reported;
* while it runs: ``Running``; a value that breaks one of ``spec.earlyStoppingRules`` (medianstop's,
  from the Suggestion) ends it ``EarlyStopped`` with the observation so far, and its job is deleted
  (that is what stops the training);
* once finished, the job is deleted unless ``retainRun``.

``status.observationLog`` (trainyard's addition, Katib's ObservationLog shape) holds the values
collected so far, so a trial's curves can be drawn from the API. The metrics (``MetricValue`` rows
in report order) are what the shell collected: the primary
container's output (StdOut, File) or the job's own reported status (Push); see ``operator.katib``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from trainyard.api import katib
from trainyard.api.katib.conditions import holds
from trainyard.api.meta import Obj, format_time
from trainyard.controller.katib.conditions import is_true, mark
from trainyard.controller.search import EarlyStoppingRule, MetricValue, medianstop
from trainyard.controller.search.metrics import observation
from trainyard.kit.plans import Event

ENDED = (katib.SUCCEEDED, katib.FAILED, katib.METRICS_UNAVAILABLE, katib.EARLY_STOPPED, katib.KILLED)
LOG_LIMIT = 1000
"""The most values ``status.observationLog`` keeps (the latest); the observation store keeps all."""
RECHECK_SECONDS = 2.0
"""How often a running Trial with early-stopping rules reads its metrics again."""


@dataclass(frozen=True)
class TrialObserved:
    trial: Obj
    job: Obj | None
    """The Trial's job (``runSpec``'s kind, named like the Trial, owned by it); None when absent."""
    values: tuple[MetricValue, ...]
    """Every value collected for the Trial so far, in report order."""
    now: datetime


@dataclass(frozen=True)
class TrialPlan:
    create: Obj | None = None
    """The job to create."""
    delete: bool = False
    """Delete the job (stopped early, or finished and not retained)."""
    status: Obj | None = None
    events: tuple[Event, ...] = ()
    requeue: float | None = None


def metric_names(trial: Obj) -> list[str]:
    objective = (trial.get("spec") or {}).get("objective") or {}
    names = [str(objective.get("objectiveMetricName") or "")]
    return [*names, *(str(n) for n in objective.get("additionalMetricNames") or [] if n not in names)]


def rules(trial: Obj) -> list[EarlyStoppingRule]:
    return [
        EarlyStoppingRule(
            str(r.get("name")), float(r.get("value")), str(r.get("comparison") or "less"), int(r.get("startStep") or 0)
        )
        for r in (trial.get("spec") or {}).get("earlyStoppingRules") or []
    ]


def finished(trial: Obj) -> bool:
    status = trial.get("status") or {}
    return any(is_true(status, c) for c in ENDED)


def _job_words(job: Obj) -> tuple[str, str]:
    """The reason and message of the job's latest True condition (what Katib quotes)."""
    true = [c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"]
    last = true[-1] if true else {}
    return str(last.get("reason") or ""), str(last.get("message") or "")


def _quoted(base_reason: str, base_message: str, job: Obj) -> tuple[str, str]:
    reason, message = _job_words(job)
    return (
        f"{base_reason}. Job reason: {reason}" if reason else base_reason,
        f"{base_message}. Job message: {message}" if message else base_message,
    )


def _available(obs: Obj, name: str) -> bool:
    found = next((m for m in obs.get("metrics") or [] if m.get("name") == name), None)
    return found is not None and found.get("latest") not in (None, "", katib.UNAVAILABLE_METRIC_VALUE)


def reconcile(observed: TrialObserved) -> TrialPlan:
    t = observed.trial
    if t["metadata"].get("deletionTimestamp"):
        return TrialPlan()
    spec = t.get("spec") or {}
    job = observed.job
    if finished(t):
        gone = job is None or bool(job["metadata"].get("deletionTimestamp"))
        return TrialPlan(delete=not gone and not spec.get("retainRun"))
    now = format_time(observed.now)
    old: Obj = t.get("status") or {}
    status = copy.deepcopy(old)
    if not status.get("conditions"):
        mark(status, katib.CREATED, "TrialCreated", "Trial is created", now)
    name = t["metadata"]["name"]
    if job is None:
        if status.get("startTime"):
            mark(
                status,
                katib.KILLED,
                "TrialKilled",
                f"the Trial's job {name} was deleted before it finished",
                now,
                ends=(katib.RUNNING,),
            )
            status["completionTime"] = now
            return _plan(old, status, [Event.warning("JobDeleted", f"Job {name} has been deleted")])
        status["startTime"] = now
        run = copy.deepcopy(spec.get("runSpec") or {})
        return _plan(old, status, [Event.normal("JobCreated", f"Job {name} has been created")], create=run)
    return _outcome(observed, job, status, old)


def observation_log(values: Sequence[MetricValue]) -> Obj:
    """Katib's ObservationLog of the values collected (the latest ``LOG_LIMIT``)."""
    return {
        "metricLogs": [
            {"timeStamp": v.timestamp or "", "metric": {"name": v.name, "value": repr(v.value)}}
            for v in values[-LOG_LIMIT:]
        ]
    }


def _outcome(observed: TrialObserved, job: Obj, status: Obj, old: Obj) -> TrialPlan:
    """What the running job's conditions and the metrics so far make of the Trial."""
    t = observed.trial
    if observed.values:
        status["observationLog"] = observation_log(observed.values)
    spec = t.get("spec") or {}
    name = t["metadata"]["name"]
    now = format_time(observed.now)
    events: list[Event] = []
    names = metric_names(t)
    values = observed.values
    if spec.get("failureCondition") and holds(str(spec["failureCondition"]), job):
        reason, message = _quoted("TrialFailed", "Trial has failed", job)
        mark(status, katib.FAILED, reason, message, now, ends=(katib.RUNNING,))
        status["completionTime"] = now
        return _ended(old, status, spec, [Event.normal("JobFailed", f"Job {name} has failed")])
    if spec.get("successCondition") and holds(str(spec["successCondition"]), job):
        obs = observation(values, names)
        status["observation"] = obs
        status["completionTime"] = now
        if _available(obs, names[0]):
            reason, message = _quoted("TrialSucceeded", "Trial has succeeded", job)
            mark(status, katib.SUCCEEDED, reason, message, now, ends=(katib.RUNNING,))
            events.append(Event.normal("JobSucceeded", f"Job {name} has succeeded"))
        else:
            reason, message = _quoted("MetricsUnavailable", "Metrics are not available", job)
            mark(status, katib.METRICS_UNAVAILABLE, reason, message, now, ends=(katib.RUNNING,))
            events.append(
                Event.warning(
                    "MetricsUnavailable",
                    f"Metrics are not available for Job {name}: report {names[0]} as the metrics collector reads it",
                )
            )
        return _ended(old, status, spec, events)
    broken = _broken(t, values)
    if broken is not None:
        status["observation"] = observation(values, names)
        status["completionTime"] = now
        message = (
            f"Trial is early stopped: {broken.name} {broken.comparison} than {broken.value:g} "
            f"after {broken.start_step} reports (medianstop)"
        )
        mark(status, katib.EARLY_STOPPED, "TrialEarlyStopped", message, now, ends=(katib.RUNNING,))
        return _plan(old, status, [Event.normal("TrialEarlyStopped", message)], delete=True)
    if not is_true(status, katib.RUNNING):
        mark(status, katib.RUNNING, "TrialRunning", "Trial is running", now)
        events.append(Event.normal("JobRunning", f"Job {name} is running"))
    requeue = RECHECK_SECONDS if spec.get("earlyStoppingRules") else None
    return _plan(old, status, events, requeue=requeue)


def _broken(trial: Obj, values: Sequence[MetricValue]) -> EarlyStoppingRule | None:
    for rule in rules(trial):
        series = [v.value for v in values if v.name == rule.name]
        if medianstop.breaks(rule, series):
            return rule
    return None


def _ended(old: Obj, status: Obj, spec: Obj, events: list[Event]) -> TrialPlan:
    return _plan(old, status, events, delete=not spec.get("retainRun"))


def _plan(
    old: Obj,
    status: Obj,
    events: list[Event],
    *,
    create: Obj | None = None,
    delete: bool = False,
    requeue: float | None = None,
) -> TrialPlan:
    return TrialPlan(
        create=create, delete=delete, status=status if status != old else None, events=tuple(events), requeue=requeue
    )


def unsupported(trial: Obj, message: str, now: datetime) -> Obj:
    """The status of a Trial whose job kind cannot run here: Failed, saying why."""
    status = copy.deepcopy(trial.get("status") or {})
    at = format_time(now)
    mark(status, katib.FAILED, "TrialFailed", message, at, ends=(katib.RUNNING,))
    status["completionTime"] = at
    return status
