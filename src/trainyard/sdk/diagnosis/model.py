"""The values a diagnosis reads and returns: a job's ``Snapshot`` and its ``Finding``s.

A ``Snapshot`` is everything ``yard doctor`` read about one job, as the API returned it (plain
dicts): the job, its pods, the events about them, the last log lines of their containers (the
current run and, for a restarted container, the previous one), the nodes and the pods bound to
them (what is free), the PersistentVolumeClaims the pods mount, the job's Kueue Workload and the
lines ``api.kueue.views`` says about its wait, and ``now``. A ``Finding`` names a cause, a remedy
and the evidence (which pod, which event, which log line). Pure: the helpers read the snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from trainyard.api import labels
from trainyard.api.jobview import JobView
from trainyard.api.meta import Obj
from trainyard.sdk.replicas import ContainerState, container_state, event_time, replica_name

Severity = Literal["error", "warning"]
"""``error``: the job fails or cannot make progress until someone changes something;
``warning``: it waits or lingers (a queue, a process that does not exit)."""


@dataclass(frozen=True)
class Settings:
    """What the rules take as long enough."""

    finished_grace_seconds: float = 60.0
    """How long pods may run on after training reported 100 % before it is a finding."""
    log_lines: int = 5
    """How many of a container's last log lines a finding quotes."""


@dataclass(frozen=True)
class Snapshot:
    job: Obj
    view: JobView
    now: datetime
    container: str | None = None
    """The kind's default container (a pod's first when None)."""
    pods: Sequence[Obj] = ()
    events: Sequence[Obj] = ()
    logs: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Pod name -> the last lines of its main container's current (or last) run."""
    previous: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Pod name -> the last lines of its main container's previous run (``logs --previous``)."""
    nodes: Sequence[Obj] = ()
    node_pods: Sequence[Obj] = ()
    """Every pod bound to a node (any namespace): what the nodes' resources are used by."""
    claims: Sequence[Obj] = ()
    workload: Obj | None = None
    queue_lines: Sequence[tuple[str, str]] = ()
    settings: Settings = field(default_factory=Settings)

    @property
    def name(self) -> str:
        return str(self.job["metadata"]["name"])

    @property
    def namespace(self) -> str:
        return str(self.job["metadata"].get("namespace") or "default")


@dataclass(frozen=True)
class Finding:
    rule: str
    """A short name of the failure (``OOMKilled``, ``GangDoesNotFit``), for tools."""
    severity: Severity
    cause: str
    remedy: str
    evidence: tuple[str, ...] = ()
    pods: tuple[str, ...] = ()
    """The pods the finding explains: no later rule explains them again."""

    def lines(self) -> list[str]:
        """The finding as ``yard doctor`` and ``yard describe`` print it."""
        return [self.cause, f"  fix: {self.remedy}", *(f"  seen: {e}" for e in self.evidence)]

    def to_dict(self) -> dict[str, object]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "cause": self.cause,
            "remedy": self.remedy,
            "evidence": list(self.evidence),
            "pods": list(self.pods),
        }


# -- readings shared by the rules ----------------------------------------------------------------


def pod_name(pod: Obj) -> str:
    return str(pod["metadata"]["name"])


def who(pod: Obj) -> str:
    """``worker-0 (pod j-worker-0)``: how a finding names a pod."""
    replica = replica_name(pod)
    return f"{replica} (pod {pod_name(pod)})" if replica != pod_name(pod) else f"pod {pod_name(pod)}"


def main_container(snap: Snapshot, pod: Obj) -> str | None:
    names = [str(c.get("name")) for c in (pod.get("spec") or {}).get("containers") or []]
    return snap.container if snap.container in names else (names[0] if names else snap.container)


def container_spec(snap: Snapshot, pod: Obj) -> Obj:
    """The pod's main container as its spec says it ({} when it has none)."""
    name = main_container(snap, pod)
    return next((c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == name), {})


def state_of(snap: Snapshot, pod: Obj) -> ContainerState:
    return container_state(pod, main_container(snap, pod))


def events_about(snap: Snapshot, name: str, *reasons: str) -> list[Obj]:
    """Events about the object called ``name`` (oldest first), of these reasons when any are given."""
    return [
        e
        for e in sorted(snap.events, key=event_time)
        if (e.get("involvedObject") or {}).get("name") == name and (not reasons or e.get("reason") in reasons)
    ]


def event_line(event: Obj) -> str:
    count = event.get("count") or 1
    times = f" (x{count})" if int(count) > 1 else ""
    inv = event.get("involvedObject") or {}
    about = f"{str(inv.get('kind', '')).lower()}/{inv.get('name')}"
    return f"event {event.get('reason')} on {about}{times}: {event.get('message', '')}"


def log_tail(snap: Snapshot, pod: Obj, *, previous_first: bool = False) -> tuple[list[str], str]:
    """The pod's last log lines and where they come from (``log`` or ``previous log``)."""
    name = pod_name(pod)
    current, previous = list(snap.logs.get(name) or ()), list(snap.previous.get(name) or ())
    if previous_first and previous:
        return previous, "previous log"
    if current:
        return current, "log"
    return previous, "previous log"


def quoted(snap: Snapshot, pod: Obj, lines: Sequence[str], where: str) -> list[str]:
    """Evidence lines quoting the last of ``lines`` of a pod's ``where``."""
    last = [line for line in lines if line.strip()][-snap.settings.log_lines :]
    return [f"{pod_name(pod)} {where}: {line.rstrip()}" for line in last]


def all_log_lines(snap: Snapshot, pod: Obj) -> list[tuple[str, str]]:
    """(where, line) of every log line read of a pod: its previous run first, then the current."""
    name = pod_name(pod)
    return [("previous log", line) for line in snap.previous.get(name) or ()] + [
        ("log", line) for line in snap.logs.get(name) or ()
    ]


def _template(snap: Snapshot, pod: Obj) -> tuple[str, list[Obj]] | None:
    """``spec.<x>ReplicaSpecs.<Type>.template.spec`` of the pod's replica type, and its containers."""
    rtype = str(((pod.get("metadata") or {}).get("labels") or {}).get(labels.REPLICA_TYPE) or "")
    for key, specs in (snap.job.get("spec") or {}).items():
        if not key.endswith("ReplicaSpecs") or not isinstance(specs, dict):
            continue
        for declared, rspec in specs.items():
            if declared.lower() == rtype:
                template = ((rspec or {}).get("template") or {}).get("spec") or {}
                return f"spec.{key}.{declared}.template.spec", list(template.get("containers") or [])
    return None


def field_path(snap: Snapshot, pod: Obj, tail: str) -> str:
    """Where in the job's spec a pod's main container's field is set, e.g.
    ``spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory``.

    Read from the job (its ``*ReplicaSpecs`` entry of the pod's replica type), never from a kind's
    name; a family without replica specs gets the field under the container's name.
    """
    container = main_container(snap, pod)
    found = _template(snap, pod)
    if found is None:
        return f"{tail} of container {container}"
    index = next((i for i, c in enumerate(found[1]) if c.get("name") == container), 0)
    return f"{found[0]}.containers[{index}].{tail}"


def pod_field_path(snap: Snapshot, pod: Obj, tail: str) -> str:
    """Where in the job's spec a pod-level field of the pod's template is set (``nodeSelector``)."""
    found = _template(snap, pod)
    return f"{found[0]}.{tail}" if found is not None else f"the pod template's {tail}"


def unexplained(snap: Snapshot, claimed: frozenset[str]) -> list[Obj]:
    """The job's pods no earlier rule explained."""
    return [p for p in snap.pods if pod_name(p) not in claimed]


def is_terminal(pod: Obj) -> bool:
    return str((pod.get("status") or {}).get("phase")) in ("Succeeded", "Failed")
