"""The reconciler: pure decisions (job, children, clock) → plan. No I/O; imports api and frameworks."""

from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, Plan
from trainyard.controller.reconcile import child_kinds, reconcile

__all__ = [
    "ChildRef",
    "ControllerSettings",
    "Observed",
    "Plan",
    "child_kinds",
    "reconcile",
]
