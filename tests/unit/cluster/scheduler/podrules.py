"""Builders for the scheduler's tests of the rules that read other pods: nodes in zones, pods with
labels, affinity and spread constraints, parsed as the scheduler parses them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainyard.cluster.clients.scheduler.placement import Decision, Group, schedule
from trainyard.cluster.clients.scheduler.snapshot import COSCHEDULING, NodeInfo, PodInfo, pod_info, usage

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
CAPACITY = {"cpu": 8000, "memory": 16 * 2**30, "pods": 110, "nvidia.com/gpu": 4}


def node(name: str, zone: str = "z1", **kw: Any) -> NodeInfo:
    labels = {HOST: name, ZONE: zone, **kw.pop("labels", {})}
    return NodeInfo(name, kw.pop("allocatable", CAPACITY), labels, **kw)


THREE = [node("n1", "z1"), node("n2", "z2"), node("n3", "z3")]


def pod(
    name: str,
    labels: dict[str, str] | None = None,
    *,
    on: str = "",
    cpu: str = "1",
    namespace: str = "ns",
    created: str = "2026-01-01T00:00:00Z",
    priority: int = 0,
    **spec: Any,
) -> PodInfo:
    manifest = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "creationTimestamp": created,
        },
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], "priority": priority, **spec},
        "status": {"phase": "Running" if on else "Pending"},
    }
    if on:
        manifest["spec"]["nodeName"] = on
    return pod_info(manifest)


def term(topology: str = HOST, namespaces: list[str] | None = None, **match: str) -> dict[str, Any]:
    out: dict[str, Any] = {"labelSelector": {"matchLabels": match}, "topologyKey": topology}
    if namespaces is not None:
        out["namespaces"] = namespaces
    return out


def affinity(*terms: dict[str, Any], anti: bool = False, preferred: bool = False) -> dict[str, Any]:
    kind = "podAntiAffinity" if anti else "podAffinity"
    if preferred:
        return {
            kind: {
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": t} for t in terms]
            }
        }
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(topology: str = ZONE, skew: int = 1, hard: bool = True, **extra: Any) -> dict[str, Any]:
    match = extra.pop("match", {"app": "w"})
    return {
        "maxSkew": skew,
        "topologyKey": topology,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": match},
        **extra,
    }


def running(*pods: PodInfo) -> dict[str, dict[str, PodInfo]]:
    out: dict[str, dict[str, PodInfo]] = {}
    for p in pods:
        out.setdefault(p.node_name, {})[p.uid] = p
    return out


def decide(
    pending: list[PodInfo],
    bound: list[PodInfo] = (),
    nodes: list[NodeInfo] = THREE,
    **kw: Any,  # type: ignore[assignment]
) -> Decision:
    return schedule(nodes, usage(nodes, bound), pending, kw.pop("groups", {}), {}, running(*bound))


def where(decision: Decision) -> dict[str, str]:
    return {p.name: n for p, n in decision.bindings}


def gang(name: str, members: list[PodInfo], minimum: int | None = None) -> tuple[list[PodInfo], dict]:
    pods = [replace(p, group=(COSCHEDULING, "ns", name)) for p in members]
    g = Group(key=(COSCHEDULING, "ns", name), min_member=len(pods) if minimum is None else minimum, members=tuple(pods))
    return pods, {g.key: g}
