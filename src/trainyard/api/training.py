"""A job's training progress as ``yard`` shows it: one reading of each status shape, and its text.

Training code reports progress (``trainyard.runtime.report``, or Kubeflow's SDK) and a server
writes it into the job's status in one of three shapes:

* ``status.trainingProgress`` of the ``kubeflow.org/v1`` kinds: ``progressPercentage``,
  ``currentEpoch``/``totalEpochs``, ``currentStep``/``totalSteps``, ``metrics`` (name to number),
  ``estimatedRemainingSeconds``, ``lastCheckpoint`` {path, epoch, time}, ``best`` {metric, value,
  epoch}, ``lastUpdateTime``.
* ``status.trainerStatus`` of Kubeflow Trainer v2's TrainJob (upstream's shape):
  ``progressPercentage``, ``estimatedRemainingSeconds``, ``metrics`` as ``[{name, value}]`` with
  string values, ``lastUpdatedTime``. It has no epoch field; a metric named ``epoch`` stands in.
* seed 004's TrainingJob, flat in its status: ``progress`` ("45%"), ``currentEpoch``,
  ``totalEpochs``, ``metrics`` (name to number), ``checkpoint`` {path, epoch, time}.

Each reader gives a :class:`Training` (None when the job never reported), and the rest of this
module turns one into the table cells of ``yard get``, the lines of ``yard describe`` and the
progress line of ``yard run``/``wait``. A family of kinds (``jobview.JobView.training``) picks its
reader by its status shape, never by a kind's name. Pure: status dicts in, text out; the one clock
read is the ages' ``now`` default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainyard.api.meta import Obj, parse_time

MetricValue = float | int | str

COLUMNS = ("PROGRESS", "EPOCH")
"""What ``yard get`` shows of a job's training, as seed 004's ``kubectl get`` does."""
WIDE_COLUMNS = ("LOSS", "ACCURACY", "ETA")
"""What ``yard get -o wide`` adds (the v1 CRDs' priority-1 printer columns)."""
LINE_METRICS = {"loss": "loss", "accuracy": "acc"}
"""The metrics the progress line shows, under its short names, when the job reports them."""


@dataclass(frozen=True)
class Checkpoint:
    path: str
    epoch: int | None = None
    time: str | None = None


@dataclass(frozen=True)
class Best:
    metric: str
    value: MetricValue
    epoch: int | None = None


@dataclass(frozen=True)
class Training:
    """What a job reported of its training, whichever shape its status holds it in."""

    percent: int | None = None
    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: Mapping[str, MetricValue] = field(default_factory=dict)
    eta_seconds: int | None = None
    checkpoint: Checkpoint | None = None
    best: Best | None = None
    updated: str | None = None


# -- readers, one per status shape ---------------------------------------------------------------
# Status is whatever a server (or a user's kubectl edit) wrote: a value of the wrong type is left
# out rather than shown wrong or raised on, so a view never fails on a job it can list.


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip().removesuffix("%"))
        except ValueError:
            return None
    return None


def _metric(value: Any) -> MetricValue | None:
    if isinstance(value, bool) or value is None:
        return None
    return value if isinstance(value, int | float | str) else None


def _metrics(raw: Any) -> dict[str, MetricValue]:
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in ((k, _metric(v)) for k, v in raw.items()) if v is not None}


def _checkpoint(raw: Any) -> Checkpoint | None:
    if not isinstance(raw, dict) or not raw.get("path"):
        return None
    return Checkpoint(path=str(raw["path"]), epoch=_int(raw.get("epoch")), time=_text(raw.get("time")))


def _best(raw: Any) -> Best | None:
    if not isinstance(raw, dict) or not raw.get("metric"):
        return None
    value = _metric(raw.get("value"))
    if value is None:
        return None
    return Best(metric=str(raw["metric"]), value=value, epoch=_int(raw.get("epoch")))


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _status(job: Obj) -> Obj:
    status = job.get("status")
    return status if isinstance(status, dict) else {}


def from_training_progress(job: Obj) -> Training | None:
    """``status.trainingProgress`` of a ``kubeflow.org/v1`` job; None before its first report."""
    raw = _status(job).get("trainingProgress")
    if not isinstance(raw, dict) or not raw:
        return None
    return _progress(raw, _checkpoint(raw.get("lastCheckpoint")))


def _progress(raw: Obj, checkpoint: Checkpoint | None) -> Training:
    """A report in trainyard's own words (``trainingProgress``'s, which seed 004's flat status shares)."""
    percent = _int(raw.get("progressPercentage"))
    return Training(
        percent=percent if percent is not None else _int(raw.get("progress")),
        epoch=_int(raw.get("currentEpoch")),
        total_epochs=_int(raw.get("totalEpochs")),
        step=_int(raw.get("currentStep")),
        total_steps=_int(raw.get("totalSteps")),
        metrics=_metrics(raw.get("metrics")),
        eta_seconds=_int(raw.get("estimatedRemainingSeconds")),
        checkpoint=checkpoint,
        best=_best(raw.get("best")),
        updated=_text(raw.get("lastUpdateTime")),
    )


def from_trainer_status(job: Obj) -> Training | None:
    """``status.trainerStatus`` of a TrainJob (upstream's shape); None before its first report."""
    raw = _status(job).get("trainerStatus")
    if not isinstance(raw, dict) or not raw:
        return None
    metrics: dict[str, MetricValue] = {}
    for item in raw.get("metrics") or []:
        if isinstance(item, dict) and item.get("name"):
            value = _metric(item.get("value"))
            if value is not None:
                metrics[str(item["name"])] = value
    return Training(
        percent=_int(raw.get("progressPercentage")),
        # Upstream's status has no epoch; training code that wants one shown reports it as a metric.
        epoch=_int(metrics.pop("epoch", None)),
        metrics=metrics,
        eta_seconds=_int(raw.get("estimatedRemainingSeconds")),
        updated=_text(raw.get("lastUpdatedTime")),
    )


def from_flat_status(job: Obj) -> Training | None:
    """Seed 004's TrainingJob status (``progress: "45%"``, ``currentEpoch``, ``metrics`` ... on
    ``status`` itself); None before its first report."""
    raw = _status(job)
    checkpoint = _checkpoint(raw.get("checkpoint")) or _checkpoint(raw.get("lastCheckpoint"))
    reported = ("progress", "progressPercentage", "currentEpoch", "metrics", "currentStep")
    if not any(raw.get(key) not in (None, "", {}) for key in reported) and checkpoint is None:
        return None
    return _progress(raw, checkpoint)


# -- text ----------------------------------------------------------------------------------------


def duration(seconds: float) -> str:
    """A span in two units at most, as people read an ETA: 45s, 3m10s, 1h2m, 2d3h."""
    whole = max(int(seconds), 0)
    for big, big_size, small, small_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60), ("m", 60, "s", 1)):
        if whole >= big_size:
            rest = (whole % big_size) // small_size
            return f"{whole // big_size}{big}" + (f"{rest}{small}" if rest else "")
    return f"{whole}s"


def since(moment: str | None, now: datetime | None = None) -> str | None:
    """``3m10s ago`` for an RFC 3339 time; None when there is none to read."""
    if not moment:
        return None
    try:
        elapsed = ((now or datetime.now(UTC)) - parse_time(moment)).total_seconds()
    except ValueError:
        return None
    return f"{duration(elapsed)} ago"


def value_text(value: MetricValue, digits: int = 4) -> str:
    """A metric in few characters: 0.4512 (``digits`` significant), 12, 1.2e-05; a word as it is."""
    if isinstance(value, int):
        return str(value)
    try:
        number = float(value)
    except ValueError:
        return str(value)
    if not math.isfinite(number):
        return str(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    if abs(number) >= 10**digits:
        return f"{number:.0f}"
    return f"{number:.{digits}g}"


def fraction(done: int | None, total: int | None) -> str:
    if done is None:
        return ""
    return f"{done}/{total}" if total is not None else str(done)


def cell(header: str, training: Training | None, *, over: bool = False) -> str:
    """The cell of one of ``COLUMNS``/``WIDE_COLUMNS``; empty when the job never reported it, as
    ``kubectl get`` leaves a printer column whose field is absent. A finished job has no ETA."""
    if training is None:
        return ""
    if header == "PROGRESS":
        return "" if training.percent is None else f"{training.percent}%"
    if header == "EPOCH":
        return fraction(training.epoch, training.total_epochs)
    if header == "ETA":
        return "" if over or training.eta_seconds is None else duration(training.eta_seconds)
    value = training.metrics.get(header.lower())
    return "" if value is None else value_text(value)


def _line_metrics(training: Training) -> list[tuple[str, MetricValue]]:
    """Loss and accuracy under their short names; a job reporting neither, its first two metrics."""
    named = [(short, training.metrics[name]) for name, short in LINE_METRICS.items() if name in training.metrics]
    return named or list(training.metrics.items())[:2]


def summary(training: Training | None, *, over: bool = False) -> str:
    """The progress line's part: ``45%  epoch 2/10  loss 0.451  acc 0.892  ETA 3m10s``."""
    if training is None:
        return ""
    parts = [] if training.percent is None else [f"{training.percent}%"]
    if training.epoch is not None:
        parts.append(f"epoch {fraction(training.epoch, training.total_epochs)}")
    elif training.step is not None:
        parts.append(f"step {fraction(training.step, training.total_steps)}")
    parts += [f"{name} {value_text(value, 3)}" for name, value in _line_metrics(training)]
    if not over and training.eta_seconds is not None:
        parts.append(f"ETA {duration(training.eta_seconds)}")
    return "  ".join(parts)


def fields(training: Training, *, over: bool = False, now: datetime | None = None) -> list[tuple[str, str]]:
    """``yard describe``'s Training section: (label, value) lines, a label "" continuing the one above."""
    out: list[tuple[str, str]] = []
    if training.percent is not None:
        out.append(("Progress", f"{training.percent}%"))
    if training.epoch is not None:
        out.append(("Epoch", fraction(training.epoch, training.total_epochs)))
    if training.step is not None:
        out.append(("Step", fraction(training.step, training.total_steps)))
    if not over and training.eta_seconds is not None:
        out.append(("ETA", duration(training.eta_seconds)))
    for i, (name, value) in enumerate(training.metrics.items()):
        out.append(("Metrics" if i == 0 else "", f"{name}: {value_text(value, 6)}"))
    if training.checkpoint is not None:
        bits = [] if training.checkpoint.epoch is None else [f"epoch {training.checkpoint.epoch}"]
        written = since(training.checkpoint.time, now)
        bits += [written] if written else []
        out.append(("Checkpoint", training.checkpoint.path + (f" ({', '.join(bits)})" if bits else "")))
    if training.best is not None:
        best = f"{training.best.metric} {value_text(training.best.value, 6)}"
        out.append(("Best", best + ("" if training.best.epoch is None else f" (epoch {training.best.epoch})")))
    updated = since(training.updated, now)
    if updated:
        out.append(("Updated", updated))
    return out
