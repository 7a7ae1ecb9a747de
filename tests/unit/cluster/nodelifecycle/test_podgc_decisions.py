"""PodGC's sweeps: terminated pods beyond the threshold, terminating pods on out-of-service nodes,
orphans of deleted nodes, unbound terminating pods; and the Failed status each is given first."""

from __future__ import annotations

from trainyard.api.meta import Obj
from trainyard.cluster.clients.nodelifecycle import podgc


def pod(name: str, phase: str = "Running", node: str = "n1", deleting: bool = False, created: str = "1") -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "t"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


def node(ready: str = "True", *taints: str) -> Obj:
    return {
        "spec": {"taints": [{"key": k, "effect": "NoExecute"} for k in taints]},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_terminated_beyond_the_threshold_evicted_first_then_oldest() -> None:
    pods = [pod("a", "Succeeded", created="1"), pod("b", "Failed", created="2"), pod("c", "Running")]
    pods[1]["status"]["reason"] = "Evicted"
    assert [p["metadata"]["name"] for p in podgc.over_threshold(pods, 1)] == ["b"]
    assert podgc.over_threshold(pods, 2) == [] and podgc.over_threshold(pods, 0) == []


def test_terminating_pods_on_a_not_ready_out_of_service_node_only() -> None:
    pods = [pod("a", deleting=True), pod("b"), pod("c", deleting=True, node="n2")]
    nodes = {"n1": node("Unknown", podgc.OUT_OF_SERVICE), "n2": node("True", podgc.OUT_OF_SERVICE)}
    assert [p["metadata"]["name"] for p in podgc.out_of_service(pods, nodes)] == ["a"]
    assert podgc.out_of_service(pods, {"n1": node("Unknown")}) == []


def test_orphans_and_unbound_terminating() -> None:
    pods = [pod("a", node="gone"), pod("b"), pod("c", node="", deleting=True)]
    assert podgc.missing_nodes(pods, {"n1": node()}) == {"gone"}
    assert [p["metadata"]["name"] for p in podgc.orphans(pods, {"gone"})] == ["a"]
    assert [p["metadata"]["name"] for p in podgc.unscheduled_terminating(pods)] == ["c"]


def test_failed_with_the_pod_gc_condition_unless_already_ended() -> None:
    status = podgc.failed_status(pod("a"), podgc.ORPHANED, "now")
    assert status is not None and status["phase"] == "Failed"
    assert status["conditions"][-1]["reason"] == "DeletionByPodGC"
    assert status["conditions"][-1]["message"] == "PodGC: node no longer exists"
    assert podgc.failed_status(pod("a", "Succeeded"), podgc.ORPHANED, "now") is None
