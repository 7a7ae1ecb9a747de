"""``policy/v1`` PodDisruptionBudget as a stored built-in, and what ``pods/eviction`` asks of it.

The plane serves PDBs as kube-apiserver v1.32 does: the shape, ``ValidatePodDisruptionBudgetSpec``
in its words, kubectl's columns (NAME MIN AVAILABLE MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE);
the disruption controller (``clients.disruption``) writes the status. ``admit_eviction`` is the
eviction subresource's check against the one budget that selects a pod: a pod that is not
running yet, has ended or is terminating may always go; an unready pod goes when the budget is
healthy (``IfHealthyBudget``, the default) or whatever it is (``AlwaysAllow``); any other
eviction takes one of ``status.disruptionsAllowed`` and records the pod in ``disruptedPods``,
or is refused with 429 ``Cannot evict pod as it would violate the pod's disruption budget.``
and a ``DisruptionBudget`` cause, which kubectl drain retries.

Pure; callers: ``registry`` (the resource), ``shapes``, ``admission``, ``tables``, ``subresources``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainyard.api.disruption import allowed_condition, pod_ready, selects
from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import causes
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "policy/poddisruptionbudgets"
POLICIES = ("AlwaysAllow", "IfHealthyBudget")
REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."
MAX_DISRUPTED_PODS = 2000
_PERCENT = re.compile(r"^[0-9]+%$")
_SELECTOR = {
    "matchLabels": {"*": "string"},
    "matchExpressions": [{"key": "string", "operator": "string", "values": ["string"]}],
}
SHAPE: dict[str, Any] = {
    "spec": {
        "minAvailable": "int-or-string",
        "maxUnavailable": "int-or-string",
        "selector": _SELECTOR,
        "unhealthyPodEvictionPolicy": "string",
    },
    "status": {
        "observedGeneration": "integer",
        "disruptedPods": {"*": "string"},
        "disruptionsAllowed": "integer",
        "currentHealthy": "integer",
        "desiredHealthy": "integer",
        "expectedPods": "integer",
        "conditions": ["object"],
    },
}


def _int_or_percent(value: Any, where: str) -> list[Cause]:
    if isinstance(value, str):
        if not _PERCENT.match(value):
            return [causes.invalid(where, value, "must be an integer or percentage (e.g '5%')")]
        if int(value[:-1]) > 100:
            return [causes.invalid(where, value, "must not be greater than 100%")]
        return []
    if isinstance(value, int) and value < 0:
        return [causes.invalid(where, value, "must be greater than or equal to 0")]
    return []


def validate(obj: Obj) -> list[Cause]:
    """The 422 causes of a PodDisruptionBudget's spec."""
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        out.append(causes.invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for name in ("minAvailable", "maxUnavailable"):
        if spec.get(name) is not None:
            out += _int_or_percent(spec[name], f"spec.{name}")
    for i, expr in enumerate((spec.get("selector") or {}).get("matchExpressions") or []):
        op = expr.get("operator") if isinstance(expr, dict) else None
        where = f"spec.selector.matchExpressions[{i}]"
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            out.append(causes.not_supported(f"{where}.operator", op or "", ("DoesNotExist", "Exists", "In", "NotIn")))
        elif op in ("In", "NotIn") and not expr.get("values"):
            out.append(causes.required(f"{where}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and expr.get("values"):
            out.append(
                causes.forbidden(
                    f"{where}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in POLICIES:
        out.append(causes.not_supported("spec.unhealthyPodEvictionPolicy", policy, POLICIES))
    return out


def columns(name: Callable[[Obj, datetime], Any], age: Callable[[Obj, datetime], Any]) -> list[Any]:
    """kubectl's PDB columns (``printPodDisruptionBudget``), given ``tables``' name and age cells."""

    def bound(field: str) -> Callable[[Obj, datetime], str]:
        def cell(obj: Obj, _: datetime) -> str:
            value = (obj.get("spec") or {}).get(field)
            return "N/A" if value is None else str(value)

        return cell

    return [
        ("Name", "string", 0, name),
        ("Min Available", "string", 0, bound("minAvailable")),
        ("Max Unavailable", "string", 0, bound("maxUnavailable")),
        ("Allowed Disruptions", "integer", 0, lambda o, _: int((o.get("status") or {}).get("disruptionsAllowed") or 0)),
        ("Age", "string", 0, age),
    ]


def may_ignore(pod: Obj) -> bool:
    """``canIgnorePDB``: a pod pending, ended or terminating already is no disruption to count."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool((pod.get("metadata") or {}).get("deletionTimestamp"))


@dataclass(frozen=True)
class Verdict:
    """The eviction's answer: go (with ``status``, the budget's new status, to write first), or a refusal."""

    code: int = 0
    """0: allowed; else the HTTP status of the refusal (429, 403, 500)."""
    message: str = ""
    cause: str = ""
    status: Obj | None = None


def admit_eviction(pod: Obj, budgets: Iterable[Obj], now: str, *, dry_run: bool = False) -> Verdict:
    """Whether ``pod`` may be evicted under the budgets of its namespace (those that select it count)."""
    if may_ignore(pod):
        return Verdict()
    chosen = [b for b in budgets if selects(b, pod)]
    if len(chosen) > 1:
        return Verdict(
            500, "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )
    if not chosen:
        return Verdict()
    pdb = chosen[0]
    status = dict(pdb.get("status") or {})
    name = pdb["metadata"]["name"]
    if not pod_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        healthy, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
        if policy == "AlwaysAllow" or (healthy >= desired and desired > 0):
            return Verdict()
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 0):
        return Verdict(429, REFUSED, f"The disruption budget {name} is still being processed by the server.")
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        return Verdict(403, "pdb disruptions allowed is negative")
    disrupted = dict(status.get("disruptedPods") or {})
    if len(disrupted) > MAX_DISRUPTED_PODS:
        return Verdict(403, "DisruptedPods map too big - too many evictions not confirmed by PDB controller")
    if allowed == 0:
        why = (
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods and has "
            f"{int(status.get('currentHealthy') or 0)} currently"
        )
        return Verdict(429, REFUSED, why)
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        status["conditions"] = allowed_condition(
            status.get("conditions") or [], 0, status.get("observedGeneration"), now
        )
    if dry_run:
        return Verdict()
    disrupted[pod["metadata"]["name"]] = now
    status["disruptedPods"] = disrupted
    return Verdict(status=status)
