"""How ``yard`` reads the jobs of one family of kinds: STATE, outcome, pods, replicas and columns.

Two families share every verb (``get``, ``describe``, ``logs``, ``wait``, ``run``, ``delete``):

* ``REPLICA_JOBS``: Kubeflow v1's kinds (``api.kinds.KINDS``, and any other kind discovery finds
  in their groups). Conditions Created / Running / Restarting / Succeeded / Failed, the State
  column is the last condition (upstream's printer column), pods carry
  ``training.kubeflow.org/job-name`` and are owned by the job (or by a batch Job it owns),
  replicas come from ``spec.*ReplicaSpecs``.
* ``TRAINJOBS``: Kubeflow Trainer v2's TrainJob, which is no replica-spec kind. It has only
  Suspended / Complete / Failed conditions (a Running condition would hide "Running" from the
  official SDK), so STATE is trainyard's ``status.state``; its pods are its JobSet's
  (``jobset.sigs.k8s.io/jobset-name``), one step per node (``node-<completion index>``); its
  status holds ``jobsStatus`` and, when training code reports it, ``trainerStatus``.

Each family reads its jobs' training progress (PROGRESS and EPOCH columns, describe's Training
section, the progress line) with the ``sdk.training`` reader of its status shape.

Functions of API objects as the server returns them (plain dicts); only the ages read the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainyard.api import jobset, labels, trainer, trainingjob
from trainyard.api.meta import parse_time
from trainyard.sdk import training
from trainyard.sdk.training import Training

Obj = dict[str, Any]
Column = tuple[str, Callable[[Obj], str]]
"""A column of ``yard get <kind>``: its header and how a job's cell is read."""


def conditions(job: Obj) -> list[Obj]:
    return list((job.get("status") or {}).get("conditions") or [])


def true_conditions(job: Obj) -> set[str]:
    return {str(c["type"]) for c in conditions(job) if c.get("status") == "True"}


def age(since: str | None, now: datetime | None = None) -> str:
    """kubectl's short ages: 45s, 3m, 2h, 4d."""
    if not since:
        return "<unknown>"
    try:
        seconds = int(((now or datetime.now(UTC)) - parse_time(since)).total_seconds())
    except ValueError:
        return "<unknown>"
    seconds = max(seconds, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def job_age(job: Obj) -> str:
    return age(job["metadata"].get("creationTimestamp"))


def _spec(job: Obj) -> Obj:
    return job.get("spec") or {}


def _status(job: Obj) -> Obj:
    return job.get("status") or {}


# -- Kubeflow v1 ---------------------------------------------------------------------------------


def replica_specs(job: Obj) -> Obj:
    """``spec.<x>ReplicaSpecs`` of any Kubeflow v1 job kind."""
    for key, value in _spec(job).items():
        if key.endswith("ReplicaSpecs") and isinstance(value, dict):
            return value
    return {}


def last_condition(job: Obj) -> str:
    """The State column: the last condition's type (upstream's printer column), "Created" before any."""
    found = conditions(job)
    return str(found[-1]["type"]) if found else "Created"


def replicas_summary(job: Obj) -> str:
    statuses = _status(job).get("replicaStatuses") or {}
    parts = []
    for rtype, rs in statuses.items():
        bits = [f"{rs.get(k)} {k}" for k in ("active", "succeeded", "failed") if rs.get(k)]
        parts.append(f"{rtype}: {', '.join(bits) or '-'}")
    if not parts:
        parts = [f"{rtype}: {spec.get('replicas', 1)} wanted" for rtype, spec in replica_specs(job).items()]
    return "; ".join(parts) or "-"


def wanted_replicas(job: Obj) -> list[str]:
    return [
        f"{rtype.lower()}-{i}"
        for rtype, spec in replica_specs(job).items()
        for i in range(int(spec.get("replicas", 1)))
    ]


def _run_policy(job: Obj) -> Obj:
    return _spec(job).get("runPolicy") or {}


def duration(job: Obj) -> str:
    """How long a v1 job has run (to its completion, once complete)."""
    status = _status(job)
    start = status.get("startTime")
    if not start:
        return "-"
    end = status.get("completionTime")
    return age(start, parse_time(end)) if end else age(start)


def restarts(job: Obj) -> str:
    return str(_status(job).get("restartCount", 0))


def replica_job_fields(job: Obj) -> list[tuple[str, str]]:
    """``yard describe``'s lines about a v1 job's run: started, completed, restarts."""
    status = _status(job)
    out = []
    if status.get("startTime"):
        out.append(("Started", str(status["startTime"])))
    if status.get("completionTime"):
        out.append(("Completed", f"{status['completionTime']} (ran {duration(job)})"))
    limit = _run_policy(job).get("backoffLimit")
    out.append(("Restarts", restarts(job) + (f" (backoffLimit {limit})" if limit is not None else "")))
    return out


# -- Kubeflow Trainer v2 -------------------------------------------------------------------------


def trainjob_state(job: Obj) -> str:
    """trainyard's ``status.state``; from the conditions when another controller wrote the status."""
    written = _status(job).get("state")
    if written:
        return str(written)
    true = true_conditions(job)
    for type_ in (trainer.FAILED, trainer.COMPLETE, trainer.SUSPENDED):
        if type_ in true:
            return type_
    return "Created"  # what the official SDK calls a TrainJob before it runs


def runtime_of(job: Obj) -> str:
    """``spec.runtimeRef``'s name; a namespaced TrainingRuntime's is marked as such."""
    ref = _spec(job).get("runtimeRef") or {}
    name = str(ref.get("name") or "-")
    return f"{name} ({trainer.TRAINING_RUNTIME})" if ref.get("kind") == trainer.TRAINING_RUNTIME else name


def num_nodes(job: Obj) -> int | None:
    """``spec.trainer.numNodes``; None when the runtime's ``mlPolicy`` decides."""
    value = (_spec(job).get("trainer") or {}).get("numNodes")
    return int(value) if value is not None else None


def nodes_column(job: Obj) -> str:
    nodes = num_nodes(job)
    return "-" if nodes is None else str(nodes)


def jobs_summary(job: Obj) -> str:
    """``jobsStatus`` in one cell: ``node: 2 active``; the nodes wanted before there is any."""
    parts = []
    for row in _status(job).get("jobsStatus") or []:
        bits = [f"{row.get(k)} {k}" for k in ("active", "succeeded", "failed", "suspended") if row.get(k)]
        parts.append(f"{row.get('name', '?')}: {', '.join(bits) or '-'}")
    if not parts:
        nodes = num_nodes(job)
        parts = [f"{trainer.NODE}: {nodes} wanted"] if nodes is not None else []
    return "; ".join(parts) or "-"


def wanted_nodes(job: Obj) -> list[str]:
    nodes = num_nodes(job)
    return [f"{trainer.NODE}-{i}" for i in range(nodes or 0)]


def trainjob_fields(job: Obj) -> list[tuple[str, str]]:
    """``yard describe``'s summary of a TrainJob's spec."""
    spec = _spec(job)
    tr = spec.get("trainer") or {}
    out = [("Runtime", runtime_of(job)), ("Nodes", nodes_column(job) if num_nodes(job) else "(the runtime's)")]
    if tr.get("image"):
        out.append(("Image", str(tr["image"])))
    if tr.get("command"):
        # One line: an inline script's newlines and indentation collapse to single spaces.
        command = " ".join(" ".join(str(c) for c in [*tr["command"], *(tr.get("args") or [])]).split())
        out.append(("Command", command if len(command) <= 100 else command[:97] + "..."))
    if tr.get("resourcesPerNode"):
        limits = (tr["resourcesPerNode"].get("limits") or tr["resourcesPerNode"].get("requests")) or {}
        out.append(("Per node", ", ".join(f"{k} {v}" for k, v in limits.items()) or "-"))
    initializer = spec.get("initializer") or {}
    for what in ("dataset", "model"):
        uri = (initializer.get(what) or {}).get("storageUri")
        if uri:
            out.append((f"{what.capitalize()} from", str(uri)))
    if spec.get("suspend"):
        out.append(("Suspend", "true"))
    if spec.get("activeDeadlineSeconds"):
        out.append(("Deadline", f"{spec['activeDeadlineSeconds']}s"))
    if spec.get("managedBy") and spec["managedBy"] != trainer.CONTROLLER_NAME:
        out.append(("Managed by", str(spec["managedBy"])))
    return out


def trainjob_sections(job: Obj) -> list[tuple[str, list[str], list[list[str]]]]:
    """``yard describe``'s status tables of a TrainJob: its replicated Jobs."""
    status = _status(job)
    keys = ("active", "ready", "succeeded", "failed", "suspended")
    jobs = [[str(row.get("name", "")), *(str(row.get(k, 0)) for k in keys)] for row in status.get("jobsStatus") or []]
    out = [("Jobs", ["NAME", *(k.upper() for k in keys)], jobs)]
    # The trainer's own report (``trainerStatus``) is describe's Training section (``JobView.training``).
    return out


# -- the families --------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobView:
    """What generic code needs to read a family's jobs; every field is data or a pure function."""

    family: str
    state: Callable[[Obj], str]
    """The STATE column."""
    succeeded: str
    """The condition type whose True status is success ("Succeeded", "Complete")."""
    pod_labels: Callable[[str], dict[str, str]]
    """Labels that select a job's pods, by the job's name."""
    summary: Callable[[Obj], str]
    """The REPLICAS cell in a table of several kinds."""
    wanted: Callable[[Obj], list[str]]
    """The replicas (``worker-0``, ``node-1``) the spec asks for, as ``replica_name`` names pods."""
    columns: tuple[Column, ...]
    """The columns after NAME and STATE in a table of this family's jobs only."""
    wide_columns: tuple[Column, ...] = ()
    owned_pods_only: bool = True
    """Keep only the selected pods owned by the job (or by a batch Job it owns): v1's job-name label
    alone could match another kind's job of the same name."""
    event_owners: tuple[str, ...] = ()
    """Kinds of the pods' owners whose events ``describe`` shows with the job's (a TrainJob's Jobs)."""
    fields: Callable[[Obj], list[tuple[str, str]]] = field(default=lambda job: [])
    """``describe``'s summary of the spec, after the common fields."""
    sections: Callable[[Obj], list[tuple[str, list[str], list[list[str]]]]] = field(default=lambda job: [])
    """``describe``'s status tables (title, headers, rows), before the replicas."""
    replicas_title: str = "Replicas"
    suspend_field: str = "spec.runPolicy.suspend"
    deadline: Callable[[Obj], Any] = field(default=lambda job: None)
    """The active deadline (seconds) that failed a job "past its deadline", for ``explain``."""
    deadline_field: str = "spec.runPolicy.activeDeadlineSeconds"
    backoff_field: str = "spec.runPolicy.backoffLimit"
    handled: Callable[[Obj], bool] = field(default=lambda job: bool(conditions(job)))
    """Whether a controller has written the job's status yet (else: is an operator running?)."""
    failed: str = "Failed"
    training: Callable[[Obj], Training | None] = field(default=lambda job: None)
    """The job's reported training progress, by its status shape (``sdk.training``); None if none."""

    def outcome(self, job: Obj) -> str | None:
        """``succeeded`` or ``failed`` (the kind's own words) once the job is over, else None."""
        true = true_conditions(job)
        return next((t for t in (self.succeeded, self.failed) if t in true), None)

    def is_running(self, job: Obj) -> bool:
        return self.state(job) == "Running" or "Running" in true_conditions(job)


def training_columns(
    read: Callable[[Obj], Training | None], over: Callable[[Obj], bool], *, wide: bool = False
) -> tuple[Column, ...]:
    """PROGRESS and EPOCH (``wide``: LOSS, ACCURACY and ETA) of a family whose status shape ``read``
    reads; ``over`` says a job has finished (it has no ETA then)."""

    def column(header: str) -> Column:
        return header, lambda job: training.cell(header, read(job), over=over(job))

    return tuple(column(h) for h in (training.WIDE_COLUMNS if wide else training.COLUMNS))


def _ended(*words: str) -> Callable[[Obj], bool]:
    return lambda job: bool(true_conditions(job) & set(words))


COMMON_COLUMNS: tuple[Column, ...] = (("AGE", job_age),)
"""The columns after NAME and STATE in a table of several families, before REPLICAS (each job's ``summary``)."""


REPLICA_JOBS = JobView(
    family="Kubeflow v1",
    state=last_condition,
    succeeded="Succeeded",
    pod_labels=lambda name: {labels.JOB_NAME: name},
    summary=replicas_summary,
    wanted=wanted_replicas,
    columns=(
        *training_columns(training.from_training_progress, _ended("Succeeded", "Failed")),
        ("AGE", job_age),
        ("REPLICAS", replicas_summary),
    ),
    wide_columns=(
        *training_columns(training.from_training_progress, _ended("Succeeded", "Failed"), wide=True),
        ("DURATION", duration),
        ("RESTARTS", restarts),
    ),
    fields=replica_job_fields,
    deadline=lambda job: _run_policy(job).get("activeDeadlineSeconds"),
    training=training.from_training_progress,
)

TRAINJOBS = JobView(
    family="Kubeflow Trainer v2",
    state=trainjob_state,
    succeeded=trainer.COMPLETE,
    pod_labels=lambda name: {jobset.JOBSET_NAME: name},
    summary=jobs_summary,
    wanted=wanted_nodes,
    columns=(
        ("RUNTIME", runtime_of),
        ("NODES", nodes_column),
        *training_columns(training.from_trainer_status, _ended(trainer.COMPLETE, trainer.FAILED)),
        ("AGE", job_age),
    ),
    wide_columns=(
        *training_columns(training.from_trainer_status, _ended(trainer.COMPLETE, trainer.FAILED), wide=True),
        ("JOBS", jobs_summary),
    ),
    owned_pods_only=False,  # the JobSet is named after the TrainJob; its pods belong to its Jobs
    event_owners=("Job",),
    fields=trainjob_fields,
    sections=trainjob_sections,
    replicas_title="Nodes",
    suspend_field="spec.suspend",
    deadline=lambda job: _spec(job).get("activeDeadlineSeconds"),
    deadline_field="spec.activeDeadlineSeconds",
    backoff_field="the runtime's replicated Jobs' backoffLimit",
    handled=lambda job: bool(_status(job)),  # Pending has no condition: the state is what tells
    training=training.from_trainer_status,
)


def trainingjob_view() -> JobView:
    """The seed's TrainingJob (``ml.example.com/v1``): its own ``status.state``; its pods are its owned
    v1 job's, found by the ``training-job`` label every worker carries."""

    def status_of(job: Obj) -> Obj:
        return _status(job)

    def workers_cell(job: Obj) -> str:
        counts = status_of(job).get("workers") or {}
        bits = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if counts.get(k)]
        return ", ".join(bits) or f"{_spec(job).get('numWorkers', '?')} wanted"

    def finished(job: Obj) -> bool:
        return status_of(job).get("state") in (trainingjob.COMPLETED, trainingjob.FAILED)

    def fields(job: Obj) -> list[tuple[str, str]]:
        spec, status = _spec(job), status_of(job)
        out = [
            ("Model", str(spec.get("model", "-"))),
            ("Dataset", str(spec.get("dataset", "-"))),
            ("Framework", f"{spec.get('framework', 'pytorch')} ({(status.get('job') or {}).get('kind', '-')})"),
            ("Workers", f"{spec.get('numWorkers', '-')} x {spec.get('gpusPerWorker', 1)} GPU"),
        ]
        for key in ("progress", "currentEpoch", "totalEpochs", "duration", "failureReason"):
            if status.get(key) is not None:
                out.append((key, str(status[key])))
        if status.get("metrics"):
            out.append(("Metrics", ", ".join(f"{k}={v}" for k, v in status["metrics"].items())))
        return out

    return JobView(
        family="TrainingJob (ml.example.com)",
        state=lambda job: str(status_of(job).get("state") or "Pending"),
        succeeded=trainingjob.SUCCEEDED,
        pod_labels=lambda name: {trainingjob.JOB_LABEL: name},
        summary=workers_cell,
        wanted=lambda job: [],
        columns=(*training_columns(training.from_flat_status, finished), ("AGE", job_age)),
        wide_columns=(*training_columns(training.from_flat_status, finished, wide=True), ("WORKERS", workers_cell)),
        owned_pods_only=False,  # the pods are the owned job's
        fields=fields,
        suspend_field="spec.suspend",
        deadline=lambda job: (_spec(job).get("failurePolicy") or {}).get("activeDeadlineSeconds"),
        deadline_field="spec.failurePolicy.activeDeadlineSeconds",
        backoff_field="spec.failurePolicy.backoffLimit",
        handled=lambda job: bool(status_of(job)),
        training=training.from_flat_status,
    )


TRAININGJOBS = trainingjob_view()


# -- pods of either family -----------------------------------------------------------------------


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
