"""The reconciler: pure decisions (job, children, clock) → plan. No I/O; imports api and frameworks."""

from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, EventType, JobEvent, Plan, Told
from trainyard.controller.reconcile import owned_kinds, reconcile

__all__ = [
    "ChildRef",
    "ControllerSettings",
    "EventType",
    "JobEvent",
    "Observed",
    "Plan",
    "Told",
    "owned_kinds",
    "reconcile",
]
