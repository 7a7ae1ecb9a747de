"""How a status condition moves, the one rule every controller's conditions follow.

As metav1.Condition: ``lastTransitionTime`` moves only when the condition's ``status`` does (a new
reason or message under the same status keeps the time the status became what it is). The
kind-specific rules above this one (Kubeflow's "Failed is terminal", JobSet's exclusive terminal
conditions, ...) stay with their kinds; they all reach here for the time and the update.
Conditions are plain dicts in the Kubernetes JSON shape; none is mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

Condition = dict[str, Any]


def transition_time(previous: str | None, since: T | None, status: str, now: T) -> T:
    """The ``lastTransitionTime`` of a condition becoming ``status`` at ``now``, whose previous status
    was ``previous`` since ``since`` (None: it had none): ``since`` if the status stays, else ``now``."""
    if previous == status and since is not None:
        return since
    return now


def find(conditions: Sequence[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    type_: str,
    status: str,
    reason: str,
    message: str,
    now: str,
    **extra: Any,
) -> tuple[list[Condition], bool]:
    """``conditions`` with ``type_`` set (in place of the old one, or appended), and whether anything
    changed. ``extra``: more fields of the condition (``lastProbeTime``, ``lastUpdateTime``, ...)."""
    old = find(conditions, type_)
    previous, since = (old.get("status"), old.get("lastTransitionTime")) if old is not None else (None, None)
    new_since = transition_time(previous, str(since) if since else None, status, now)
    new: Condition = {"type": type_, "status": status, "reason": reason, "message": message, **extra}
    new["lastTransitionTime"] = new_since
    if old is not None and all(old.get(k) == v for k, v in new.items() if k not in extra):
        return [dict(c) for c in conditions], False
    if old is None:
        return [*(dict(c) for c in conditions), new], True
    return [new if c is old else dict(c) for c in conditions], True
