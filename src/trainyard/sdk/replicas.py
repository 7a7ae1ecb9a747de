"""Which replica a pod of any family's job runs, in which order ``yard`` lists a job's pods, what its
main container is doing, and when an event happened.

Read from the labels the controllers put on pods (upstream's replica labels, a JobSet's replicated
Job and completion index); functions of API objects as the server returns them (plain dicts).
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.api import jobset, labels, trainer
from trainyard.api.meta import Obj


def pod_labels_of(pod: Obj) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("labels") or {})


def replica_name(pod: Obj) -> str:
    """``worker-1`` / ``node-1``: the replica a pod runs, from its labels.

    A v1 job's pod: its replica type (lower case) and index (0 for a type with no index: an
    MPIJob's launcher). A JobSet's pod (a TrainJob's): its replicated Job and completion index,
    which is the official SDK's step name (``node-<i>``; the SDK renumbers an MPI runtime's nodes
    after its launcher, this keeps the labels' numbers). Else the pod's name.
    """
    meta_labels = pod_labels_of(pod)
    rtype = meta_labels.get(labels.REPLICA_TYPE)
    if rtype is not None:
        index = meta_labels.get(labels.REPLICA_INDEX)
        return f"{str(rtype).lower()}-{index if index is not None else 0}"
    rjob = meta_labels.get(jobset.REPLICATED_JOB_NAME)
    if rjob is not None:
        index = meta_labels.get(labels.JOB_COMPLETION_INDEX)
        return f"{rjob}-{index}" if index is not None else str(rjob)
    return str(pod["metadata"]["name"])


def is_replica(pod: Obj) -> bool:
    meta_labels = pod_labels_of(pod)
    return labels.REPLICA_TYPE in meta_labels or jobset.REPLICATED_JOB_NAME in meta_labels


def job_of(pod: Obj) -> str | None:
    """The name of the job a pod runs for, from its labels."""
    meta_labels = pod_labels_of(pod)
    return meta_labels.get(labels.JOB_NAME) or meta_labels.get(jobset.JOBSET_NAME)


# Masters (and launchers, chiefs) first, as people read a job; a TrainJob's initializers before its nodes.
_FIRST = ("master", "launcher", "chief", trainer.DATASET_INITIALIZER, trainer.MODEL_INITIALIZER)


def pod_order(pod: Obj) -> tuple[int, str, int]:
    meta_labels = pod_labels_of(pod)
    rtype = str(meta_labels.get(labels.REPLICA_TYPE) or meta_labels.get(jobset.REPLICATED_JOB_NAME) or "").lower()
    try:
        index = int(meta_labels.get(labels.REPLICA_INDEX, meta_labels.get(labels.JOB_COMPLETION_INDEX, 0)))
    except ValueError:
        index = 0
    return (0 if rtype in _FIRST else 1, rtype, index)


def event_time(event: Obj) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or event["metadata"].get("creationTimestamp")
        or ""
    )


@dataclass(frozen=True)
class ContainerState:
    """What a pod's main container is doing, in one word and its details."""

    phase: str
    reason: str
    message: str
    restarts: int
    exit_code: int | None
    last_exit_code: int | None
    last_reason: str


def container_state(pod: Obj, container: str | None = None) -> ContainerState:
    status = pod.get("status") or {}
    phase = str(status.get("phase") or "Pending")
    statuses = status.get("containerStatuses") or []
    cs = next((c for c in statuses if c.get("name") == container), statuses[0] if statuses else {})
    current = cs.get("state") or {}
    last = (cs.get("lastState") or {}).get("terminated") or {}
    reason, message, exit_code = "", "", None
    if "waiting" in current:
        reason = current["waiting"].get("reason", "")
        message = current["waiting"].get("message", "")
    elif "terminated" in current:
        reason = current["terminated"].get("reason", "")
        message = current["terminated"].get("message", "")
        exit_code = current["terminated"].get("exitCode")
    if not reason and phase == "Pending":
        scheduled = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if scheduled and scheduled.get("status") == "False":
            reason, message = scheduled.get("reason", "Unschedulable"), scheduled.get("message", "")
    return ContainerState(
        phase=phase,
        reason=str(reason),
        message=str(message),
        restarts=int(cs.get("restartCount") or 0),
        exit_code=exit_code,
        last_exit_code=last.get("exitCode"),
        last_reason=str(last.get("reason") or ""),
    )
