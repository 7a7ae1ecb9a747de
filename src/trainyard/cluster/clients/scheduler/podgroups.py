"""The gang-scheduling kinds the plane serves, and how their status follows their pods.

Two projects' PodGroups, as CRDs installed at bootstrap (hand-written structural schemas of
their published types):

* scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` PodGroup (coscheduling; pods join with the
  label ``scheduling.x-k8s.io/pod-group``). Phases Pending → Scheduling → Scheduled → Running →
  Finished / Failed, with ``scheduled``/``running``/``succeeded``/``failed`` counts,
  ``occupiedBy`` and ``scheduleStartTime``, as its PodGroup controller writes them. trainyard adds
  ``status.conditions`` (absent upstream) to report ``scheduleTimeoutSeconds`` expiry.
* Volcano's ``scheduling.volcano.sh/v1beta1`` PodGroup (pods join with the annotation
  ``scheduling.k8s.io/group-name``) and cluster-scoped Queue (a ``default`` queue exists).
  Phases Pending → Inqueue (enqueued: minResources fit) → Running → Completed, with
  ``running``/``succeeded``/``failed`` counts and ``Unschedulable``/``Scheduled`` conditions.

The status functions are pure and level-triggered: given the group, its member pods, the
scheduler's latest verdict and the time, they return the status the group should have.
Callers: ``plane`` (installation), ``loop`` (status).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from trainyard.api.meta import Obj
from trainyard.api.podgroupcrds import VOLCANO, X_K8S
from trainyard.cluster.clients.scheduler.snapshot import COSCHEDULING, VOLCANO_GROUP, GroupKey, PodInfo
from trainyard.kit.conditions import transition_time

# -- status ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Counts:
    members: int
    scheduled: int
    running: int
    succeeded: int
    failed: int


def counts(members: Sequence[PodInfo]) -> Counts:
    return Counts(
        members=len(members),
        scheduled=sum(1 for p in members if p.node_name),
        running=sum(1 for p in members if p.phase == "Running"),
        succeeded=sum(1 for p in members if p.phase == "Succeeded"),
        failed=sum(1 for p in members if p.phase == "Failed"),
    )


def _condition(conditions: list[Obj], kind: str, status: str, reason: str, message: str, now: str) -> list[Obj]:
    """``conditions`` with the one of type ``kind`` set; its transition time moves only on a change."""
    old = next((c for c in conditions if c.get("type") == kind), None)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message):
        return conditions
    previous, before = (old.get("status"), old.get("lastTransitionTime")) if old is not None else (None, None)
    since = transition_time(previous, before, status, now)
    new = {"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
    return [*(c for c in conditions if c.get("type") != kind), new]


def _started(status: Obj) -> datetime | None:
    start = status.get("scheduleStartTime")
    if not start:
        return None
    try:
        return datetime.fromisoformat(str(start).replace("Z", "+00:00"))
    except ValueError:
        return None


def timed_out(group: Obj, now: datetime) -> bool:
    """Whether a scheduler-plugins group has waited longer than its ``scheduleTimeoutSeconds``."""
    timeout = (group.get("spec") or {}).get("scheduleTimeoutSeconds")
    began = _started(group.get("status") or {})
    if not timeout or began is None:
        return False
    return (now - began).total_seconds() >= int(timeout)


def timeout_delay(status: Obj, timeout: int, now: datetime) -> float | None:
    """Seconds until a group still being placed reaches its schedule timeout (None: no timer to set)."""
    began = _started(status)
    if began is None or status.get("phase") not in ("Pending", "Scheduling"):
        return None
    return max(0.0, timeout - (now - began).total_seconds()) + 0.05


def coscheduling_status(group: Obj, members: Sequence[PodInfo], *, now: str) -> Obj:
    """The status scheduler-plugins' PodGroup controller and coscheduling plugin give a group.

    ``scheduleStartTime`` is when the group first had its ``minMember`` pods to place (upstream:
    its first partial bind, which an all-or-nothing placement never makes).
    """
    spec, status = group.get("spec") or {}, dict(group.get("status") or {})
    phase = status.get("phase") or ""
    if phase in ("Finished", "Failed"):
        return status  # upstream stops updating a finished group
    minimum = int(spec.get("minMember") or 0)
    c = counts(members)
    status.update(scheduled=c.scheduled, running=c.running, succeeded=c.succeeded, failed=c.failed)
    phase = phase or "Pending"
    for _ in range(5):  # upstream moves one phase per reconcile; settle here in one pass
        before = phase
        if phase == "Pending":
            if c.members >= minimum:
                phase = "Scheduling"
        elif c.members < minimum:
            phase = "Pending"
        else:
            if phase == "Scheduling" and c.scheduled >= minimum:
                phase = "Scheduled"
            if phase == "Scheduled" and c.running + c.succeeded >= minimum:
                phase = "Running"
            if c.failed and c.failed + c.running + c.succeeded >= minimum:
                phase = "Failed"
            if c.succeeded >= minimum:
                phase = "Finished"
        if phase == before:
            break
    status["phase"] = phase
    if phase == "Scheduling" and members and not status.get("occupiedBy"):
        first = members[0]
        if first.owners:
            status["occupiedBy"] = ",".join(f"{first.namespace}/{o}" for o in first.owners)
    if phase != "Pending" and not status.get("scheduleStartTime"):
        status["scheduleStartTime"] = now
    return status


def timeout_condition(status: Obj, *, expired: bool, verdict: str | None, timeout: int, now: str) -> Obj:
    """``status`` with the ``Unschedulable`` condition reporting (or clearing) a schedule timeout."""
    conditions = list(status.get("conditions") or [])
    if expired and verdict is not None:
        message = f"not schedulable within scheduleTimeoutSeconds ({timeout}s): {verdict}"
        conditions = _condition(conditions, "Unschedulable", "True", "ScheduleTimeout", message, now)
    elif verdict is None and any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conditions):
        conditions = _condition(conditions, "Unschedulable", "False", "Scheduled", "all minMember pods are placed", now)
    else:
        return status
    return {**status, "conditions": conditions}


def volcano_status(group: Obj, members: Sequence[PodInfo], *, enqueued: bool, verdict: str | None, now: str) -> Obj:
    """The status Volcano's scheduler gives a PodGroup after a session.

    ``enqueued``: the scheduler admitted a Pending group (its minResources fit). ``verdict``: why
    the group could not be placed or enqueued this time, None when nothing was refused.
    """
    spec, status = group.get("spec") or {}, dict(group.get("status") or {})
    phase = status.get("phase") or "Pending"
    if phase == "Completed":
        return status
    minimum = int(spec.get("minMember") or 1)
    c = counts(members)
    allocated = sum(1 for p in members if p.node_name and (not p.terminal or p.phase == "Succeeded"))
    if enqueued and phase == "Pending":
        phase = "Inqueue"
    if allocated >= minimum:
        phase = "Running"
    elif phase not in ("Inqueue", "Pending"):
        phase = "Pending"
    if c.succeeded >= minimum and all(p.terminal for p in members):
        phase = "Completed"
    conditions = list(status.get("conditions") or [])
    if verdict is not None:
        conditions = _condition(conditions, "Unschedulable", "True", "NotEnoughResources", verdict, now)
    elif allocated >= minimum:
        conditions = _condition(conditions, "Scheduled", "True", "tasks in gang are ready to be scheduled", "", now)
        if any(c.get("type") == "Unschedulable" and c.get("status") == "True" for c in conditions):
            conditions = _condition(conditions, "Unschedulable", "False", "Scheduled", "", now)
    status.update(phase=phase, running=c.running, succeeded=c.succeeded, failed=c.failed)
    if conditions:
        status["conditions"] = conditions
    return status


def _unschedulable(status: Obj) -> Obj | None:
    conditions = status.get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Unschedulable" and c.get("status") == "True"), None)


def unschedulable_warning(key: GroupKey, obj: Obj, old: Obj, new: Obj) -> tuple[Obj, str, str] | None:
    """The Warning a status change from ``old`` to ``new`` calls for on the PodGroup: (involved
    object, reason, message) for a new or changed Unschedulable condition, else None."""
    before, after = _unschedulable(old), _unschedulable(new)
    if after is None or (before is not None and before.get("message") == after.get("message")):
        return None
    flavour, namespace, name = key
    reason = "Unschedulable" if flavour == VOLCANO_GROUP else str(after.get("reason"))
    group, version = (VOLCANO, "v1beta1") if flavour == VOLCANO_GROUP else (X_K8S, "v1alpha1")
    uid = (obj.get("metadata") or {}).get("uid", "")
    involved = {
        "apiVersion": f"{group}/{version}",
        "kind": "PodGroup",
        "name": name,
        "namespace": namespace,
        "uid": uid,
    }
    return involved, reason, str(after.get("message"))


def flavour_of(group: str) -> str:
    return COSCHEDULING if group == X_K8S else VOLCANO_GROUP
