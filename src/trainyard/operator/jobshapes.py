"""What the per-job metrics show of a job object, read from whichever shape its spec and status have.

Three shapes of job reach the operator's metrics, told apart by their spec, never by kind name:

* a replica-spec map (``spec.<x>ReplicaSpecs``, every ``kubeflow.org/v1`` kind): state from the
  conditions, progress from ``status.trainingProgress`` (written by the status server);
* a runtime reference (``spec.runtimeRef``, Trainer v2's TrainJob): state from ``status.state``
  and its conditions, progress from upstream's ``status.trainerStatus`` (metrics as a name/value list);
* a worker count (``spec.numWorkers``, seed 004's TrainingJob): ``status.state``, ``status.progress``
  as ``"45%"``, ``status.currentEpoch`` and ``status.metrics``.

Each shape has one small pure reader returning a ``JobSample``; ``sample`` picks the reader. States
use seed 004's words (Pending, Initializing, Running, Completed, Failed, Suspended) plus v1's
Restarting; upstream's "Succeeded" and Trainer's "Complete" read as Completed. Label values that come
from a status (state, failure reason) are kept only when they look like the CamelCase words
controllers write, so a free-text status cannot blow up label cardinality.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from trainyard.api.meta import parse_time
from trainyard.api.quantity import parse_quantity

Obj = Mapping[str, Any]

GPU = "nvidia.com/gpu"
COMPLETED = "Completed"
FAILED = "Failed"
TERMINAL = frozenset({COMPLETED, FAILED})
IDLE = frozenset({*TERMINAL, "Suspended"})
"""States in which a job holds no replicas: its allocated workers and GPUs read 0."""
SEED_GPUS_PER_WORKER = 1
"""Seed 004's default ``gpusPerWorker``."""

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{0,62}")
_SYNONYMS = {"Succeeded": COMPLETED, "Complete": COMPLETED}


@dataclass(frozen=True)
class JobSample:
    """One job as the per-job series show it; None where its status or spec does not say."""

    state: str
    progress: float | None = None
    epoch: float | None = None
    loss: float | None = None
    accuracy: float | None = None
    workers: int | None = None
    gpus: float | None = None
    started: datetime | None = None
    finished: datetime | None = None
    failure_reason: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL


# -- small readers shared by the shapes ------------------------------------------------------------


def word(value: object, default: str) -> str:
    """A label value from a status string: kept if it is one CamelCase word, else ``default``."""
    text = str(value) if isinstance(value, str) else ""
    text = _SYNONYMS.get(text, text)
    return text if _WORD.fullmatch(text) else default


def number(value: object) -> float | None:
    """A metric value: a number, or a string holding one (``"0.25"``, ``"45%"``); None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value.strip().removesuffix("%"))
        except ValueError:
            return None
    if isinstance(value, int | float) and math.isfinite(value):
        return float(value)
    return None


def time_of(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return parse_time(value)
    except ValueError:
        return None


def true_condition(status: Obj, ctype: str) -> Obj | None:
    return next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, Mapping) and c.get("type") == ctype and c.get("status") == "True"
        ),
        None,
    )


def _gpus(resources: object) -> Decimal:
    limits = (resources or {}).get("limits") if isinstance(resources, Mapping) else None
    try:
        return parse_quantity((limits or {}).get(GPU, 0))
    except ValueError:
        return Decimal(0)


def _ended(status: Obj, state: str) -> tuple[datetime | None, str | None]:
    """When a terminal job ended (completionTime, else its terminal condition's time) and why it failed."""
    if state not in TERMINAL:
        return None, None
    for ctype in ("Failed", "Succeeded", "Complete", COMPLETED):
        found = true_condition(status, ctype)
        if found is not None:
            reason = word(found.get("reason"), "Unknown") if state == FAILED else None
            return time_of(status.get("completionTime")) or time_of(found.get("lastTransitionTime")), reason
    return time_of(status.get("completionTime")), ("Unknown" if state == FAILED else None)


def _metrics(found: object) -> tuple[float | None, float | None]:
    values = found if isinstance(found, Mapping) else {}
    return number(values.get("loss")), number(values.get("accuracy"))


# -- one reader per shape ---------------------------------------------------------------------------

# v1 condition types, most telling first: the first True one is the state.
_V1_STATES = (
    ("Failed", FAILED),
    ("Succeeded", COMPLETED),
    ("Suspended", "Suspended"),
    ("Restarting", "Restarting"),
    ("Running", "Running"),
)


def replica_specs(spec: Obj) -> Mapping[str, Any] | None:
    """The replica-spec map of a v1 job's spec (its one ``<x>ReplicaSpecs`` field), None if it has none."""
    return next(
        (v for k, v in spec.items() if k.endswith("ReplicaSpecs") and isinstance(v, Mapping)),
        None,
    )


def from_replica_specs(job: Obj) -> JobSample:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    state = next((s for ctype, s in _V1_STATES if true_condition(status, ctype)), "Pending")
    workers, gpus = 0, Decimal(0)
    for replica in (replica_specs(spec) or {}).values():
        count = replica.get("replicas", 1) if isinstance(replica, Mapping) else 0
        count = count if isinstance(count, int) else 0
        pod = (replica.get("template") or {}).get("spec") or {} if isinstance(replica, Mapping) else {}
        workers += count
        gpus += count * sum((_gpus(c.get("resources")) for c in pod.get("containers") or []), Decimal(0))
    progress = status.get("trainingProgress") or {}
    loss, accuracy = _metrics(progress.get("metrics"))
    finished, reason = _ended(status, state)
    return JobSample(
        state=state,
        progress=number(progress.get("progressPercentage")),
        epoch=number(progress.get("currentEpoch")),
        loss=loss,
        accuracy=accuracy,
        workers=workers,
        gpus=float(gpus),
        started=time_of(status.get("startTime")),
        finished=finished,
        failure_reason=reason,
    )


def from_runtime_ref(job: Obj) -> JobSample:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    state = word(status.get("state"), "")
    if not state:
        terminal = [s for ctype, s in (("Failed", FAILED), ("Complete", COMPLETED)) if true_condition(status, ctype)]
        state = terminal[0] if terminal else "Suspended" if true_condition(status, "Suspended") else "Pending"
    trainer = spec.get("trainer") or {}
    nodes = trainer.get("numNodes")
    # Without numNodes the runtime decides how many nodes run; the TrainJob alone does not say.
    workers = nodes if isinstance(nodes, int) else None
    reported = status.get("trainerStatus") or {}
    values = {m.get("name"): m.get("value") for m in reported.get("metrics") or [] if isinstance(m, Mapping)}
    loss, accuracy = _metrics(values)
    finished, reason = _ended(status, state)
    return JobSample(
        state=state,
        progress=number(reported.get("progressPercentage")),
        epoch=number(values.get("epoch")),
        loss=loss,
        accuracy=accuracy,
        workers=workers,
        gpus=None if workers is None else float(workers * _gpus(trainer.get("resourcesPerNode"))),
        started=None,
        finished=finished,
        failure_reason=reason,
    )


def from_num_workers(job: Obj) -> JobSample:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    state = word(status.get("state"), "Pending")
    workers = spec.get("numWorkers")
    workers = workers if isinstance(workers, int) else None
    per_worker = spec.get("gpusPerWorker", SEED_GPUS_PER_WORKER)
    per_worker = per_worker if isinstance(per_worker, int) else SEED_GPUS_PER_WORKER
    loss, accuracy = _metrics(status.get("metrics"))
    finished, reason = _ended(status, state)
    if state == FAILED and status.get("failureReason") and reason == "Unknown":
        reason = word(status.get("failureReason"), "Unknown")
    return JobSample(
        state=state,
        progress=number(status.get("progress")),
        epoch=number(status.get("currentEpoch")),
        loss=loss,
        accuracy=accuracy,
        workers=workers,
        gpus=None if workers is None else float(workers * per_worker),
        started=time_of(status.get("startTime")),
        finished=finished,
        failure_reason=reason,
    )


SHAPES: tuple[tuple[str, Callable[[Obj], bool], Callable[[Obj], JobSample]], ...] = (
    ("replicaSpecs", lambda spec: replica_specs(spec) is not None, from_replica_specs),
    ("runtimeRef", lambda spec: "runtimeRef" in spec, from_runtime_ref),
    ("numWorkers", lambda spec: "numWorkers" in spec, from_num_workers),
)
"""Shape name, how a spec shows it, its reader; the first that matches reads the job."""


def sample(job: Obj) -> JobSample | None:
    """The job as the per-job series show it; None for an object of no known shape."""
    spec = job.get("spec")
    if not isinstance(spec, Mapping):
        return None
    return next((read(job) for _, matches, read in SHAPES if matches(spec)), None)
