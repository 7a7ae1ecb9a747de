"""Placement on a plane of three nodes (a nodes file: zones, GPUs, a tainted GPU node) with real
kubectl: anti-affinity lands one pod per node and says why the fourth waits, the FailedScheduling
message names taints and short GPUs as kube-scheduler does, and spread and affinity follow zones."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

NODES = """\
nodes:
  - name: node-a
    capacity: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 1, pods: 110}
    labels: {topology.kubernetes.io/zone: zone-a}
  - name: node-b
    capacity: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 1, pods: 110}
    labels: {topology.kubernetes.io/zone: zone-b}
  - name: node-c
    capacity: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 4, pods: 110}
    labels: {topology.kubernetes.io/zone: zone-c}
    taints: ["nvidia.com/gpu:NoSchedule"]
"""
SLEEP = "import time; time.sleep(600)"
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    spec: Path = tmp_path_factory.mktemp("placement-nodes") / "nodes.yaml"
    spec.write_text(NODES)
    yield from own_plane(tmp_path_factory, "yard-placement", "--nodes-file", str(spec))


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    k = Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))

    def ready() -> bool:
        nodes = k.json("get", "nodes")["items"]
        return len(nodes) == 3 and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions", []))
            for n in nodes
        )

    eventually(ready, timeout=90, what="three Ready nodes")
    return k


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"place-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "pods", "--all", "-n", name, "--grace-period=1")
    kubectl.run("delete", "namespace", name, "--wait=false")


def create(kubectl: Kubectl, ns: str, name: str, labels: dict[str, str] | None = None, **spec: Any) -> None:
    container: dict[str, Any] = {"name": "main", "image": "python", "command": ["python3", "-c", SLEEP]}
    container |= spec.pop("container", {})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container], **spec},
    }
    kubectl("create", "-f", "-", input=json.dumps(pod))


def node_of(kubectl: Kubectl, ns: str, name: str) -> str:
    def bound() -> str:
        return str(kubectl.json("get", "pod", name, "-n", ns)["spec"].get("nodeName") or "")

    return eventually(bound, timeout=60, what=f"{name} to be bound")


def unschedulable(kubectl: Kubectl, ns: str, name: str) -> str:
    def said() -> str:
        pod = kubectl.json("get", "pod", name, "-n", ns)
        for c in pod.get("status", {}).get("conditions", []):
            if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable":
                return str(c["message"])
        return ""

    return eventually(said, timeout=60, what=f"{name}'s PodScheduled=False")


def test_anti_affinity_lands_one_pod_per_node_and_the_fourth_waits_saying_why(kubectl: Kubectl, ns: str) -> None:
    rule = {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}
    spec = {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [rule]}},
        "tolerations": TOLERATE_GPU,
    }
    for i in range(3):
        create(kubectl, ns, f"w-{i}", {"app": "w"}, **spec)
    assert sorted(node_of(kubectl, ns, f"w-{i}") for i in range(3)) == ["node-a", "node-b", "node-c"]
    create(kubectl, ns, "w-3", {"app": "w"}, **spec)
    assert unschedulable(kubectl, ns, "w-3") == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
        f"preemption: 0/3 nodes are available: 3 {NO_VICTIMS}.."
    )


def test_taints_and_short_gpus_are_counted_in_kube_schedulers_words(kubectl: Kubectl, ns: str) -> None:
    gpus = {"resources": {"limits": {"nvidia.com/gpu": 2}}}
    create(kubectl, ns, "greedy", container=gpus)
    assert unschedulable(kubectl, ns, "greedy") == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: }, 2 Insufficient nvidia.com/gpu. "
        f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}.."
    )
    create(kubectl, ns, "tolerant", container=gpus, tolerations=TOLERATE_GPU)
    assert node_of(kubectl, ns, "tolerant") == "node-c"


def test_spread_over_zones_and_affinity_to_a_zone(kubectl: Kubectl, ns: str) -> None:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
    for i in range(3):
        create(kubectl, ns, f"s-{i}", {"app": "s"}, topologySpreadConstraints=[constraint], tolerations=TOLERATE_GPU)
    assert sorted(node_of(kubectl, ns, f"s-{i}") for i in range(3)) == ["node-a", "node-b", "node-c"]
    create(kubectl, ns, "db", {"app": "db"}, nodeSelector={"topology.kubernetes.io/zone": "zone-b"})
    assert node_of(kubectl, ns, "db") == "node-b"
    near = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "topology.kubernetes.io/zone"}
    create(kubectl, ns, "web", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [near]}})
    assert node_of(kubectl, ns, "web") == "node-b"


def test_a_pod_waiting_for_its_affinity_is_placed_once_the_pod_it_wants_is(kubectl: Kubectl, ns: str) -> None:
    near = {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "kubernetes.io/hostname"}
    create(kubectl, ns, "reader", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [near]}})
    assert unschedulable(kubectl, ns, "reader").startswith(
        "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: }, "
        "2 node(s) didn't match pod affinity rules."
    )
    create(kubectl, ns, "cache", {"app": "cache"}, nodeSelector={"kubernetes.io/hostname": "node-a"})
    assert node_of(kubectl, ns, "cache") == "node-a"
    assert node_of(kubectl, ns, "reader") == "node-a"
