"""The taint eviction controller's pure half: which pods a node's NoExecute taints evict, and when.

As kube-controller-manager v1.32's ``tainteviction`` controller: a pod bound to a node with
NoExecute taints it does not all tolerate is deleted at once; one that tolerates them all is
deleted when the shortest ``tolerationSeconds`` of the tolerations used has passed since the
controller first saw it so (tolerations without ``tolerationSeconds`` tolerate forever, but one
finite toleration among them still bounds the stay, as upstream's ``getMinTolerationTime``).
Taints going away cancel a
scheduled deletion. Deleting, the controller first gives the pod the ``DisruptionTarget``
condition (reason ``DeletionByTaintManager``) and tells it with a ``TaintManagerEviction`` event.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from trainyard.api.meta import Obj

DISRUPTION_TARGET = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByTaintManager",
    "message": "Taint manager: deleting due to NoExecute taint",
}
EVENT_REASON = "TaintManagerEviction"


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """Upstream's ``ToleratesTaint``: effect (empty: any), key (empty with Exists: any), then value."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    match toleration.get("operator") or "Equal":
        case "Exists":
            return True
        case "Equal":
            return bool(toleration.get("key")) and (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def no_execute(node: Obj) -> list[Obj]:
    return [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if isinstance(t, dict) and t.get("effect") == "NoExecute"
    ]


def matching(taints: Sequence[Obj], tolerations: Sequence[Obj]) -> list[Obj] | None:
    """The tolerations used, one per taint (the first that tolerates it); None if a taint is untolerated."""
    used = []
    for taint in taints:
        found = next((t for t in tolerations if tolerates(t, taint)), None)
        if found is None:
            return None
        used.append(found)
    return used


def stay(used: Sequence[Obj]) -> float | None:
    """Upstream's ``getMinTolerationTime``: the shortest ``tolerationSeconds`` (<= 0: none), None: forever."""
    if not used:
        return 0.0
    finite = [t["tolerationSeconds"] for t in used if isinstance(t.get("tolerationSeconds"), int)]
    if not finite:
        return None
    return float(max(min(finite), 0))


@dataclass(frozen=True)
class Decision:
    """``evict_at``: when the pod goes (None: it stays); ``since``: when its countdown began."""

    evict_at: datetime | None
    since: datetime | None


def decide(pod: Obj, taints: Sequence[Obj], since: datetime | None, now: datetime) -> Decision:
    """A pod's fate on a node with NoExecute ``taints``; ``since``: a countdown already running."""
    if not taints:
        return Decision(None, None)
    used = matching(taints, (pod.get("spec") or {}).get("tolerations") or [])
    if used is None:
        return Decision(now, now)
    seconds = stay(used)
    if seconds is None:
        return Decision(None, None)
    start = since or now
    return Decision(start + timedelta(seconds=seconds), start)


def disruption_conditions(pod: Obj, condition: Obj, now: str) -> list[Obj] | None:
    """The pod's conditions with ``condition`` set (True since ``now``), or None when it already is."""
    conditions = [dict(c) for c in (pod.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    for c in conditions:
        if c.get("type") == condition["type"]:
            if all(c.get(k) == v for k, v in condition.items()):
                return None
            since = c.get("lastTransitionTime") if c.get("status") == condition["status"] else now
            c.update(condition, lastTransitionTime=since or now)
            return conditions
    return [*conditions, {**condition, "lastProbeTime": None, "lastTransitionTime": now}]
