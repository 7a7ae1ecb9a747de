"""GPU device assignment on a node that declares two GPUs (simulated: this machine has none).

Real processes print the environment the node gave them; the test checks that GPU pods get
distinct device indices, that others see no GPU, that a pod bound beyond capacity is rejected as
the kubelet rejects it, and that assignments outlive a restart of the control plane.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane, eventually, free_port

pytestmark = pytest.mark.e2e

PRINT_ENV = "import json, os, time; print(json.dumps(dict(os.environ)), flush=True); time.sleep(600)"
GPU_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def up(plane: Plane) -> None:
    os.environ["TRAINYARD_GPUS"] = "2"
    try:
        plane.yard("up", "--port", str(plane.port), "--workspace", str(REPO))
    finally:
        del os.environ["TRAINYARD_GPUS"]


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    p = Plane(tmp_path_factory.mktemp("yard-gpus"), free_port())
    up(p)
    yield p
    p.down()


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"gpus-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "pods", "--all", "-n", name, "--grace-period=1")
    kubectl.run("delete", "namespace", name, "--wait=false")


def create_pod(kubectl: Kubectl, ns: str, name: str, gpus: int, **spec: Any) -> None:
    container: dict[str, Any] = {"name": "main", "image": "pytorch/pytorch", "command": ["python3", "-c", PRINT_ENV]}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    container |= spec.pop("container", {})
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [container], **spec},
    }
    kubectl("create", "-f", "-", input=json.dumps(pod))


def env_of(kubectl: Kubectl, ns: str, name: str) -> dict[str, str]:
    def printed() -> str:
        result = kubectl.run("logs", name, "-n", ns)
        return result.stdout.strip() if result.returncode == 0 else ""

    env: dict[str, str] = json.loads(eventually(printed, timeout=60, what=f"{name} to print its environment"))
    return env


def annotation(kubectl: Kubectl, ns: str, name: str) -> dict[str, list[int]] | None:
    pod = kubectl.json("get", "pod", name, "-n", ns)
    raw = (pod["metadata"].get("annotations") or {}).get("trainyard.dev/gpu-devices")
    return json.loads(raw) if raw else None


def test_gpu_containers_get_distinct_devices_and_others_none(kubectl: Kubectl, ns: str) -> None:
    create_pod(kubectl, ns, "a", 1)
    create_pod(kubectl, ns, "b", 1)
    create_pod(kubectl, ns, "cpu", 0)
    a, b, cpu = (env_of(kubectl, ns, n) for n in ("a", "b", "cpu"))
    assert {a["CUDA_VISIBLE_DEVICES"], b["CUDA_VISIBLE_DEVICES"]} == {"0", "1"}
    assert a["NVIDIA_VISIBLE_DEVICES"] == a["CUDA_VISIBLE_DEVICES"] and a["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert cpu["CUDA_VISIBLE_DEVICES"] == "" and "NVIDIA_VISIBLE_DEVICES" not in cpu
    assert annotation(kubectl, ns, "a") == {"main": [int(a["CUDA_VISIBLE_DEVICES"])]}
    assert annotation(kubectl, ns, "cpu") is None

    # Bound straight to the node (no scheduler to keep it Pending): the kubelet's admission rejects it.
    node = kubectl("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
    create_pod(kubectl, ns, "over", 1, nodeName=node)
    status = eventually(
        lambda: (s := kubectl.json("get", "pod", "over", "-n", ns)["status"]).get("phase") == "Failed" and s,
        what="the pod over capacity to be rejected",
    )
    assert status["reason"] == "OutOfnvidia.com/gpu"
    assert status["message"] == (
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 1, used: 2, capacity: 2"
    )
    events = kubectl(
        "get", "events", "-n", ns, "--field-selector", "involvedObject.name=over,reason=OutOfnvidia.com/gpu"
    )
    assert "Warning" in events

    # Deleting a pod releases its device for the next one.
    kubectl("delete", "pod", "a", "-n", ns, "--grace-period=1")
    create_pod(kubectl, ns, "d", 1)
    assert env_of(kubectl, ns, "d")["CUDA_VISIBLE_DEVICES"] == a["CUDA_VISIBLE_DEVICES"]


def test_assignments_survive_a_control_plane_restart(plane: Plane, kubectl: Kubectl, ns: str) -> None:
    create_pod(kubectl, ns, "first", 1)
    assert env_of(kubectl, ns, "first")["CUDA_VISIBLE_DEVICES"] == "0"
    # Waits for a ConfigMap with its device already assigned (the second one, as the first is taken).
    wait_for_config = {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "x"}}}]}
    create_pod(kubectl, ns, "waits", 1, container=wait_for_config)
    assert eventually(lambda: annotation(kubectl, ns, "waits"), what="the waiting pod's devices") == {"main": [1]}
    kubectl("delete", "pod", "first", "-n", ns, "--grace-period=1")

    plane.down()
    up(plane)

    # Device 0 is free again, device 1 still belongs to the waiting pod.
    create_pod(kubectl, ns, "fresh", 1)
    assert env_of(kubectl, ns, "fresh")["CUDA_VISIBLE_DEVICES"] == "0"
    kubectl("create", "configmap", "later", "-n", ns, "--from-literal=x=1")
    assert env_of(kubectl, ns, "waits")["CUDA_VISIBLE_DEVICES"] == "1"
