"""The TrainingJob reconciler: a pure function from a TrainingJob and its owned job to a plan.

The seed's state machine, read from the owned ``kubeflow.org/v1`` job (``frameworks.trainingjob``
compiles it) on every pass, level-triggered:

* **Pending**: no owned job yet; this pass creates it (``apply``).
* **Initializing**: the owned job exists, not every worker runs yet (pods scheduling, starting).
* **Running**: the job's ``Running`` condition is True and every one of ``numWorkers`` is active.
* **Completed** / **Failed**: the job's ``Succeeded`` / ``Failed`` condition (``failureReason`` its
  reason and message; an early stop ends ``Completed`` with the job's reason).
* **Suspended**: ``spec.suspend`` (the owned job's ``runPolicy.suspend`` follows it both ways).

The status mirrors the job: ``workers`` from its replica statuses, ``restartCount``, start and
completion times, ``duration`` once finished, and ``status.trainingProgress`` (contract §2, written
by the status server) as ``progress``, ``currentEpoch``, ``totalEpochs``, ``metrics`` and
``checkpoint``. One condition per state reached; an event per state entered, after the status write.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from trainyard.api import trainingjob as tj
from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.controller.trainjob import condition, is_true, set_condition
from trainyard.frameworks.trainingjob import build
from trainyard.frameworks.trainingjob.build import checkpoint_location
from trainyard.kit.plans import Event, EventType

FINISHED = (tj.COMPLETED, tj.FAILED)
# The condition type each state sets True (Pending sets none: nothing happened yet).
STATE_CONDITIONS = {
    tj.INITIALIZING: tj.CREATED,
    tj.RUNNING: tj.RUNNING,
    tj.SUSPENDED: tj.SUSPENDED,
    tj.COMPLETED: tj.SUCCEEDED,
    tj.FAILED: tj.FAILED,
}


@dataclass(frozen=True)
class TrainingJobObserved:
    trainingjob: Obj
    job: Obj | None
    """The owned job (the kind ``spec.framework`` names, of the same name), as read; None if absent."""
    now: datetime


@dataclass(frozen=True)
class TrainingJobPlan:
    apply: tuple[Obj, ...] = ()
    """The owned job to create (no ``resourceVersion``) or replace as read (with one)."""
    status: Obj | None = None
    """The whole new status, only when it differs from the observed one."""
    events: tuple[Event, ...] = ()


def reconcile(observed: TrainingJobObserved) -> TrainingJobPlan:
    tjob = observed.trainingjob
    if tjob["metadata"].get("deletionTimestamp"):
        return TrainingJobPlan()
    old: Obj = tjob.get("status") or {}
    status = copy.deepcopy(old)
    now = format_time(observed.now)
    events: list[Event] = []
    job = observed.job
    apply: tuple[Obj, ...] = ()
    if job is None and old.get("state") not in FINISHED:
        wanted = build(tjob)
        apply = (wanted,)
        events += _creation_notes(tjob)
    elif job is not None:
        apply = _suspend_write(tjob, job)
    _mirror(status, tjob, job, observed.now)
    new_state = state(tjob, job)
    if old.get("state") in FINISHED:
        new_state = str(old["state"])  # the owned job may be gone (deleted by hand): a finished run stays so
    _transition(status, old.get("state"), new_state, job, now, events)
    return TrainingJobPlan(apply=apply, status=status if status != old else None, events=tuple(events))


def _creation_notes(tjob: Obj) -> list[Event]:
    """What the owned job will not do as the spec may suggest: said once, when it is created."""
    directory, uri = checkpoint_location(tjob)
    if uri is None or directory is not None:
        return []  # a directory, or S3, which CheckpointManager writes
    message = (
        f"checkpoints go to {uri} (TRAINYARD_CHECKPOINT_URI): an object store the training code writes itself; "
        "trainyard's stand-in trainer and CheckpointManager write only directories (pvc, nfs, local storage) and s3"
    )
    return [Event(EventType.WARNING, "CheckpointStorageNotLocal", message)]


def _suspend_write(tjob: Obj, job: Obj) -> tuple[Obj, ...]:
    want = bool((tjob.get("spec") or {}).get("suspend"))
    policy = (job.get("spec") or {}).get("runPolicy") or {}
    if bool(policy.get("suspend")) == want or _finished_job(job):
        return ()
    updated = copy.deepcopy(job)
    updated["spec"].setdefault("runPolicy", {})["suspend"] = want
    return (updated,)


def _finished_job(job: Obj) -> bool:
    status = job.get("status") or {}
    return is_true(status, "Succeeded") or is_true(status, "Failed")


def workers(job: Obj | None) -> Obj:
    rows = ((job or {}).get("status") or {}).get("replicaStatuses") or {}
    return {
        key: sum(int((row or {}).get(key) or 0) for row in rows.values()) for key in ("active", "succeeded", "failed")
    }


def state(tjob: Obj, job: Obj | None) -> str:
    """The seed's state of a TrainingJob whose owned job is ``job`` (None: not created yet)."""
    suspended = bool((tjob.get("spec") or {}).get("suspend"))
    if job is None:
        return tj.SUSPENDED if suspended else tj.PENDING
    status = job.get("status") or {}
    if is_true(status, "Succeeded"):
        return tj.COMPLETED
    if is_true(status, "Failed"):
        return tj.FAILED
    if suspended or is_true(status, "Suspended"):
        return tj.SUSPENDED
    wanted = int((tjob.get("spec") or {}).get("numWorkers") or 1)
    if is_true(status, "Running") and workers(job)["active"] >= wanted:
        return tj.RUNNING
    return tj.INITIALIZING


def _mirror(status: Obj, tjob: Obj, job: Obj | None, now: datetime) -> None:
    spec = tjob.get("spec") or {}
    gpus = int(spec.get("gpusPerWorker", 1) or 0)
    count = int(spec.get("numWorkers") or 1)
    status["resources"] = {"workers": count, "gpusPerWorker": gpus, "gpus": gpus * count}
    if job is None:
        return
    status["job"] = {"apiVersion": job.get("apiVersion"), "kind": job.get("kind"), "name": job["metadata"]["name"]}
    job_status = job.get("status") or {}
    status["workers"] = workers(job)
    status["restartCount"] = int(job_status.get("restartCount") or 0)
    for key in ("startTime", "completionTime"):
        if job_status.get(key):
            status[key] = job_status[key]
    if status.get("startTime") and status.get("completionTime"):
        seconds = (parse_time(status["completionTime"]) - parse_time(status["startTime"])).total_seconds()
        status["duration"] = _duration(int(seconds))
    _progress(status, job_status.get("trainingProgress") or {})
    del now  # the duration of an unfinished job is the reader's (kubectl's AGE, yard's DURATION)


def _duration(seconds: int) -> str:
    hours, rest = divmod(max(seconds, 0), 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes}m{secs}s" if hours else f"{minutes}m{secs}s" if minutes else f"{secs}s"


def _progress(status: Obj, progress: Obj) -> None:
    """``status.trainingProgress`` of the owned job in the seed's fields."""
    if progress.get("progressPercentage") is not None:
        status["progress"] = progress.get("progress") or f"{int(progress['progressPercentage'])}%"
    for source, target in (("currentEpoch", "currentEpoch"), ("totalEpochs", "totalEpochs")):
        if progress.get(source) is not None:
            status[target] = int(progress[source])
    if progress.get("metrics"):
        status["metrics"] = copy.deepcopy(progress["metrics"])
    if progress.get("lastCheckpoint"):
        status["checkpoint"] = copy.deepcopy(progress["lastCheckpoint"])


def _transition(status: Obj, before: Any, after: str, job: Obj | None, now: str, events: list[Event]) -> None:
    status["state"] = after
    if after in (tj.COMPLETED, tj.FAILED) and job is not None:
        found = condition(job.get("status") or {}, "Succeeded" if after == tj.COMPLETED else "Failed") or {}
        reason, message = str(found.get("reason") or after), str(found.get("message") or "")
    else:
        reason, message = after, f"TrainingJob is {after.lower()}"
    if after == tj.FAILED:
        status["failureReason"] = f"{reason}: {message}" if message else reason
    wanted = STATE_CONDITIONS.get(after)
    if wanted is not None:
        set_condition(status, wanted, "True", reason, message or f"TrainingJob is {after.lower()}", now)
    # Conditions of states left behind go False (Created stays: the job was made).
    for type_ in STATE_CONDITIONS.values():
        if type_ not in (wanted, tj.CREATED) and is_true(status, type_):
            set_condition(status, type_, "False", after, f"TrainingJob is {after.lower()}", now)
    if before != after:
        kind = EventType.WARNING if after == tj.FAILED else EventType.NORMAL
        events.append(Event(kind, after, message or f"TrainingJob is {after.lower()}"))
