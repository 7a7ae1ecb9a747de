"""The plane's autoscaler scales an elastic PyTorchJob on a metric its training code reports, and back.

A real ``yard up`` (short metric resolution, HPA sync period and downscale stabilization, as
metrics-server's and kube-controller-manager's flags) runs a 2-worker elastic job
(``elasticPolicy`` min 2, max 3, with an Object metric ``queue_depth`` of the job, average target
10), so the operator writes its HPA. The training script (``autoscaled_train.py``: gloo, a tiny
model, torchrun) reports ``queue_depth`` read from a file this test writes; the autoscaler reads it
through ``custom.metrics.k8s.io`` and scales the job through its ``/scale``: 25 asks for 3 workers,
the third joins a new rendezvous and training goes on in a world of 3; 15 asks for 2, the third
goes and the survivors train on in a world of 2. ``kubectl top`` reads the nodes' measurements.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

WAIT = 120  # generous: the machine is shared and often loaded
SCRIPT = REPO / "tests" / "e2e" / "autoscaled_train.py"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(
        tmp_path_factory,
        "yard-autoscaling",
        "--metric-resolution",
        "2",
        "--horizontal-pod-autoscaler-sync-period",
        "2s",
        "--horizontal-pod-autoscaler-downscale-stabilization",
        "4s",
        "--restart-backoff",
        "0.2",
    )


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"hpa-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def job(ns: str, name: str, depth: Path) -> dict[str, Any]:
    metric = {
        "type": "Object",
        "object": {
            "describedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name},
            "metric": {"name": "queue_depth"},
            "target": {"type": "AverageValue", "averageValue": "10"},
        },
    }
    container = {
        "name": "pytorch",
        "image": "python:3.11",
        "command": ["torchrun", str(SCRIPT)],
        "args": ["--metric-file", str(depth), "--step-seconds", "0.2"],
    }
    worker = {
        "replicas": 2,
        "restartPolicy": "OnFailure",
        "template": {"spec": {"terminationGracePeriodSeconds": 2, "containers": [container]}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "nprocPerNode": "1",
            "elasticPolicy": {
                "minReplicas": 2,
                "maxReplicas": 3,
                "rdzvBackend": "c10d",
                "maxRestarts": 20,
                "metrics": [metric],
            },
            "pytorchReplicaSpecs": {"Worker": worker},
        },
    }


def get(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kubectl("get", *args, "-o", "json"))
    return found


def running_workers(kubectl: Kubectl, ns: str) -> list[str]:
    pods = get(kubectl, "pods", "-n", ns, "-l", "training.kubeflow.org/replica-type=worker")["items"]
    return sorted(
        p["metadata"]["name"]
        for p in pods
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


def training(kubectl: Kubectl, ns: str, name: str) -> tuple[int, int]:
    """(world size, step) rank 0 last reported: whichever worker is rank 0 in this rendezvous round."""
    progress = get(kubectl, "pytorchjob", name, "-n", ns)["status"].get("trainingProgress") or {}
    return int((progress.get("metrics") or {}).get("world") or 0), int(progress.get("currentStep") or 0)


def rescales(kubectl: Kubectl, ns: str) -> list[str]:
    events = get(kubectl, "events", "-n", ns, "--field-selector", "reason=SuccessfulRescale")["items"]
    return [e["message"] for e in sorted(events, key=lambda e: e["metadata"]["creationTimestamp"])]


def test_an_hpa_scales_an_elastic_job_from_2_to_3_workers_on_its_metric_and_back(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    name = "scaled"
    depth = tmp_path / "queue-depth"
    depth.write_text("15")
    kubectl("create", "-f", "-", input=json.dumps(job(ns, name, depth)))
    eventually(lambda: running_workers(kubectl, ns) == [f"{name}-worker-0", f"{name}-worker-1"], timeout=WAIT)

    # The metric flows from the training code to the HPA: 15 over 2 workers, target 10 each.
    def targets() -> str:
        return kubectl("get", "hpa", name, "-n", ns, "--no-headers")

    line = eventually(lambda: next((t for t in [targets()] if "7500m/10 (avg)" in t), None), timeout=WAIT)
    assert line.split()[:2] == [name, f"PyTorchJob/{name}"] and line.split()[-4:-1] == ["2", "3", "2"]

    # kubectl top, with the real kubectl, from the nodes' own measurements.
    top = eventually(
        lambda: (r := kubectl.run("top", "pods", "-n", ns)).returncode == 0 and "worker-0" in r.stdout and r
    )
    assert top.stdout.split()[:3] == ["NAME", "CPU(cores)", "MEMORY(bytes)"]
    containers = kubectl("top", "pods", "-n", ns, "--containers")
    assert re.search(rf"^{name}-worker-0\s+pytorch\s+\d+m\s+\d+Mi", containers, re.M), containers
    nodes = kubectl("top", "nodes")
    assert nodes.split()[:5] == ["NAME", "CPU(cores)", "CPU(%)", "MEMORY(bytes)", "MEMORY(%)"], nodes
    assert "nodes" in kubectl("api-resources", "--api-group=metrics.k8s.io")

    # 25 asks for 3: the job is scaled through /scale, the third worker joins and the world is 3.
    depth.write_text("25")
    eventually(lambda: len(running_workers(kubectl, ns)) == 3, timeout=WAIT, what="a third worker")
    _, before = eventually(lambda: (t := training(kubectl, ns, name))[0] == 3 and t, timeout=WAIT, what="a world of 3")
    eventually(lambda: training(kubectl, ns, name) >= (3, before + 3), timeout=WAIT, what="steps in a world of 3")
    assert get(kubectl, "pytorchjob", name, "-n", ns)["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert rescales(kubectl, ns)[0] == "New size: 3; reason: external metric queue_depth(nil) above target"
    hpa = get(kubectl, "hpa", name, "-n", ns)
    assert hpa["status"]["currentReplicas"] == 3 or hpa["status"]["desiredReplicas"] == 3
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 3  # the operator keeps its spec

    # 15 asks for 2 again (after the short stabilization window): the third goes, training goes on at 2.
    depth.write_text("15")
    eventually(lambda: len(running_workers(kubectl, ns)) == 2, timeout=WAIT, what="back to 2 workers")

    _, before = eventually(lambda: (t := training(kubectl, ns, name))[0] == 2 and t, timeout=WAIT, what="a world of 2")
    eventually(lambda: training(kubectl, ns, name) >= (2, before + 3), timeout=WAIT, what="steps in a world of 2")
    assert rescales(kubectl, ns)[-1] == "New size: 2; reason: All metrics below target"
    conditions = {c["type"]: c["reason"] for c in get(kubectl, "hpa", name, "-n", ns)["status"]["conditions"]}
    assert conditions["ScalingActive"] == "ValidMetricFound"
    state = get(kubectl, "pytorchjob", name, "-n", ns)["status"]["conditions"][-1]
    assert (state["type"], state["status"]) == ("Running", "True")
