"""The replica-spec family: every kind of ``api.kinds.KINDS`` (and any other a ``kubeflow.org`` group serves).

Conditions Created / Running / Restarting / Succeeded / Failed, the State column is the last
condition (upstream's printer column), pods carry ``training.kubeflow.org/job-name`` and are owned
by the job (or by a batch Job it owns), replicas come from ``spec.*ReplicaSpecs``, training progress
from ``status.trainingProgress``. The operator runs one controller per kind (``operator.families``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainyard.api import jobshapes, labels, training
from trainyard.api.crd import crd_for
from trainyard.api.family import Family, FamilyKind
from trainyard.api.jobshapes import COMPLETED, FAILED, JobSample
from trainyard.api.jobview import JobView, age, conditions, ended, job_age, spec_of, status_of, training_columns
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import KINDS
from trainyard.api.kueue.integration import Finish, Integration, Lookup, true_condition
from trainyard.api.meta import Obj, parse_time

NAME = "replica-specs"


def replica_specs(job: Obj) -> Obj:
    """``spec.<x>ReplicaSpecs`` of any Kubeflow v1 job kind."""
    for key, value in spec_of(job).items():
        if key.endswith("ReplicaSpecs") and isinstance(value, dict):
            return value
    return {}


def last_condition(job: Obj) -> str:
    """The State column: the last condition's type (upstream's printer column), "Created" before any."""
    found = conditions(job)
    return str(found[-1]["type"]) if found else "Created"


def replicas_summary(job: Obj) -> str:
    statuses = status_of(job).get("replicaStatuses") or {}
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
    return spec_of(job).get("runPolicy") or {}


def duration(job: Obj) -> str:
    """How long a v1 job has run (to its completion, once complete)."""
    status = status_of(job)
    start = status.get("startTime")
    if not start:
        return "-"
    end = status.get("completionTime")
    return age(start, parse_time(end)) if end else age(start)


def restarts(job: Obj) -> str:
    return str(status_of(job).get("restartCount", 0))


def replica_job_fields(job: Obj) -> list[tuple[str, str]]:
    """``yard describe``'s lines about a v1 job's run: started, completed, restarts."""
    status = status_of(job)
    out = []
    if status.get("startTime"):
        out.append(("Started", str(status["startTime"])))
    if status.get("completionTime"):
        out.append(("Completed", f"{status['completionTime']} (ran {duration(job)})"))
    limit = _run_policy(job).get("backoffLimit")
    out.append(("Restarts", restarts(job) + (f" (backoffLimit {limit})" if limit is not None else "")))
    return out


VIEW = JobView(
    family="Kubeflow v1",
    state=last_condition,
    succeeded="Succeeded",
    pod_labels=lambda name: {labels.JOB_NAME: name},
    summary=replicas_summary,
    wanted=wanted_replicas,
    columns=(
        *training_columns(training.from_training_progress, ended("Succeeded", "Failed")),
        ("AGE", job_age),
        ("REPLICAS", replicas_summary),
    ),
    wide_columns=(
        *training_columns(training.from_training_progress, ended("Succeeded", "Failed"), wide=True),
        ("DURATION", duration),
        ("RESTARTS", restarts),
    ),
    fields=replica_job_fields,
    deadline=lambda job: _run_policy(job).get("activeDeadlineSeconds"),
    training=training.from_training_progress,
)


# v1 condition types, most telling first: the first True one is the state.
_V1_STATES = (
    ("Failed", FAILED),
    ("Succeeded", COMPLETED),
    ("Suspended", "Suspended"),
    ("Restarting", "Restarting"),
    ("Running", "Running"),
)


def sample(job: Obj) -> JobSample:
    """The per-job metrics' reading: state from the conditions, progress from ``status.trainingProgress``."""
    status = status_of(job)
    state = next((s for ctype, s in _V1_STATES if jobshapes.true_condition(status, ctype)), "Pending")
    workers, gpus = 0, Decimal(0)
    for replica in replica_specs(job).values():
        count: Any = replica.get("replicas", 1) if isinstance(replica, dict) else 0
        count = count if isinstance(count, int) else 0
        pod = (replica.get("template") or {}).get("spec") or {} if isinstance(replica, dict) else {}
        workers += count
        gpus += count * sum((jobshapes.gpus(c.get("resources")) for c in pod.get("containers") or []), Decimal(0))
    progress = status.get("trainingProgress") or {}
    loss, accuracy = jobshapes.loss_and_accuracy(progress.get("metrics"))
    finished, reason = jobshapes.ended(status, state)
    return JobSample(
        state=state,
        progress=jobshapes.number(progress.get("progressPercentage")),
        epoch=jobshapes.number(progress.get("currentEpoch")),
        loss=loss,
        accuracy=accuracy,
        workers=workers,
        gpus=float(gpus),
        started=jobshapes.time_of(status.get("startTime")),
        finished=finished,
        failure_reason=reason,
    )


def _kinds() -> tuple[FamilyKind, ...]:
    return tuple(
        FamilyKind(
            kind=i.kind,
            plural=i.plural,
            singular=i.singular,
            short_names=i.short_names,
            group=i.group,
            version=i.version,
            default_container=i.default_container,
        )
        for i in KINDS.values()
    )


def _ordered_specs(info: KindInfo, job: Obj) -> list[tuple[str, Obj]]:
    """The job's replica specs in the kind's replica order (Kueue's ``OrderedReplicaTypes``)."""
    specs = {k.lower(): (k, v) for k, v in replica_specs(job).items() if isinstance(v, dict)}
    order = [t.lower() for t in info.replica_types]
    known = [specs[t] for t in order if t in specs]
    return known + [specs[t] for t in specs if t not in order]


def _podsets(info: KindInfo) -> Any:
    def podsets(job: Obj, lookup: Lookup) -> list[Obj] | None:
        out = []
        for rtype, spec in _ordered_specs(info, job):
            count = spec.get("replicas", info.default_replicas.get(rtype, 1))
            count = count if isinstance(count, int) else 1
            out.append({"name": rtype.lower(), "count": count, "template": spec.get("template") or {}})
        return out

    return podsets


def _finished(job: Obj) -> Finish:
    found = true_condition(job, "Succeeded", "Failed")
    if found is None:
        return Finish(False)
    return Finish(True, found["type"] == "Succeeded", str(found.get("message") or ""))


def _active(job: Obj) -> bool:
    statuses = status_of(job).get("replicaStatuses") or {}
    return any(isinstance(rs, dict) and rs.get("active") for rs in statuses.values())


def _priority_class(info: KindInfo) -> Any:
    def priority_class(job: Obj) -> str:
        chosen = (_run_policy(job).get("schedulingPolicy") or {}).get("priorityClass")
        if chosen:
            return str(chosen)
        for _, spec in _ordered_specs(info, job):
            name = ((spec.get("template") or {}).get("spec") or {}).get("priorityClassName")
            if name:
                return str(name)
        return ""

    return priority_class


def queueing() -> tuple[Integration, ...]:
    """Kueue's kubeflow integrations (``jobs/kubeflow``, ``jobs/mpijob``): one per kind."""
    return tuple(
        Integration(
            group=info.group,
            version=info.version,
            kind=info.kind,
            plural=info.plural,
            suspend_path=("spec", "runPolicy", "suspend"),
            podsets=_podsets(info),
            finished=_finished,
            active=_active,
            priority_class=_priority_class(info),
        )
        for info in KINDS.values()
    )


FAMILY = Family(
    name=NAME,
    kinds=_kinds,
    crds=lambda: [crd_for(info) for info in KINDS.values()],
    view=VIEW,
    sample=sample,
    open_groups=True,
    queueing=queueing,
)
