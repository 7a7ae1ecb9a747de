"""The reconciler: pure decisions (job, children, clock) → plan. No I/O; imports api and frameworks."""

from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, EventType, JobEvent, Plan
from trainyard.controller.reconcile import reconcile

__all__ = ["ChildRef", "ControllerSettings", "EventType", "JobEvent", "Observed", "Plan", "reconcile"]
