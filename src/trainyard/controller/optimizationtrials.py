"""An OptimizationJob's trials, pure: read back from its TrainJobs, and the TrainJob each new one is.

The controller keeps no memory of its own (KEP-3562 §7.3): a trial is a TrainJob labelled with
the OptimizationJob's name (``trainer.kubeflow.org/optimizationjob``) and controlled by it (its
uid in the ownerReference), named ``<job>-trial-<index>`` with the index as a label, its
parameters as JSON in an annotation (``trainer.kubeflow.org/parameters``, the raw assignment the
search engine made) and as ``KUBEFLOW_TRAINER_OPT_<NAME>`` env in ``spec.trainer.env``. Its state
is its TrainJob's: Running until a Complete or Failed condition; a Complete one whose
``status.trainerStatus.metrics`` lacks the objective's metric (or holds no number) is a failed
trial to the search, and its message says so. A trial the status lists whose TrainJob is gone
(deleted by hand) keeps its row; one that had not finished counts as failed.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from trainyard.api import trainer
from trainyard.api.meta import Obj
from trainyard.api.trainer.optimizationjob import env_name
from trainyard.controller.search import PastTrial, TrialState
from trainyard.controller.trainjob import condition, is_true

RUNNING, COMPLETE, FAILED = trainer.TRIAL_STATES
_SEARCH_STATES = {RUNNING: TrialState.RUNNING, COMPLETE: TrialState.COMPLETE, FAILED: TrialState.FAILED}


@dataclass(frozen=True)
class Trial:
    index: int
    name: str
    assignments: Mapping[str, str] = field(default_factory=dict)
    """Parameter name → value, in the spec's parameter order."""
    state: str = RUNNING
    value: str | None = None
    """The objective's metric as the trainer reported it (a string, as ``trainerStatus`` holds it)."""
    message: str = ""

    @property
    def number(self) -> float | None:
        return _number(self.value)

    def past(self) -> PastTrial:
        """The trial as the search engine's history holds it."""
        return PastTrial(assignments=dict(self.assignments), state=_SEARCH_STATES[self.state], value=self.number)

    def row(self) -> Obj:
        """Its ``status.trials`` entry."""
        out: Obj = {"name": self.name, "parameters": assignment_list(self.assignments), "state": self.state}
        if self.value is not None:
            out["value"] = self.value
        if self.message:
            out["message"] = self.message
        return out


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def trial_name(job: str, index: int) -> str:
    return f"{job}-trial-{index}"


def assignment_list(assignments: Mapping[str, str]) -> list[Obj]:
    """Upstream's ``[]ParameterAssignment`` shape: ``[{"name": ..., "value": ...}]``."""
    return [{"name": name, "value": value} for name, value in assignments.items()]


def _index(trainjob: Obj) -> int | None:
    text = ((trainjob["metadata"].get("labels") or {}).get(trainer.TRIAL_INDEX_LABEL)) or ""
    return int(text) if text.isdigit() else None


def _assignments(trainjob: Obj) -> dict[str, str]:
    text = (trainjob["metadata"].get("annotations") or {}).get(trainer.PARAMETERS_ANNOTATION) or "[]"
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    rows = found if isinstance(found, list) else []
    return {str(r["name"]): str(r["value"]) for r in rows if isinstance(r, dict) and "name" in r and "value" in r}


def owned(optimizationjob: Obj, trainjobs: Iterable[Obj]) -> list[Obj]:
    """The TrainJobs that are its trials: its label, its uid as controller, an index."""
    m = optimizationjob["metadata"]
    out = []
    for trainjob in trainjobs:
        tm = trainjob["metadata"]
        labelled = (tm.get("labels") or {}).get(trainer.OPTIMIZATIONJOB_LABEL) == m["name"]
        controlled = any(r.get("controller") and r.get("uid") == m.get("uid") for r in tm.get("ownerReferences") or [])
        if labelled and controlled and _index(trainjob) is not None:
            out.append(trainjob)
    return out


def read_trial(trainjob: Obj, metric: str) -> Trial:
    """A trial from its TrainJob as observed."""
    index = _index(trainjob)
    assert index is not None, "owned() keeps only indexed TrainJobs"
    name = trainjob["metadata"]["name"]
    status = trainjob.get("status") or {}
    assignments = _assignments(trainjob)
    if is_true(status, trainer.FAILED):
        found = condition(status, trainer.FAILED) or {}
        why = str(found.get("message") or found.get("reason") or "TrainJob failed")
        return Trial(index, name, assignments, FAILED, message=f"TrainJob {name} failed: {why}")
    if not is_true(status, trainer.COMPLETE):
        return Trial(index, name, assignments, RUNNING)
    reported = {
        str(m.get("name")): m.get("value")
        for m in (status.get("trainerStatus") or {}).get("metrics") or []
        if isinstance(m, dict)
    }
    value = reported.get(metric)
    if value is None or _number(str(value)) is None:
        said = "reported no number for it" if value is not None else "did not report it"
        message = (
            f"TrainJob {name} completed, but its status.trainerStatus.metrics {said}: "
            f"the objective's metric {metric!r} must be reported "
            "(trainyard.runtime.report(metrics={...}) or the SDK's update_trainjob_status); "
            "the search counts the trial as failed"
        )
        return Trial(index, name, assignments, FAILED, str(value) if value is not None else None, message)
    return Trial(index, name, assignments, COMPLETE, str(value))


def _from_row(row: Obj) -> Trial | None:
    name = str(row.get("name") or "")
    suffix = name.rpartition("-trial-")[2]
    if not suffix.isdigit():
        return None
    assignments = {str(p.get("name")): str(p.get("value")) for p in row.get("parameters") or [] if isinstance(p, dict)}
    state, message = str(row.get("state") or RUNNING), str(row.get("message") or "")
    if state not in (COMPLETE, FAILED):
        state, message = FAILED, f"TrainJob {name} was deleted before it finished"
    return Trial(int(suffix), name, assignments, state, row.get("value"), message)


def observe(optimizationjob: Obj, trainjobs: Sequence[Obj], metric: str) -> list[Trial]:
    """Every trial so far, in index order: its TrainJobs', then the status's rows of TrainJobs gone."""
    found = {t.index: t for t in (read_trial(j, metric) for j in owned(optimizationjob, trainjobs))}
    for row in (optimizationjob.get("status") or {}).get("trials") or []:
        gone = _from_row(row) if isinstance(row, dict) else None
        if gone is not None and gone.index not in found:
            found[gone.index] = gone
    return [found[i] for i in sorted(found)]


def trainjob_for(optimizationjob: Obj, index: int, assignments: Mapping[str, str]) -> Obj:
    """The TrainJob of a new trial: the template, its labels and annotation, the parameters as env.

    The caller makes the OptimizationJob its controller (``ownerReferences``), so deleting the
    OptimizationJob deletes its trials.
    """
    template = ((optimizationjob.get("spec") or {}).get("trainJobTemplate")) or {}
    meta = template.get("metadata") or {}
    spec = copy.deepcopy(template.get("spec") or {})
    job = optimizationjob["metadata"]["name"]
    injected = [{"name": env_name(name), "value": value} for name, value in assignments.items()]
    names = {e["name"] for e in injected}
    tr = spec.setdefault("trainer", {})
    tr["env"] = [*(e for e in tr.get("env") or [] if e.get("name") not in names), *injected]
    metadata: Obj = {
        "name": trial_name(job, index),
        "labels": {
            **(meta.get("labels") or {}),
            trainer.OPTIMIZATIONJOB_LABEL: job,
            trainer.TRIAL_INDEX_LABEL: str(index),
        },
        "annotations": {
            **(meta.get("annotations") or {}),
            trainer.PARAMETERS_ANNOTATION: json.dumps(assignment_list(assignments), separators=(",", ":")),
        },
    }
    if meta.get("finalizers"):
        metadata["finalizers"] = list(meta["finalizers"])
    return {"apiVersion": trainer.API_VERSION, "kind": trainer.TRAINJOB, "metadata": metadata, "spec": spec}
