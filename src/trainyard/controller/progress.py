"""Training progress of the ``kubeflow.org/v1`` kinds and the success policy read from it, decided purely.

Training code reports through ``trainyard.runtime`` (``ProgressSink``) to the operator's status
server, which checks the bearer token, then calls :func:`merge` with the job's stored
``status.trainingProgress``, the request's ``report`` and the job's ``runPolicy.earlyStopping``,
and writes what it returns. The reconciler calls :func:`stop_decision` on every pass over an
unfinished job: a policy that fired ends the job ``Succeeded`` (``lifecycle.succeed_early``).

The report (``{"report": {...}}``): ``epoch`` / ``totalEpochs`` (epochs *completed*), ``step`` /
``totalSteps``, ``metrics`` (name → number or string, merged by name: the latest value of each is
kept), ``progressPercentage`` (0..100; else derived from steps, then epochs), ``estimatedRemainingSeconds``,
``checkpoint`` (``path``, ``epoch``, ``time``) and ``time`` (when the snapshot was taken). Anything
else, or a value of the wrong type, raises :class:`InvalidReport`, whose message names the field.
A metric that is not finite (a diverged loss) is kept as the string JSON cannot carry it as.

``best`` follows the policy's metric: the best value so far and the epoch it was reported at;
``patience`` counts completed epochs since then.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trainyard.api.common import EarlyStopping
from trainyard.api.kindinfo import KindInfo
from trainyard.api.meta import Obj, format_time

ROUTE = "trainingprogress"
"""The last segment of a job's progress endpoint (beside its ``status`` subresource)."""
MAX_METRICS = 256
MAX_NAME = 128
MAX_STRING = 256
MAX_PATH = 4096
MAX_INT = 2**53  # what a JSON number carries exactly
REPORT_FIELDS = (
    "epoch",
    "totalEpochs",
    "step",
    "totalSteps",
    "metrics",
    "progressPercentage",
    "estimatedRemainingSeconds",
    "checkpoint",
    "time",
)
_COUNTERS = (
    ("epoch", "currentEpoch"),
    ("totalEpochs", "totalEpochs"),
    ("step", "currentStep"),
    ("totalSteps", "totalSteps"),
    ("estimatedRemainingSeconds", "estimatedRemainingSeconds"),
)
"""Integers of a report → their ``trainingProgress`` names."""
TARGET_REACHED = "TargetMetricReached"
EARLY_STOPPED = "EarlyStopped"
DEFAULT_METRIC = "accuracy"


def path(info: KindInfo, namespace: str, name: str) -> str:
    """The job's progress endpoint on the status server."""
    return f"/apis/{info.group}/{info.version}/namespaces/{namespace}/{info.plural}/{name}/{ROUTE}"


def audience(info: KindInfo, namespace: str, name: str) -> str:
    """The audience a pod's token must carry to report for this job (a token for one job fails for another)."""
    return path(info, namespace, name).removeprefix("/apis/")


class InvalidReport(ValueError):
    """The request body is not a valid progress report; the message names the field."""


# -- the success policy ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """``runPolicy.earlyStopping`` with its defaults applied."""

    metric: str
    mode: str
    target: float | None
    patience: int | None
    min_delta: float

    def better(self, value: float, than: float) -> bool:
        """Whether ``value`` improves on ``than`` by more than ``min_delta``."""
        if self.mode == "min":
            return value < than - self.min_delta
        return value > than + self.min_delta

    def reached(self, value: float) -> bool:
        if self.target is None:
            return False
        return value <= self.target if self.mode == "min" else value >= self.target


def policy_of(spec: EarlyStopping | None) -> Policy | None:
    """The policy with defaults: metric ``accuracy``; ``min`` for a loss or an error, else ``max``."""
    if spec is None:
        return None
    metric = spec.metric or DEFAULT_METRIC
    lowered = metric.lower()
    mode = spec.mode or ("min" if "loss" in lowered or "error" in lowered else "max")
    return Policy(metric, mode, spec.target, spec.patience, spec.min_delta or 0.0)


@dataclass(frozen=True)
class Stop:
    """A policy that fired: the ``Succeeded`` condition's reason and message."""

    reason: str
    message: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def stop_decision(progress: Mapping[str, Any] | None, spec: EarlyStopping | None) -> Stop | None:
    """Whether the job's reported progress ends it under ``spec``: the target first, then patience."""
    policy = policy_of(spec)
    if policy is None or not progress:
        return None
    epoch = progress.get("currentEpoch")
    at = f" at epoch {epoch}" if epoch is not None else ""
    value = _number((progress.get("metrics") or {}).get(policy.metric))
    if value is not None and policy.reached(value):
        relation = "<=" if policy.mode == "min" else ">="
        message = f"{policy.metric} {value:g} {relation} target {policy.target:g}{at}"
        return Stop(TARGET_REACHED, message)
    best = progress.get("best") or {}
    if policy.patience is None or best.get("metric") != policy.metric:
        return None
    best_epoch, best_value = best.get("epoch"), _number(best.get("value"))
    if not isinstance(epoch, int) or not isinstance(best_epoch, int) or best_value is None:
        return None
    waited = epoch - best_epoch
    if waited < policy.patience:
        return None
    message = (
        f"{policy.metric} has not improved on its best {best_value:g} (epoch {best_epoch}) for {waited} "
        f"epochs (patience {policy.patience}); stopped at epoch {epoch}"
    )
    return Stop(EARLY_STOPPED, message)


# -- checking a report -----------------------------------------------------------------------------


def _int(value: Any, field: str, high: int = MAX_INT) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidReport(f"report.{field}: must be an integer, got {type(value).__name__}")
    if not 0 <= value <= high:
        raise InvalidReport(f"report.{field}: must be between 0 and {high}, got {value}")
    return value


def _time(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise InvalidReport(f"report.{field}: must be an RFC 3339 date-time string")
    try:
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidReport(f"report.{field}: {value!r} is not an RFC 3339 date-time") from None
    if stamp.tzinfo is None:
        raise InvalidReport(f"report.{field}: {value!r} has no time zone")
    return format_time(stamp.astimezone(UTC))


def _metric_value(name: Any, value: Any) -> int | float | str:
    if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME:
        raise InvalidReport(f"report.metrics: names must be strings of 1 to {MAX_NAME} characters, got {name!r}")
    if isinstance(value, str):
        if len(value) > MAX_STRING:
            raise InvalidReport(f"report.metrics.{name}: strings are at most {MAX_STRING} characters")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidReport(f"report.metrics.{name}: must be a number or a string, got {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # "nan", "inf": kept, but JSON (and the status) has no such number
    return value


def _metrics(raw: Any) -> dict[str, int | float | str]:
    if not isinstance(raw, dict):
        raise InvalidReport("report.metrics: must be an object of name to number or string")
    if len(raw) > MAX_METRICS:
        raise InvalidReport(f"report.metrics: at most {MAX_METRICS} metrics, got {len(raw)}")
    return {name: _metric_value(name, value) for name, value in raw.items()}


def _checkpoint(raw: Any, now: datetime) -> Obj:
    if not isinstance(raw, dict):
        raise InvalidReport("report.checkpoint: must be an object with path, epoch and time")
    unknown = sorted(set(raw) - {"path", "epoch", "time"})
    if unknown:
        raise InvalidReport(f"report.checkpoint.{unknown[0]}: unknown field (expected path, epoch, time)")
    where = raw.get("path")
    if not isinstance(where, str) or not 1 <= len(where) <= MAX_PATH:
        raise InvalidReport(f"report.checkpoint.path: must be a string of 1 to {MAX_PATH} characters")
    out: Obj = {"path": where}
    if raw.get("epoch") is not None:
        out["epoch"] = _int(raw["epoch"], "checkpoint.epoch")
    out["time"] = format_time(now) if raw.get("time") is None else _time(raw["time"], "checkpoint.time")
    return out


def report_of(body: Any) -> Obj:
    """The ``report`` of a request body, checked; see the module docstring."""
    if not isinstance(body, dict) or set(body) != {"report"}:
        raise InvalidReport('the body must be a JSON object {"report": {...}}')
    report = body["report"]
    if not isinstance(report, dict):
        raise InvalidReport("report: must be an object")
    unknown = sorted(set(report) - set(REPORT_FIELDS))
    if unknown:
        raise InvalidReport(f"report.{unknown[0]}: unknown field (expected {', '.join(REPORT_FIELDS)})")
    return {key: value for key, value in report.items() if value is not None}


# -- merging a report into the status --------------------------------------------------------------


def _percentage(progress: Obj, report: Obj) -> int | None:
    """As reported; else from steps, then epochs (``runtime.reporting.fraction_done``'s order)."""
    if "progressPercentage" in report:
        return _int(report["progressPercentage"], "progressPercentage", 100)
    for done, total in (("currentStep", "totalSteps"), ("currentEpoch", "totalEpochs")):
        if progress.get(done) is not None and progress.get(total):
            return max(0, min(100, int(100 * progress[done] / progress[total])))
    old = progress.get("progressPercentage")
    return old if isinstance(old, int) else None


def _best(old: Any, progress: Obj, policy: Policy | None) -> Obj | None:
    """The best value of the policy's metric so far (a change of metric starts over)."""
    if policy is None:
        return None
    best = old if isinstance(old, dict) and old.get("metric") == policy.metric else None
    value = _number((progress.get("metrics") or {}).get(policy.metric))
    if value is None:
        return best
    previous = _number((best or {}).get("value"))
    if best is not None and previous is not None and not policy.better(value, previous):
        return best
    out: Obj = {"metric": policy.metric, "value": value}
    if progress.get("currentEpoch") is not None:
        out["epoch"] = progress["currentEpoch"]
    return out


def merge(old: Mapping[str, Any] | None, report: Any, spec: EarlyStopping | None, now: datetime) -> Obj:
    """The ``status.trainingProgress`` after ``report`` (a request's ``report`` object) over ``old``.

    Raises :class:`InvalidReport` for a bad report, before anything is computed.
    """
    fields = report_of({"report": report})
    progress: Obj = {k: v for k, v in (old or {}).items() if v is not None}
    for key, status_key in _COUNTERS:
        if key in fields:
            progress[status_key] = _int(fields[key], key)
    if "metrics" in fields:
        metrics = {**(progress.get("metrics") or {}), **_metrics(fields["metrics"])}
        if len(metrics) > MAX_METRICS:
            raise InvalidReport(f"report.metrics: a job keeps at most {MAX_METRICS} metrics")
        progress["metrics"] = metrics
    if "checkpoint" in fields:
        progress["lastCheckpoint"] = _checkpoint(fields["checkpoint"], now)
    percentage = _percentage(progress, fields)
    if percentage is not None:
        progress |= {"progressPercentage": percentage, "progress": f"{percentage}%"}
    best = _best(progress.get("best"), progress, policy_of(spec))
    progress.pop("best", None)
    if best is not None:
        progress["best"] = best
    progress["lastUpdateTime"] = _time(fields["time"], "time") if "time" in fields else format_time(now)
    return progress
