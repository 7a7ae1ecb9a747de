"""The TrainingJob family: the seed's ``ml.example.com/v1`` TrainingJob, as ``yard`` and the SDK read it.

Its own ``status.state``; its pods are its owned v1 job's, found by the ``training-job`` label every
worker carries; its training progress is flat in its status (``progress: "45%"``, ``currentEpoch``).
"""

from __future__ import annotations

from trainyard.api import jobshapes, training, trainingjob
from trainyard.api.family import Family, FamilyKind
from trainyard.api.jobshapes import FAILED, JobSample
from trainyard.api.jobview import JobView, job_age, spec_of, status_of, training_columns
from trainyard.api.meta import Obj

NAME = "trainingjobs"
GPUS_PER_WORKER = 1
"""Seed 004's default ``gpusPerWorker``."""


def workers_cell(job: Obj) -> str:
    counts = status_of(job).get("workers") or {}
    bits = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if counts.get(k)]
    return ", ".join(bits) or f"{spec_of(job).get('numWorkers', '?')} wanted"


def finished(job: Obj) -> bool:
    return status_of(job).get("state") in (trainingjob.COMPLETED, trainingjob.FAILED)


def fields(job: Obj) -> list[tuple[str, str]]:
    spec, status = spec_of(job), status_of(job)
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


VIEW = JobView(
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
    deadline=lambda job: (spec_of(job).get("failurePolicy") or {}).get("activeDeadlineSeconds"),
    deadline_field="spec.failurePolicy.activeDeadlineSeconds",
    backoff_field="spec.failurePolicy.backoffLimit",
    handled=lambda job: bool(status_of(job)),
    training=training.from_flat_status,
)


def sample(job: Obj) -> JobSample:
    """The per-job metrics' reading: ``status.state``, ``progress`` as ``"45%"``, ``currentEpoch``, ``metrics``."""
    spec, status = spec_of(job), status_of(job)
    state = jobshapes.word(status.get("state"), "Pending")
    workers = spec.get("numWorkers")
    workers = workers if isinstance(workers, int) else None
    per_worker = spec.get("gpusPerWorker", GPUS_PER_WORKER)
    per_worker = per_worker if isinstance(per_worker, int) else GPUS_PER_WORKER
    loss, accuracy = jobshapes.loss_and_accuracy(status.get("metrics"))
    finished, reason = jobshapes.ended(status, state)
    if state == FAILED and status.get("failureReason") and reason == "Unknown":
        reason = jobshapes.word(status.get("failureReason"), "Unknown")
    return JobSample(
        state=state,
        progress=jobshapes.number(status.get("progress")),
        epoch=jobshapes.number(status.get("currentEpoch")),
        loss=loss,
        accuracy=accuracy,
        workers=workers,
        gpus=None if workers is None else float(workers * per_worker),
        started=jobshapes.time_of(status.get("startTime")),
        finished=finished,
        failure_reason=reason,
    )


FAMILY = Family(
    name=NAME,
    kinds=lambda: (
        FamilyKind(
            kind=trainingjob.KIND,
            plural=trainingjob.PLURAL,
            singular=trainingjob.SINGULAR,
            short_names=trainingjob.SHORT_NAMES,
            group=trainingjob.GROUP,
            version=trainingjob.VERSION,
        ),
    ),
    crds=lambda: [trainingjob.crd()],
    view=VIEW,
    sample=sample,
)
