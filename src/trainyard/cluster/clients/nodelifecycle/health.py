"""The node lifecycle controller's pure half: is a Node still heard from, and what follows if not.

As kube-controller-manager v1.32's ``nodelifecycle`` controller: a Node is heard from when its
Ready condition's ``lastHeartbeatTime`` or its Lease's ``spec.renewTime`` (``kube-node-lease``)
changes; the controller keeps *when it saw* the last change (``Probe.seen``, its own clock, so a
node's clock skew does not matter). Silent for longer than ``--node-monitor-grace-period``
(50 s by default since v1.32; ``--node-startup-grace-period``, 60 s, for a Node that never
posted Ready), its Ready, MemoryPressure, DiskPressure and PIDPressure conditions become
``Unknown`` with reason ``NodeStatusUnknown`` ("Kubelet stopped posting node status.").

Taints follow the conditions (taint-node-by-condition and the NoExecute pass): Ready False gives
``node.kubernetes.io/not-ready``, Unknown ``node.kubernetes.io/unreachable``, each with effects
NoSchedule and NoExecute and a ``timeAdded``; pressure conditions and ``spec.unschedulable``
give their NoSchedule taints. As upstream, NoExecute taints are not added while every node is
not Ready (the controller's "master disruption" mode: a plane that lost all its nodes has most
likely lost its own network, and evicting everything would not help) nor in a zone in partial
disruption (more than 2 and at least 55% of its nodes not Ready, in a zone of at most 50).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from trainyard.api.meta import Obj, format_time

NODE_MONITOR_GRACE_PERIOD = 50.0
NODE_STARTUP_GRACE_PERIOD = 60.0
UNREACHABLE = "node.kubernetes.io/unreachable"
NOT_READY = "node.kubernetes.io/not-ready"
UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
STATUS_UNKNOWN = ("NodeStatusUnknown", "Kubelet stopped posting node status.")
NEVER_UPDATED = ("NodeStatusNeverUpdated", "Kubelet never posted node status.")
# The conditions the controller sets Unknown with Ready (upstream's remaining node condition types).
WATCHED_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")
# Conditions whose True status gives a NoSchedule taint (taint-node-by-condition).
_PRESSURE_TAINTS = {
    "MemoryPressure": "node.kubernetes.io/memory-pressure",
    "DiskPressure": "node.kubernetes.io/disk-pressure",
    "PIDPressure": "node.kubernetes.io/pid-pressure",
    "NetworkUnavailable": "node.kubernetes.io/network-unavailable",
}
MANAGED_KEYS = frozenset({UNREACHABLE, NOT_READY, UNSCHEDULABLE, *_PRESSURE_TAINTS.values()})
UNHEALTHY_ZONE_THRESHOLD = 0.55
LARGE_CLUSTER_SIZE_THRESHOLD = 50


@dataclass(frozen=True)
class Probe:
    """What the controller last heard from a node, and when (on its own clock) it last changed."""

    heartbeat: str
    renew: str
    seen: datetime


@dataclass(frozen=True)
class Verdict:
    """What one pass decides for one Node; None fields: nothing to write."""

    ready: str
    """The Ready status after this pass: True, False or Unknown."""
    conditions: list[Obj] | None
    taints: list[Obj] | None
    went_silent: bool
    """This pass turned a Ready node Unknown (the controller's NodeNotReady event)."""
    wake_in: float | None
    """Seconds until the node goes silent if nothing is heard (a timer, not a poll)."""


def condition(node: Obj, type_: str) -> Obj | None:
    for c in (node.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None


def ready_status(node: Obj) -> str:
    found = condition(node, "Ready")
    return str(found.get("status") or "Unknown") if found else "Unknown"


def observe(previous: Probe | None, node: Obj, lease: Obj | None, now: datetime) -> Probe:
    """The probe after seeing ``node`` and its ``lease``: ``seen`` moves when either heartbeat did."""
    ready = condition(node, "Ready") or {}
    heartbeat = str(ready.get("lastHeartbeatTime") or "")
    renew = str(((lease or {}).get("spec") or {}).get("renewTime") or "")
    if previous is not None and (previous.heartbeat, previous.renew) == (heartbeat, renew):
        return previous
    return Probe(heartbeat, renew, now)


def assess(
    node: Obj,
    probe: Probe,
    now: datetime,
    *,
    grace: float = NODE_MONITOR_GRACE_PERIOD,
    startup_grace: float = NODE_STARTUP_GRACE_PERIOD,
    evict: bool = True,
) -> Verdict:
    """The pass over one Node; ``evict``: whether NoExecute taints may be added now (``evictions``)."""
    ready = condition(node, "Ready")
    period = grace if ready is not None else startup_grace
    silent_for = (now - probe.seen).total_seconds()
    conditions: list[Obj] | None = None
    went_silent = False
    if silent_for >= period:
        conditions, went_silent = _unknown(node, format_time(now))
    status = ready_status({"status": {"conditions": conditions}}) if conditions is not None else ready_status(node)
    seen = {"status": {"conditions": conditions}} if conditions is not None else node
    taints = wanted_taints(node, seen, now, evict=evict)
    wake_in = None if silent_for >= period else period - silent_for
    return Verdict(status, conditions, taints, went_silent, wake_in)


def _unknown(node: Obj, now: str) -> tuple[list[Obj] | None, bool]:
    """The node's conditions with the watched ones Unknown (None: they already are); whether Ready was True."""
    current = [dict(c) for c in (node.get("status") or {}).get("conditions") or [] if isinstance(c, dict)]
    by_type = {c.get("type"): c for c in current}
    created = str((node.get("metadata") or {}).get("creationTimestamp") or now)
    changed = False
    was_ready = (by_type.get("Ready") or {}).get("status") == "True"
    for type_ in WATCHED_CONDITIONS:
        found = by_type.get(type_)
        if found is None:
            reason, message = NEVER_UPDATED
            current.append(
                {
                    "type": type_,
                    "status": "Unknown",
                    "reason": reason,
                    "message": message,
                    "lastHeartbeatTime": created,
                    "lastTransitionTime": now,
                }
            )
            changed = True
        elif found.get("status") != "Unknown":
            reason, message = STATUS_UNKNOWN
            found.update(status="Unknown", reason=reason, message=message, lastTransitionTime=now)
            changed = True
    return (current if changed else None), was_ready and changed


def wanted_taints(node: Obj, conditions_of: Obj, now: datetime, *, evict: bool = True) -> list[Obj] | None:
    """``node``'s taints as its conditions (read from ``conditions_of``) and ``spec.unschedulable`` want them;
    None when they already are. Taints of other keys are kept as they are."""
    current = [t for t in (node.get("spec") or {}).get("taints") or [] if isinstance(t, dict)]
    wanted: set[tuple[str, str]] = set()
    # A node that has no Ready condition yet (registering) gets none: its startup grace decides.
    ready = ready_status(conditions_of) if condition(conditions_of, "Ready") else "True"
    for_ready = {"False": NOT_READY, "Unknown": UNREACHABLE}.get(ready)
    if for_ready:
        wanted.add((for_ready, "NoSchedule"))
        wanted.add((for_ready, "NoExecute"))
    for type_, key in _PRESSURE_TAINTS.items():
        if (condition(conditions_of, type_) or {}).get("status") == "True":
            wanted.add((key, "NoSchedule"))
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.add((UNSCHEDULABLE, "NoSchedule"))
    have = {(t.get("key"), t.get("effect")) for t in current if t.get("key") in MANAGED_KEYS}
    if not evict:
        # No new NoExecute taint while evictions are stopped; those already there go (markNodeAsReachable).
        wanted = {w for w in wanted if w[1] != "NoExecute"}
    kept = [t for t in current if t.get("key") not in MANAGED_KEYS or (t.get("key"), t.get("effect")) in wanted]
    added = [{"key": key, "effect": effect, "timeAdded": format_time(now)} for key, effect in sorted(wanted - have)]
    if not added and len(kept) == len(current):
        return None
    return kept + added


# -- disruption: when NoExecute taints may be added ---------------------------------------------


def zone_of(node: Obj) -> str:
    """Upstream's zone key: region and zone labels (empty when the node has neither)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    region, zone = labels.get(REGION_LABEL, ""), labels.get(ZONE_LABEL, "")
    return f"{region}:\x00:{zone}" if region or zone else ""


def evictions(nodes: Iterable[Obj], ready: Mapping[str, str]) -> dict[str, bool]:
    """Per zone, whether NoExecute taints may be added: not while every node of the plane is not
    Ready (master disruption), nor in a zone of at most 50 nodes in partial disruption."""
    zones: dict[str, list[bool]] = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name") or ""
        zones.setdefault(zone_of(node), []).append(ready.get(name, ready_status(node)) == "True")
    all_down = bool(zones) and all(not any(states) for states in zones.values())
    out = {}
    for zone, states in zones.items():
        down = sum(1 for s in states if not s)
        partial = down > 2 and down / len(states) >= UNHEALTHY_ZONE_THRESHOLD and any(states)
        out[zone] = not all_down and not (partial and len(states) <= LARGE_CLUSTER_SIZE_THRESHOLD)
    return out


# -- the node's pods --------------------------------------------------------------------------


def pod_not_ready(pod: Obj, now: str) -> list[Obj] | None:
    """The pod's conditions with Ready False (MarkPodsNotReady), or None when it has no Ready True."""
    conditions: Sequence[Obj] = (pod.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") != "False" for c in conditions):
        return None
    return [
        {**c, "status": "False", "lastTransitionTime": now} if c.get("type") == "Ready" else dict(c) for c in conditions
    ]
