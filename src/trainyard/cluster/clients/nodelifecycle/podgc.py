"""PodGC's pure half: which pods the pod garbage collector force-deletes, as kube-controller-manager v1.32's.

Four sweeps over every pod, in upstream's order:

* terminated pods (phase neither Pending, Running nor Unknown) beyond ``--terminated-pod-gc-threshold``,
  evicted ones first, then the oldest;
* terminating pods on a node that is not Ready and carries ``node.kubernetes.io/out-of-service``
  (non-graceful node shutdown: nothing will ever confirm their end);
* orphans: pods bound to a node that no longer exists (missing for the quarantine, then not found
  by a direct read), which get the ``DisruptionTarget`` condition ``DeletionByPodGC``;
* terminating pods never bound to a node.

Every one is first marked ``Failed`` (unless it already ended), then deleted with grace period 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from trainyard.api.meta import Obj
from trainyard.cluster.clients.nodelifecycle import health, taints

OUT_OF_SERVICE = "node.kubernetes.io/out-of-service"
ORPHANED = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "DeletionByPodGC",
    "message": "PodGC: node no longer exists",
}


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _terminating(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _node_name(pod: Obj) -> str:
    return str((pod.get("spec") or {}).get("nodeName") or "")


def terminated(pod: Obj) -> bool:
    return _phase(pod) not in ("Pending", "Running", "Unknown")


def _evicted(pod: Obj) -> bool:
    return _phase(pod) == "Failed" and (pod.get("status") or {}).get("reason") == "Evicted"


def over_threshold(pods: Iterable[Obj], threshold: int) -> list[Obj]:
    """The terminated pods beyond ``threshold`` (0: keep all), evicted first, then by creation and name."""
    ended = [p for p in pods if terminated(p)]
    if threshold <= 0 or len(ended) <= threshold:
        return []
    ended.sort(key=lambda p: (not _evicted(p), p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
    return ended[: len(ended) - threshold]


def out_of_service(pods: Iterable[Obj], nodes: Mapping[str, Obj]) -> list[Obj]:
    """Terminating pods on a node that is not Ready and is tainted out-of-service."""
    out = []
    for pod in pods:
        node = nodes.get(_node_name(pod)) if _terminating(pod) else None
        if node is None or health.ready_status(node) == "True":
            continue
        if any(t.get("key") == OUT_OF_SERVICE for t in (node.get("spec") or {}).get("taints") or []):
            out.append(pod)
    return out


def missing_nodes(pods: Iterable[Obj], nodes: Mapping[str, Obj]) -> set[str]:
    """Names of nodes that pods are bound to but the cache does not hold."""
    return {n for n in map(_node_name, pods) if n and n not in nodes}


def orphans(pods: Iterable[Obj], gone: set[str]) -> list[Obj]:
    return [p for p in pods if _node_name(p) in gone]


def unscheduled_terminating(pods: Iterable[Obj]) -> list[Obj]:
    return [p for p in pods if _terminating(p) and not _node_name(p)]


def failed_status(pod: Obj, condition: Obj | None, now: str) -> Obj | None:
    """The status patch that marks ``pod`` Failed (with ``condition``), or None when it already ended."""
    if _phase(pod) in ("Succeeded", "Failed"):
        return None
    status: Obj = {"phase": "Failed"}
    if condition is not None:
        conditions: Sequence[Obj] | None = taints.disruption_conditions(pod, condition, now)
        if conditions is not None:
            status["conditions"] = conditions
    return status
