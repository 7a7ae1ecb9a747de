"""What one reconcile pass decided, as a value the operator applies (and tests inspect).

Order of application is fixed by the operator: allocate ports, deletes, creates, then the one
status write, then events (a plan that deletes the job does only that, then its events). Events
about creates and deletes are not in the plan: only the applier knows whether a create succeeded
or found the object already there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from trainyard.api.autoscaling import HorizontalPodAutoscaler
from trainyard.api.common import JobStatus
from trainyard.api.core import Pod, Service
from trainyard.api.podgroup import PodGroup


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class ChildRef:
    kind: str  # "Pod" or "Service"
    name: str


@dataclass(frozen=True)
class JobEvent:
    """An event about the job itself, emitted after the status write."""

    type: EventType
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    allocate_ports: tuple[str, ...] = ()
    """Host network mode: port keys the operator must allocate and record before pods exist."""
    delete: tuple[ChildRef, ...] = ()
    create: tuple[Pod | Service, ...] = ()
    status: JobStatus | None = None
    """The new status, only when it differs from the observed one."""
    events: tuple[JobEvent, ...] = ()
    requeue_after: timedelta | None = None
    """Run the pass again after this long even if nothing changes (deadlines, TTL)."""
    delete_job: bool = False
    """Delete the job itself (TTL after finish); the plan then holds nothing else but its events."""
    pod_group: PodGroup | None = None
    """Gang scheduling: the PodGroup to create (no resourceVersion) or to replace (with the observed
    one's), applied before any pod is created."""
    delete_pod_group: str | None = None
    """Gang scheduling: the name of the job's PodGroup to delete (job finished or suspended)."""
    hpa: HorizontalPodAutoscaler | None = None
    """Elastic PyTorchJob: the HPA to create (no resourceVersion) or to replace (with the observed
    one's)."""
    delete_hpa: str | None = None
    """Elastic PyTorchJob: the name of the job's HPA to delete (suspended, or no longer asked for)."""

    @property
    def empty(self) -> bool:
        return self == Plan()
