"""``policy/v1`` PodDisruptionBudget's shared rules: which pods a budget selects, when a pod is
healthy, and the ``DisruptionAllowed`` condition, as the API server's eviction subresource and
the disruption controller both read them (upstream's ``pdbhelper`` and ``podutil.IsPodReady``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trainyard.api.labels import selector_matches

Obj = dict[str, Any]


def selects(pdb: Obj, pod: Obj) -> bool:
    """Same namespace, and a selector that matches; an empty selector selects nothing (as upstream)."""
    selector = (pdb.get("spec") or {}).get("selector")
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    if (pdb.get("metadata") or {}).get("namespace") != (pod.get("metadata") or {}).get("namespace"):
        return False
    return selector_matches(selector, (pod.get("metadata") or {}).get("labels") or {})


def pod_ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def allowed_condition(
    conditions: Sequence[Obj], allowed: int, generation: Any, now: str, *, failed: str | None = None
) -> list[Obj]:
    """``conditions`` with DisruptionAllowed set: ``SufficientPods`` when ``allowed`` > 0, else
    ``InsufficientPods``; ``failed``: the sync failed (``SyncFailed``, with that message)."""
    if failed is not None:
        status, reason, message = "False", "SyncFailed", failed
    elif allowed > 0:
        status, reason, message = "True", "SufficientPods", ""
    else:
        status, reason, message = "False", "InsufficientPods", ""
    old = next((c for c in conditions if c.get("type") == "DisruptionAllowed"), None)
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else now
    new = {
        "type": "DisruptionAllowed",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation or 0,
        "lastTransitionTime": since,
    }
    return [*(dict(c) for c in conditions if c.get("type") != "DisruptionAllowed"), new]
