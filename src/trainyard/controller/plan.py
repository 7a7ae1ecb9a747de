"""What one reconcile pass decided, as a value the operator applies (and tests inspect).

Order of application is fixed by the operator: allocate ports, owned children written
(``apply``, then ``patch_status``), deletes, creates, then the one status write, then events (a plan that deletes the
job does only that, then its events). Events about creates and deletes are not in the plan: only
the applier knows whether a create succeeded or found the object already there. What a delete is
told as, once it happened, is part of its ``ChildRef``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from trainyard.api.common import JobStatus
from trainyard.api.core import Pod, Service
from trainyard.api.meta import TypedObject
from trainyard.kit.plans import DeletionEvents, Event, EventType


@dataclass(frozen=True)
class ChildRef:
    """A child of the job, in the job's namespace, by apiVersion, kind and name."""

    kind: str
    name: str
    api_version: str = "v1"
    told: DeletionEvents | None = field(default=None, compare=False)
    """How its deletion is told; None: as upstream's pod and Service controls do. Not part of its
    identity: two references to one object are equal however their deletion is told."""

    def deletion(self) -> DeletionEvents:
        if self.told is not None:
            return self.told
        done = Event(EventType.NORMAL, f"SuccessfulDelete{self.kind}", f"Deleted {self.kind.lower()}: {self.name}")
        return DeletionEvents((done,))


@dataclass(frozen=True)
class StatusPatch:
    """A merge patch of an owned child's ``status`` (a null removes the field)."""

    child: ChildRef
    patch: dict[str, Any]


@dataclass(frozen=True)
class Plan:
    allocate_ports: tuple[str, ...] = ()
    """Host network mode: port keys the operator must allocate and record before pods exist."""
    apply: tuple[TypedObject, ...] = ()
    """Owned children other than the replicas (the gang's PodGroup, a plugin's HPA, ...): created
    when they carry no resourceVersion, else replaced as read (a newer version is a conflict, and
    a retry). Written before anything is deleted or created."""
    patch_status: tuple[StatusPatch, ...] = ()
    """Status patches of owned children, written right after ``apply`` (a launcher Job's
    ``startTime`` cleared before the Job may change)."""
    delete: tuple[ChildRef, ...] = ()
    """Children to delete, of any kind."""
    create: tuple[Pod | Service, ...] = ()
    """The replicas' pods and Services (and the rendezvous host's) to create."""
    status: JobStatus | None = None
    """The new status, only when it differs from the observed one."""
    events: tuple[Event, ...] = ()
    requeue_after: timedelta | None = None
    """Run the pass again after this long even if nothing changes (deadlines, TTL)."""
    delete_job: bool = False
    """Delete the job itself (TTL after finish); the plan then holds nothing else but its events."""

    @property
    def empty(self) -> bool:
        return self == Plan()
