"""What the simulated cloud is asked to do to a node's machine, decided purely from its Node.

``yard node`` asks through two annotations on the Node (the CLI writes them; ``pool`` acts):

* ``trainyard.dev/power: "off"``: the machine is stopped at once (a crash, a pulled plug); gone
  again, it boots.
* ``trainyard.dev/preemption-notice: <RFC 3339 deadline>``: a spot interruption. From the notice
  on, the node carries ``trainyard.dev/spot-interruption:NoSchedule`` (nothing new lands there) and
  a ``SpotInterruption`` condition; at the deadline the machine is reclaimed: its pods get the
  kubelet's graceful node shutdown, then the Node is deleted.

``plan`` returns what to do about one node now (``MachinePlan``); ``pool`` applies it. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from trainyard.api.meta import Obj, format_time, parse_time

POWER_ANNOTATION = "trainyard.dev/power"
NOTICE_ANNOTATION = "trainyard.dev/preemption-notice"
SPOT_TAINT = {"key": "trainyard.dev/spot-interruption", "effect": "NoSchedule"}
SPOT_CONDITION = "SpotInterruption"
SPOT_REASON = "SpotInterruptionNotice"
# The longest a pod gets between SIGTERM and SIGKILL when its node is reclaimed (GKE gives spot
# nodes' pods 30 s of graceful node shutdown; a pod asking less gets its own).
RECLAIM_GRACE_SECONDS = 30.0


@dataclass(frozen=True)
class MachinePlan:
    power_off: bool = False
    power_on: bool = False
    # A spot notice seen for the first time: taint, condition and events to write.
    notice: Obj | None = None
    reclaim: bool = False
    requeue: float | None = None  # seconds until the deadline
    problem: str | None = None  # an annotation that cannot be read, for a Warning event


def deadline(node: Obj) -> datetime | None:
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(NOTICE_ANNOTATION)
    return parse_time(text) if text else None


def notice_condition(at: datetime, now: str, notice: str) -> Obj:
    return {
        "type": SPOT_CONDITION,
        "status": "True",
        "reason": SPOT_REASON,
        "message": f"spot instance interruption: the node is reclaimed at {format_time(at)} ({notice} notice); "
        "its pods are then terminated and it is removed",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def _has_taint(node: Obj) -> bool:
    return any(
        t.get("key") == SPOT_TAINT["key"] for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)
    )


def _has_condition(node: Obj) -> bool:
    return any(
        c.get("type") == SPOT_CONDITION
        for c in (node.get("status") or {}).get("conditions") or []
        if isinstance(c, dict)
    )


def plan(node: Obj, now: datetime, *, running: bool, reclaimed: bool) -> MachinePlan:
    """What to do about ``node``'s machine now: it runs an agent (``running``) or was reclaimed."""
    if reclaimed:
        return MachinePlan()
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    power = annotations.get(POWER_ANNOTATION)
    off = power == "off"
    try:
        at = deadline(node)
    except ValueError:
        text = annotations.get(NOTICE_ANNOTATION)
        return MachinePlan(
            power_off=off and running,
            power_on=not off and not running,
            problem=f"{NOTICE_ANNOTATION} {text!r} is not an RFC 3339 time: set it with `yard node preempt`",
        )
    if at is None:
        return MachinePlan(power_off=off and running, power_on=not off and not running)
    if now >= at:
        return MachinePlan(reclaim=True)
    noticed = _has_taint(node) and _has_condition(node)
    seconds = (at - now).total_seconds()
    return MachinePlan(
        power_off=off and running,
        power_on=not off and not running,
        notice=None if noticed else {"at": at},
        requeue=seconds,
    )
