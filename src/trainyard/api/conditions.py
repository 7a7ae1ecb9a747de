"""The job-condition state machine, as pure functions over a ``JobStatus``.

Upstream rules (kubeflow-v1 reference §5.2), kept because ``kubectl get`` shows the *last*
condition as the job's State:

* Failed is terminal: once Failed=True, later updates are ignored.
* Same type, status and reason: no change (the message is not refreshed).
* The updated condition moves to the end of the list.
* Running and Restarting exclude each other.
* Succeeded or Failed flips an existing Running condition to False.
"""

from __future__ import annotations

from datetime import datetime

from trainyard.api.common import ConditionType, JobCondition, JobStatus
from trainyard.kit.conditions import transition_time

TRUE = "True"
FALSE = "False"


def find(status: JobStatus, ctype: ConditionType) -> JobCondition | None:
    return next((c for c in status.conditions if c.type == ctype), None)


def is_true(status: JobStatus, ctype: ConditionType) -> bool:
    cond = find(status, ctype)
    return cond is not None and cond.status == TRUE


def is_finished(status: JobStatus) -> bool:
    return is_true(status, ConditionType.SUCCEEDED) or is_true(status, ConditionType.FAILED)


def set_condition(
    status: JobStatus, ctype: ConditionType, *, reason: str, message: str, now: datetime, value: str = TRUE
) -> JobStatus:
    """Return ``status`` with the condition applied by the upstream rules (never mutates)."""
    if is_true(status, ConditionType.FAILED):
        return status
    current = find(status, ctype)
    if current is not None and current.status == value and current.reason == reason:
        return status
    transition = transition_time(
        current.status if current else None, current.last_transition_time if current else None, value, now
    )
    new = JobCondition(
        type=ctype,
        status=value,
        reason=reason,
        message=message,
        last_update_time=now,
        last_transition_time=transition,
    )
    kept: list[JobCondition] = []
    for cond in status.conditions:
        if cond.type == ctype:
            continue
        if value == TRUE and {cond.type, ctype} == {ConditionType.RUNNING, ConditionType.RESTARTING}:
            continue
        if (
            value == TRUE
            and ctype in (ConditionType.SUCCEEDED, ConditionType.FAILED)
            and cond.type == ConditionType.RUNNING
        ):
            cond = cond.model_copy(update={"status": FALSE, "last_update_time": now})
        kept.append(cond)
    return status.model_copy(update={"conditions": [*kept, new]})
