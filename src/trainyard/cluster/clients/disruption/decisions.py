"""The disruption controller's pure half: a PodDisruptionBudget's status, as kube-controller-manager v1.32's.

``expectedPods`` is the number of pods the budget selects when ``minAvailable`` is a number, else
the sum of the scale (``spec.replicas`` of the ``/scale`` subresource) of the selected pods'
controllers, which the shell reads; ``desiredHealthy`` is ``minAvailable`` (a percentage of the
expected pods rounded up) or the expected pods less ``maxUnavailable`` (rounded up too);
``currentHealthy`` counts the selected pods that are Ready, not terminating and not recorded by
an eviction in ``disruptedPods`` in the last 2 minutes (entries older than that, or of pods that
went, are dropped); ``disruptionsAllowed`` is their difference, never below 0 (0 when no pods are
expected). The ``DisruptionAllowed`` condition says ``SufficientPods`` or ``InsufficientPods``;
when the expected count cannot be known it is False with reason ``SyncFailed`` and nothing may
be disrupted, as upstream's fail-safe.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainyard.api.disruption import allowed_condition, pod_ready
from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.kit.plans import Event

DELETION_TIMEOUT = timedelta(minutes=2)
"""How long an eviction's entry in ``disruptedPods`` keeps its pod out of the healthy count."""


def controller_ref(pod: Obj) -> Obj | None:
    return next((r for r in (pod.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)


def needs_scale(pdb: Obj) -> bool:
    """Whether the expected pods come from the controllers' scale (a percentage, or ``maxUnavailable``)."""
    spec = pdb.get("spec") or {}
    return spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str)


def _scaled(value: int | str, total: int) -> int:
    """``GetScaledValueFromIntOrPercent`` rounding up."""
    if isinstance(value, str):
        return math.ceil(int(value.rstrip("%")) * total / 100)
    return value


def expected(pdb: Obj, pods: Sequence[Obj], scales: Mapping[str, int | None]) -> tuple[int, int] | tuple[None, str]:
    """(expectedPods, desiredHealthy), or (None, why) when a pod's controller has no scale to read.

    ``scales``: each controller's uid → its ``spec.replicas`` (None: it has no scale subresource).
    """
    spec = pdb.get("spec") or {}
    if not needs_scale(pdb):
        minimum = spec.get("minAvailable")
        return len(pods), int(minimum or 0) if minimum is not None else 0
    total = 0
    counted: set[str] = set()
    for pod in pods:
        ref = controller_ref(pod)
        name = pod["metadata"]["name"]
        if ref is None:
            return None, f'found no controller ref for pod "{name}"'
        uid = str(ref.get("uid") or "")
        replicas = scales.get(uid)
        if replicas is None:
            return None, f'found no controllers for pod "{name}"'
        if uid not in counted:
            counted.add(uid)
            total += replicas
    if spec.get("maxUnavailable") is not None:
        return total, max(total - _scaled(spec["maxUnavailable"], total), 0)
    return total, _scaled(spec["minAvailable"], total)


@dataclass(frozen=True)
class Plan:
    status: Obj
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None


def reconcile(pdb: Obj, pods: Sequence[Obj], scales: Mapping[str, int | None], now: datetime) -> Plan:
    """The budget's whole new status, the events to tell, and when to look again (a disruption expiring)."""
    old = pdb.get("status") or {}
    generation = int(pdb["metadata"].get("generation") or 0)
    stamp = format_time(now)
    conditions = old.get("conditions") or []
    events: list[Event] = []
    if not pods:
        events.append(Event.normal("NoPods", "No matching pods found"))
    count = expected(pdb, pods, scales)
    if count[0] is None:
        why = str(count[1])
        events.append(
            Event.warning("CalculateExpectedPodCountFailed", f"Failed to calculate the number of expected pods: {why}")
        )
        status = {
            **old,
            "disruptionsAllowed": 0,
            "observedGeneration": generation,
            "conditions": allowed_condition(conditions, 0, generation, stamp, failed=why),
        }
        return Plan(status, events)
    expected_pods, desired = int(count[0]), int(count[1])
    names = {p["metadata"]["name"]: p for p in pods}
    disrupted: dict[str, str] = {}
    recheck: datetime | None = None
    for name, when in (old.get("disruptedPods") or {}).items():
        pod = names.get(name)
        if pod is None or (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        expires = parse_time(when) + DELETION_TIMEOUT
        if expires <= now:
            continue
        disrupted[name] = when
        recheck = expires if recheck is None else min(recheck, expires)
    healthy = sum(
        1
        for p in pods
        if not (p.get("metadata") or {}).get("deletionTimestamp")
        and p["metadata"]["name"] not in disrupted
        and pod_ready(p)
    )
    allowed = healthy - desired
    if expected_pods <= 0 or allowed <= 0:
        allowed = 0
    status = {
        "observedGeneration": generation,
        "disruptionsAllowed": allowed,
        "currentHealthy": healthy,
        "desiredHealthy": desired,
        "expectedPods": expected_pods,
        "conditions": allowed_condition(conditions, allowed, generation, stamp),
    }
    if disrupted:
        status["disruptedPods"] = disrupted
    wait = None if recheck is None else max((recheck - now).total_seconds(), 0.0) + 0.05
    return Plan(status, events, wait)
