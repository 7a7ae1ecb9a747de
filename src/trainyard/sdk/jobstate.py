"""Reading a job's state from the API: its State word, its pods by replica, its events.

These are the views ``yard get/describe/logs/run`` show; they read whatever the operator wrote
and work for any job kind (``sdk.kinds``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.batch_v1 import Job as BatchJob
from lightkube.resources.core_v1 import Event, Pod

from trainyard.api import labels
from trainyard.client import to_dict
from trainyard.sdk.kinds import JobKind

Obj = dict[str, Any]
FINISHED = ("Succeeded", "Failed")


def conditions(job: Obj) -> list[Obj]:
    return list((job.get("status") or {}).get("conditions") or [])


def state(job: Obj) -> str:
    """The State column: the last condition's type (upstream's printer column), "Created" before any."""
    found = conditions(job)
    return str(found[-1]["type"]) if found else "Created"


def true_conditions(job: Obj) -> set[str]:
    return {str(c["type"]) for c in conditions(job) if c.get("status") == "True"}


def finished(job: Obj) -> str | None:
    """ "Succeeded" or "Failed" once the job is over, else None."""
    true = true_conditions(job)
    return next((t for t in FINISHED if t in true), None)


def condition(job: Obj, type_: str) -> Obj | None:
    return next((c for c in conditions(job) if c.get("type") == type_), None)


def replica_name(pod: Obj) -> str:
    """``worker-1``: the replica type (lower case) and index a pod runs, from upstream's labels
    (index 0 for a pod with a type and no index: an MPIJob's launcher)."""
    meta_labels = (pod.get("metadata") or {}).get("labels") or {}
    rtype = meta_labels.get(labels.REPLICA_TYPE)
    index = meta_labels.get(labels.REPLICA_INDEX)
    if rtype is None:
        return str(pod["metadata"]["name"])
    if index is None:
        return f"{str(rtype).lower()}-0"
    return f"{str(rtype).lower()}-{index}"


def _order(pod: Obj) -> tuple[int, str, int]:
    meta_labels = pod["metadata"].get("labels") or {}
    rtype = str(meta_labels.get(labels.REPLICA_TYPE, "")).lower()
    try:
        index = int(meta_labels.get(labels.REPLICA_INDEX, 0))
    except ValueError:
        index = 0
    # Masters (and launchers, chiefs) first, as people read a job.
    return (0 if rtype in ("master", "launcher", "chief") else 1, rtype, index)


def job_pods(client: Client, kind: JobKind, name: str, namespace: str) -> list[Obj]:
    """The job's pods, master first then by replica type and index.

    Its own, and those of a batch Job it owns (an MPIJob's launcher runs in one).
    """
    pods = [to_dict(p) for p in client.list(Pod, namespace=namespace, labels={labels.JOB_NAME: name})]
    # The job-name label alone could match another kind's job of the same name.
    launchers: dict[str, bool] = {}

    def through_batch_job(ref: Obj) -> bool:
        if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
            return False
        owner = ref.get("name", "")
        if owner not in launchers:
            try:
                batch = to_dict(client.get(BatchJob, owner, namespace=namespace))
            except ApiError:
                batch = {}
            refs = (batch.get("metadata") or {}).get("ownerReferences") or []
            launchers[owner] = any(o.get("kind") == kind.kind and o.get("name") == name for o in refs)
        return launchers[owner]

    owned = [
        p
        for p in pods
        if not p["metadata"].get("ownerReferences")
        or any(
            (o.get("kind") == kind.kind and o.get("name") == name) or through_batch_job(o)
            for o in p["metadata"]["ownerReferences"]
        )
    ]
    return sorted(owned, key=_order)


def pod_events(client: Client, namespace: str, names: set[str], uids: set[str]) -> list[Obj]:
    """Events about the named objects, oldest first."""
    events = [to_dict(e) for e in client.list(Event, namespace=namespace)]
    about = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("uid") in uids or (e.get("involvedObject") or {}).get("name") in names
    ]
    return sorted(about, key=event_time)


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
