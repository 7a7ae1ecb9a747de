"""Every kind Kueue queues here: each job family's ``queueing`` rows, and batch/v1 Job."""

from __future__ import annotations

from trainyard.api.families import FAMILIES
from trainyard.api.kueue import QUEUE_ANNOTATION, QUEUE_LABEL
from trainyard.api.kueue.integration import BATCH_JOB, Integration
from trainyard.api.meta import Obj


def integrations() -> tuple[Integration, ...]:
    return (*(row for family in FAMILIES.values() for row in family.queueing()), BATCH_JOB)


def integration_for(group: str, kind: str) -> Integration | None:
    return next((i for i in integrations() if i.group == group and i.kind == kind), None)


def queue_name(job: Obj) -> str:
    """The LocalQueue a job names: Kueue's label, else its deprecated annotation; "" for none."""
    meta = job.get("metadata") or {}
    return str(
        (meta.get("labels") or {}).get(QUEUE_LABEL) or (meta.get("annotations") or {}).get(QUEUE_ANNOTATION) or ""
    )


def suspend_if_queued(group: str, kind: str, job: Obj) -> bool:
    """Kueue's mutating webhook on create: a job that names a queue starts suspended. Whether it did."""
    if not queue_name(job):  # first: every create of every kind passes here
        return False
    found = integration_for(group, kind)
    if found is None:
        return False
    found.set_suspended(job)
    return True
