"""The Experiment family: Katib's Experiment, with its Suggestions' and Trials' CRDs, as ``yard`` reads it.

An Experiment is a job of jobs: its STATE is its last True condition (Created, Running,
Restarting, Succeeded, Failed, as Katib's controller appends them); its columns are the search's
(algorithm, trials succeeded of the budget, running, failed, the best objective value so far).
Its pods are its trials' jobs' pods, selected by ``katib.kubeflow.org/experiment``: Katib labels
each Trial and its job with it, and trainyard's Trial controller puts it (with
``katib.kubeflow.org/trial``) on the job's pod templates too, so ``yard logs`` finds them; they
are owned by the trial jobs, not the Experiment. Suggestions and Trials are served (their CRDs
are the family's) but are no jobs of their own in ``yard``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainyard.api import jobshapes, katib, searchview
from trainyard.api.family import Family, FamilyKind
from trainyard.api.jobshapes import JobSample
from trainyard.api.jobview import JobView, conditions, job_age, spec_of, status_of
from trainyard.api.katib.defaults import metric_strategy
from trainyard.api.meta import Obj
from trainyard.api.searchview import SearchView, TrialJob, TrialKind, TrialRow, Trials

NAME = "experiments"
TRIAL_LISTS = (
    ("running", katib.RUNNING),
    ("pending", "Pending"),
    ("succeeded", katib.SUCCEEDED),
    ("failed", katib.FAILED),
    ("killed", katib.KILLED),
    ("earlyStopped", katib.EARLY_STOPPED),
    ("metricsUnavailable", katib.METRICS_UNAVAILABLE),
)


def experiment_state(job: Obj) -> str:
    """The type of the last True condition; ``Created`` before the controller wrote one."""
    true = [str(c.get("type")) for c in conditions(job) if c.get("status") == "True"]
    return true[-1] if true else katib.CREATED


def _count(job: Obj, key: str) -> int:
    value = status_of(job).get(key)
    return value if isinstance(value, int) else 0


FINISHED_COUNTS = ("trialsSucceeded", "trialsFailed", "trialsKilled", "trialsEarlyStopped", "trialMetricsUnavailable")
"""The trials that count towards ``maxTrialCount`` (Katib's, stopped early ones included)."""


def trials_cell(job: Obj) -> str:
    """Finished trials of the budget: ``5/16`` (``5/-`` without ``maxTrialCount``); FAILED says how many failed."""
    most = spec_of(job).get("maxTrialCount")
    done = sum(_count(job, key) for key in FINISHED_COUNTS)
    return f"{done}/{most if isinstance(most, int) else '-'}"


def algorithm_of(job: Obj) -> str:
    return str((spec_of(job).get("algorithm") or {}).get("algorithmName") or "-")


def objective_value(job: Obj, metric: Obj) -> str | None:
    """A metric's value as the objective's strategy reads it (min, max or latest)."""
    objective = spec_of(job).get("objective") or {}
    strategies = {s.get("name"): s.get("value") for s in objective.get("metricStrategies") or [] if isinstance(s, dict)}
    how = strategies.get(metric.get("name")) or metric_strategy(objective.get("type"))
    value = metric.get(how)
    return None if value in (None, "", katib.UNAVAILABLE_METRIC_VALUE) else str(value)


def best_metric(job: Obj) -> tuple[str, str] | None:
    """The objective's name and best value in ``status.currentOptimalTrial``; None before a trial reported it."""
    name = str((spec_of(job).get("objective") or {}).get("objectiveMetricName") or "")
    best = status_of(job).get("currentOptimalTrial") or {}
    for metric in (best.get("observation") or {}).get("metrics") or []:
        if isinstance(metric, dict) and metric.get("name") == name:
            value = objective_value(job, metric)
            if value is not None:
                return name, value
    return None


def best_cell(job: Obj) -> str:
    """``loss=0.031`` of ``status.currentOptimalTrial``; ``-`` before a trial reported it."""
    found = best_metric(job)
    return f"{found[0]}={found[1]}" if found else "-"


def summary(job: Obj) -> str:
    return f"{trials_cell(job)} trials"


def _space(space: Obj) -> str:
    if space.get("list"):
        return ", ".join(str(v) for v in space["list"])
    step = f" step {space['step']}" if space.get("step") else ""
    return f"[{space.get('min', '?')}, {space.get('max', '?')}]{step}"


def fields(job: Obj) -> list[tuple[str, str]]:
    """``yard describe``'s summary of an Experiment's spec and its best trial."""
    spec = spec_of(job)
    objective = spec.get("objective") or {}
    goal = f", goal {objective['goal']}" if objective.get("goal") is not None else ""
    out = [("Objective", f"{objective.get('type', '?')} {objective.get('objectiveMetricName', '?')}{goal}")]
    if objective.get("additionalMetricNames"):
        out.append(("Also reported", ", ".join(objective["additionalMetricNames"])))
    algorithm = spec.get("algorithm") or {}
    settings = ", ".join(f"{s.get('name')}={s.get('value')}" for s in algorithm.get("algorithmSettings") or [])
    out.append(("Algorithm", algorithm_of(job) + (f" ({settings})" if settings else "")))
    if spec.get("earlyStopping"):
        out.append(("Early stop", str(spec["earlyStopping"].get("algorithmName", "-"))))
    out.append(
        (
            "Trials",
            f"{spec.get('maxTrialCount', '-')} at most, {spec.get('parallelTrialCount', '-')} in parallel, "
            f"{spec.get('maxFailedTrialCount', '-')} may fail",
        )
    )
    trial_spec = (spec.get("trialTemplate") or {}).get("trialSpec") or {}
    out.append(("Trial kind", f"{trial_spec.get('kind', '-')} ({trial_spec.get('apiVersion', '-')})"))
    collector = ((spec.get("metricsCollectorSpec") or {}).get("collector") or {}).get("kind")
    out.append(("Metrics from", str(collector or katib.STDOUT_COLLECTOR)))
    out.append(("Resume", str(spec.get("resumePolicy") or katib.NEVER_RESUME)))
    best = status_of(job).get("currentOptimalTrial") or {}
    if best.get("bestTrialName"):
        out.append(("Best trial", f"{best['bestTrialName']} ({best_cell(job)})"))
    return out


def sections(job: Obj) -> list[tuple[str, list[str], list[list[str]]]]:
    """``yard describe``'s tables: the search space, the best trial's values, the trials by state."""
    params = [
        [
            str(p.get("name", "")),
            str(p.get("parameterType", "")),
            _space(p.get("feasibleSpace") or {}),
            str((p.get("feasibleSpace") or {}).get("distribution") or "uniform"),
        ]
        for p in spec_of(job).get("parameters") or []
        if isinstance(p, dict)
    ]
    out = [("Parameters", ["NAME", "TYPE", "SPACE", "DISTRIBUTION"], params)]
    best = status_of(job).get("currentOptimalTrial") or {}
    assigned = [[str(a.get("name")), str(a.get("value"))] for a in best.get("parameterAssignments") or []]
    if assigned:
        out.append(("Best parameters", ["NAME", "VALUE"], assigned))
    rows: list[list[str]] = []
    for key, state in TRIAL_LISTS:
        rows += [[str(name), state] for name in status_of(job).get(f"{key}TrialList") or []]
    out.append(("Trials", ["NAME", "STATE"], rows))
    return out


def trial_state(trial: Obj) -> str:
    """The Trial's current condition: its last True one (Katib appends them), ``Created`` before any."""
    return experiment_state(trial)


def _curve(trial: Obj, metric: str) -> tuple[float, ...]:
    """The objective's values in ``status.observationLog`` (trainyard's: every value collected, in
    report order), the unavailable ones left out."""
    logs = (status_of(trial).get("observationLog") or {}).get("metricLogs") or []
    named = (m for m in logs if isinstance(m, dict) and (m.get("metric") or {}).get("name") == metric)
    found = (searchview.number((m.get("metric") or {}).get("value")) for m in named)
    return tuple(v for v in found if v is not None)


def trial_row(job: Obj, trial: Obj, metric: str) -> TrialRow:
    spec, status = spec_of(trial), status_of(trial)
    metrics = (status.get("observation") or {}).get("metrics") or []
    value = next(
        (objective_value(job, m) for m in metrics if isinstance(m, dict) and m.get("name") == metric),
        None,
    )
    run = spec.get("runSpec") or {}
    name = str(trial["metadata"].get("name", ""))
    ended = [c for c in conditions(trial) if c.get("status") == "True"]
    return TrialRow(
        name=name,
        state=trial_state(trial),
        parameters={str(a.get("name")): str(a.get("value")) for a in spec.get("parameterAssignments") or []},
        value=searchview.number(value),
        message=str(ended[-1].get("message") or "") if ended else "",
        job=TrialJob(kind=str(run["kind"]), name=name) if run.get("kind") else None,
        curve=_curve(trial, metric),
    )


def trials(job: Obj, owned: Sequence[Obj]) -> Trials:
    """The Experiment's Trials (those it owns), oldest first, its objective and best trial."""
    objective = spec_of(job).get("objective") or {}
    metric = str(objective.get("objectiveMetricName") or "")
    order = sorted(owned, key=lambda t: (str(t["metadata"].get("creationTimestamp") or ""), t["metadata"]["name"]))
    best = (status_of(job).get("currentOptimalTrial") or {}).get("bestTrialName")
    return Trials(
        metric=metric,
        goal=searchview.MAXIMIZE if objective.get("type") == "maximize" else searchview.MINIMIZE,
        parameters=tuple(str(p.get("name")) for p in spec_of(job).get("parameters") or [] if isinstance(p, dict)),
        best=str(best) if best else None,
        rows=tuple(trial_row(job, t, metric) for t in order),
    )


def best_value(job: Obj) -> dict[str, float]:
    found = best_metric(job)
    value = searchview.number(found[1]) if found else None
    return {found[0]: value} if found and value is not None else {}


SEARCH = SearchView(
    read=trials,
    best=best_value,
    trial_kind=TrialKind(group=katib.GROUP, version=katib.VERSION, kind=katib.TRIAL, plural=katib.TRIALS),
)


VIEW = JobView(
    family="Katib Experiment (kubeflow.org/v1beta1)",
    state=experiment_state,
    succeeded=katib.SUCCEEDED,
    pod_labels=lambda name: {katib.EXPERIMENT_LABEL: name},
    summary=summary,
    wanted=lambda job: [],
    columns=(
        ("ALGORITHM", algorithm_of),
        ("TRIALS", trials_cell),
        ("RUNNING", lambda job: str(_count(job, "trialsRunning"))),
        ("FAILED", lambda job: str(_count(job, "trialsFailed"))),
        ("BEST", best_cell),
        ("AGE", job_age),
    ),
    wide_columns=(
        ("PENDING", lambda job: str(_count(job, "trialsPending"))),
        ("EARLY-STOPPED", lambda job: str(_count(job, "trialsEarlyStopped"))),
        ("BEST-TRIAL", lambda job: str((status_of(job).get("currentOptimalTrial") or {}).get("bestTrialName") or "-")),
    ),
    owned_pods_only=False,  # the pods are the trial jobs'
    fields=fields,
    sections=sections,
    replicas_title="Trial pods",
    suspend_field=None,  # Katib's Experiments cannot be suspended
    backoff_field="spec.maxFailedTrialCount",
    deadline_field="the trial jobs' own deadlines",
    search=SEARCH,
)


def sample(job: Obj) -> JobSample:
    """The per-job metrics' reading: the state, progress as succeeded trials of ``maxTrialCount``."""
    status = status_of(job)
    state = jobshapes.word(experiment_state(job), "Pending")
    most: Any = spec_of(job).get("maxTrialCount")
    progress = 100.0 * _count(job, "trialsSucceeded") / most if isinstance(most, int) and most > 0 else None
    finished, reason = jobshapes.ended(status, state)
    return JobSample(
        state=state,
        progress=progress,
        workers=_count(job, "trialsRunning"),
        started=jobshapes.time_of(status.get("startTime")),
        finished=finished,
        failure_reason=reason,
    )


FAMILY = Family(
    name=NAME,
    kinds=lambda: (
        FamilyKind(
            kind=katib.EXPERIMENT,
            plural=katib.EXPERIMENTS,
            singular=katib.EXPERIMENT.lower(),
            group=katib.GROUP,
            version=katib.VERSION,
        ),
    ),
    crds=katib.crds,
    view=VIEW,
    sample=sample,
)
