"""What a controller's pure half says it wants done, in words every controller shares.

Pure values only (no I/O, nothing of the kinds): the pure reconcilers of the operator and of the
embedded cluster's built-in controllers build them, and ``kit.applier`` carries them out. An
``Event`` is what users read in ``kubectl describe`` and ``kubectl get events``; a child's
deletion is told by its ``DeletionEvents`` only once the applier really deleted it (not when it
was already gone), which only the applier can know.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


@dataclass(frozen=True)
class Event:
    """A core/v1 Event about the object a plan is for, posted after the plan's status write."""

    type: EventType
    reason: str
    message: str

    @classmethod
    def normal(cls, reason: str, message: str) -> Event:
        return cls(EventType.NORMAL, reason, message)

    @classmethod
    def warning(cls, reason: str, message: str) -> Event:
        return cls(EventType.WARNING, reason, message)


@dataclass(frozen=True)
class DeletionEvents:
    """How deleting one child is told: ``done`` once the applier deleted it, a Warning with reason
    ``failed`` (message ``Error deleting: <error>``) when the delete fails; empty: not told at all."""

    done: tuple[Event, ...] = ()
    failed: str = ""


UNTOLD = DeletionEvents()
"""A deletion nobody is told about (the child is an implementation detail, or its owner's events say it)."""
