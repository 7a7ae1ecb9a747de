"""Seed 004's advanced TrainingJob, verbatim, on a plane of three declared GPU nodes.

The nodes carry what its ``scheduling`` asks for (``nvidia.com/gpu.product: A100-SXM4-80GB``,
``node-type: gpu-large``, the ``nvidia.com/gpu:NoSchedule`` taint it tolerates) and room for one
of its workers each (32 CPUs, 128Gi and 4 GPUs apiece; its required anti-affinity on
``kubernetes.io/hostname`` allows one per node anyway). Its 8-pod gang cannot be placed on
three nodes: nothing is bound, and the scheduler says why in coscheduling's words (the gang's
``minResources`` exceed what the cluster has). With ``numWorkers: 3`` the same manifest lands one
worker on each node.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from conftest import REPO, Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

WAIT = 90.0
EXAMPLE = REPO / "examples" / "trainingjob" / "advanced-training.yaml"
GPU_NODE = {
    "capacity": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": 4},
    "labels": {"nvidia.com/gpu.product": "A100-SXM4-80GB", "node-type": "gpu-large"},
    "taints": ["nvidia.com/gpu:NoSchedule"],
}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    spec = tmp_path_factory.mktemp("gpu-nodes") / "nodes.yaml"
    spec.write_text(yaml.safe_dump({"nodes": [{"name": f"gpu-{i}", **GPU_NODE} for i in (1, 2, 3)]}))
    yield from own_plane(tmp_path_factory, "yard-seed004-nodes", "--nodes-file", str(spec))


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    kube = Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))
    kube("create", "namespace", "ml-training")
    kube("create", "priorityclass", "high-priority", "--value", "1000")
    return kube


def pods(kubectl: Kubectl) -> list[dict[str, Any]]:
    return list(kubectl.json("get", "pods", "-n", "ml-training", "-l", "training-job=advanced-training")["items"])


def test_eight_workers_one_per_node_do_not_fit_three_nodes_and_say_why(kubectl: Kubectl) -> None:
    kubectl("apply", "-n", "ml-training", "-f", str(EXAMPLE))
    created = eventually(lambda: len(pods(kubectl)) == 8 and pods(kubectl), timeout=WAIT, what="the 8 pods")

    gap = "0/3 nodes are available: resource gap: cpu 64, memory 256Gi, nvidia.com/gpu 20."

    def refused() -> bool:
        for pod in created:
            name = pod["metadata"]["name"]
            events = kubectl("get", "events", "-n", "ml-training", "--field-selector", f"involvedObject.name={name}")
            if gap in events:
                return True
        return False

    # 8 x (32 CPUs, 128Gi, 4 GPUs) against 3 x (64, 256Gi, 4): coscheduling's minResources check.
    eventually(refused, timeout=WAIT, what="the gang's resource gap in a FailedScheduling event")
    assert not any(p["spec"].get("nodeName") for p in pods(kubectl)), "a gang that cannot fit binds nothing"
    kubectl("delete", "-n", "ml-training", "-f", str(EXAMPLE), "--wait=true", timeout=WAIT)


def test_three_workers_land_one_per_node(kubectl: Kubectl) -> None:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["spec"]["numWorkers"] = 3
    kubectl("apply", "-n", "ml-training", "-f", "-", input=json.dumps(body))

    def placed() -> list[str] | None:
        nodes = [p["spec"].get("nodeName") for p in pods(kubectl)]
        return nodes if len(nodes) == 3 and all(nodes) else None

    nodes = eventually(placed, timeout=WAIT, what="three workers bound")
    assert sorted(nodes) == ["gpu-1", "gpu-2", "gpu-3"]
    kubectl("delete", "-n", "ml-training", "trainingjob", "advanced-training", "--wait=false")
