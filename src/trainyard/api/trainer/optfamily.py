"""The OptimizationJob family: Kubeflow Trainer's hyperparameter search, as ``yard`` and the SDK read it.

Its own family row, not one more kind of the TrainJob family: an OptimizationJob has no pods or
nodes of its own (its trials are TrainJobs, each read as a TrainJob), and its columns are the
search's: OBJECTIVE, ALGORITHM, TRIALS (finished of ``numTrials``), RUNNING, BEST. STATE is
trainyard's ``status.state`` (``optimizationjob``'s status additions), else read from the conditions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from trainyard.api import jobshapes, searchview, trainer
from trainyard.api.family import Family, FamilyKind
from trainyard.api.jobshapes import JobSample
from trainyard.api.jobview import JobView, job_age, spec_of, status_of, true_conditions
from trainyard.api.meta import Obj
from trainyard.api.searchview import SearchView, TrialJob, TrialRow, Trials
from trainyard.api.trainer import optimizationjob

NAME = "optimizationjobs"


def optimizationjob_state(job: Obj) -> str:
    written = status_of(job).get("state")
    if written:
        return str(written)
    true = true_conditions(job)
    return next((t for t in (trainer.FAILED, trainer.COMPLETE) if t in true), "Created")


def objective(job: Obj) -> str:
    """``loss (min)``: the objective's metric and its direction."""
    found = (spec_of(job).get("objectives") or [{}])[0]
    direction = str(found.get("direction") or "Minimize")
    return f"{found.get('metric', '-')} ({direction[:3].lower()})"


def algorithm(job: Obj) -> str:
    chosen = spec_of(job).get("searchAlgorithm") or {"random": {}}
    name = next((key for key in optimizationjob.ALGORITHMS if key in chosen), "-")
    seed = (chosen.get("random") or {}).get("seed")
    return f"{name} (seed {seed})" if seed is not None else name


def trials(job: Obj) -> str:
    """``3/4``: trials finished (succeeded or failed) of ``numTrials``."""
    status = status_of(job)
    done = int(status.get("trialsSucceeded") or 0) + int(status.get("trialsFailed") or 0)
    return f"{done}/{spec_of(job).get('numTrials', 1)}"


def count(key: str) -> Callable[[Obj], str]:
    return lambda job: str(status_of(job).get(key) or 0)


def best(job: Obj) -> str:
    return str(status_of(job).get("bestValue") or "-")


def best_trial(job: Obj) -> str:
    return str((status_of(job).get("result") or {}).get("trainJobName") or "-")


def fields(job: Obj) -> list[tuple[str, str]]:
    spec = spec_of(job)
    out = [
        ("Objective", objective(job)),
        ("Algorithm", algorithm(job)),
        ("Trials", f"{spec.get('numTrials', 1)}, {spec.get('parallelTrials', 1)} at a time"),
        (
            "Runtime",
            str(((spec.get("trainJobTemplate") or {}).get("spec") or {}).get("runtimeRef", {}).get("name", "-")),
        ),
    ]
    result = status_of(job).get("result") or {}
    if result:
        chosen = ", ".join(f"{p.get('name')}={p.get('value')}" for p in result.get("parameters") or [])
        out.append(("Best trial", f"{result.get('trainJobName')}: {best(job)} ({chosen})"))
    return out


def sections(job: Obj) -> list[tuple[str, list[str], list[list[str]]]]:
    """``yard describe``'s Trials table: each trial TrainJob, its parameters, state and value."""
    rows = [
        [
            str(t.get("name", "")),
            str(t.get("state", "")),
            str(t.get("value") or "-"),
            ", ".join(f"{p.get('name')}={p.get('value')}" for p in t.get("parameters") or []),
        ]
        for t in status_of(job).get("trials") or []
    ]
    return [("Trials", ["NAME", "STATE", "VALUE", "PARAMETERS"], rows)]


def _assigned(found: Any) -> dict[str, str]:
    return {str(p.get("name")): str(p.get("value")) for p in found or [] if isinstance(p, dict)}


def search_trials(job: Obj, owned: Sequence[Obj] = ()) -> Trials:
    """``status.trials`` as the dashboard shows them: each a TrainJob whose recorded training points
    are its curve (the objective is read from its ``trainerStatus``)."""
    found = (spec_of(job).get("objectives") or [{}])[0]
    rows = tuple(
        TrialRow(
            name=str(t.get("name", "")),
            state=str(t.get("state", "")),
            parameters=_assigned(t.get("parameters")),
            value=searchview.number(t.get("value")),
            message=str(t.get("message") or ""),
            job=TrialJob(kind=trainer.TRAINJOB, name=str(t.get("name", ""))),
        )
        for t in status_of(job).get("trials") or []
        if isinstance(t, dict)
    )
    return Trials(
        metric=str(found.get("metric") or ""),
        goal=searchview.MAXIMIZE if found.get("direction") == "Maximize" else searchview.MINIMIZE,
        parameters=tuple(str(p.get("name")) for p in spec_of(job).get("parameters") or [] if isinstance(p, dict)),
        best=str((status_of(job).get("result") or {}).get("trainJobName") or "") or None,
        rows=rows,
    )


def best_value(job: Obj) -> dict[str, float]:
    value = searchview.number(status_of(job).get("bestValue"))
    metric = str((spec_of(job).get("objectives") or [{}])[0].get("metric") or "")
    return {metric: value} if value is not None else {}


VIEW = JobView(
    family="Kubeflow Trainer v2 (OptimizationJob)",
    state=optimizationjob_state,
    succeeded=trainer.COMPLETE,
    # No pod of its own carries this label: its trials' pods are their TrainJobs' (read those).
    pod_labels=lambda name: {trainer.OPTIMIZATIONJOB_LABEL: name},
    summary=trials,
    wanted=lambda job: [],
    columns=(
        ("OBJECTIVE", objective),
        ("ALGORITHM", algorithm),
        ("TRIALS", trials),
        ("RUNNING", count("trialsRunning")),
        ("BEST", best),
        ("AGE", job_age),
    ),
    wide_columns=(("FAILED", count("trialsFailed")), ("BEST TRIAL", best_trial)),
    owned_pods_only=False,
    fields=fields,
    sections=sections,
    replicas_title="Pods",  # none of its own: its trials' are their TrainJobs'
    handled=lambda job: bool(status_of(job)),
    suspend_field=None,  # upstream's OptimizationJob has no suspend
    search=SearchView(read=search_trials, best=best_value),
)


def sample(job: Obj) -> JobSample:
    """The per-job metrics' reading: the state, and progress as the share of ``numTrials`` finished."""
    status = status_of(job)
    state = jobshapes.word(status.get("state"), "Created")
    total = spec_of(job).get("numTrials", 1)
    done = int(status.get("trialsSucceeded") or 0) + int(status.get("trialsFailed") or 0)
    finished, reason = jobshapes.ended(status, state)
    return JobSample(
        state=state,
        progress=100.0 * done / total if isinstance(total, int) and total > 0 else None,
        finished=finished,
        failure_reason=reason,
    )


FAMILY = Family(
    name=NAME,
    kinds=lambda: (
        FamilyKind(
            kind=trainer.OPTIMIZATIONJOB,
            plural=trainer.OPTIMIZATIONJOBS,
            singular=trainer.OPTIMIZATIONJOB.lower(),
            group=trainer.GROUP,
            version=trainer.VERSION,
        ),
    ),
    crds=lambda: [optimizationjob.crd()],
    view=VIEW,
    sample=sample,
)
