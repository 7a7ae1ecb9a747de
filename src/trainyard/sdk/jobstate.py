"""Reading a job's state from the API: its State word, its pods by replica, its events.

These are the views ``yard get/describe/logs/run`` show; they read whatever the operator wrote
and work for any job kind (``sdk.kinds``), each read the way its family's ``jobview.JobView`` says.
"""

from __future__ import annotations

from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.batch_v1 import Job as BatchJob
from lightkube.resources.core_v1 import Event, Pod

from trainyard.api import jobview
from trainyard.api.jobview import JobView
from trainyard.api.meta import Obj
from trainyard.client.resources import to_dict
from trainyard.sdk import replicas as pod_views
from trainyard.sdk.kinds import JobKind

FINISHED = ("Succeeded", "Failed")

# Pure readings of one job or pod (``api.jobview``, ``sdk.replicas``), under the names callers use.
conditions = jobview.conditions
true_conditions = jobview.true_conditions
replica_name = pod_views.replica_name
event_time = pod_views.event_time
ContainerState = pod_views.ContainerState
container_state = pod_views.container_state


def state(job: Obj, view: JobView) -> str:
    """The STATE column: a v1 job's last condition type ("Created" before any), a TrainJob's ``status.state``."""
    return view.state(job)


def finished(job: Obj, view: JobView) -> str | None:
    """The kind's success word ("Succeeded", "Complete") or "Failed" once the job is over, else None."""
    return view.outcome(job)


def condition(job: Obj, type_: str) -> Obj | None:
    return next((c for c in conditions(job) if c.get("type") == type_), None)


def job_pods(client: Client, kind: JobKind, name: str, namespace: str) -> list[Obj]:
    """The job's pods, master (or launcher, initializers) first, then by replica type and index.

    Found by the labels of the kind's family; a v1 job's only when it owns them, or owns the batch
    Job that does (an MPIJob's launcher runs in one).
    """
    selector: dict[str, Any] = dict(kind.view.pod_labels(name))
    selected = client.list(Pod, namespace=namespace, labels=selector)
    pods = [to_dict(p) for p in selected]
    if not kind.view.owned_pods_only:
        return sorted(pods, key=pod_views.pod_order)
    # The job-name label alone could match another kind's job of the same name.
    launchers: dict[str, bool] = {}

    def through_batch_job(ref: Obj) -> bool:
        if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
            return False
        owner = ref.get("name", "")
        if owner not in launchers:
            try:
                batch = to_dict(client.get(BatchJob, owner, namespace=namespace))
            except ApiError as exc:
                if exc.status.code != 404:  # a refusal (403) or a server error is told, not an empty list
                    raise
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
    return sorted(owned, key=pod_views.pod_order)


def event_names(kind: JobKind, name: str, pods: list[Obj]) -> set[str]:
    """The objects whose events are the job's: itself, its pods and, per its family, their owners."""
    names = {name, *(p["metadata"]["name"] for p in pods)}
    for pod in pods:
        for ref in pod["metadata"].get("ownerReferences") or []:
            if ref.get("kind") in kind.view.event_owners:
                names.add(str(ref.get("name", "")))
    return names


def pod_events(client: Client, namespace: str, names: set[str], uids: set[str]) -> list[Obj]:
    """Events about the named objects, oldest first."""
    events = [to_dict(e) for e in client.list(Event, namespace=namespace)]
    about = [
        e
        for e in events
        if (e.get("involvedObject") or {}).get("uid") in uids or (e.get("involvedObject") or {}).get("name") in names
    ]
    return sorted(about, key=event_time)
