"""PaddleJob for real: ``examples/paddle-collective`` trains with ``paddle.distributed.launch`` through
trainyard (PaddlePaddle's own environment, gloo on the CPU), and bad PaddleJobs get the API server's 422.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane
from framework_envs import path, register

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/paddle-collective/paddlejob.yaml"


def test_the_collective_example_trains_with_worker_0_as_rank_0(plane: Plane, kubectl: Kubectl) -> None:
    register(plane, "paddle")
    plane.yard("delete", "paddlejob", "paddle-collective", "--ignore-not-found")
    run = plane.yard("run", "-f", EXAMPLE, "--timeout", "240", check=False)
    logs = run.stdout
    assert run.returncode == 0, f"{logs}\n{run.stderr}"
    assert "paddlejob/paddle-collective succeeded" in logs + run.stderr, run.stderr

    # Both launchers met at worker 0's PADDLE_MASTER; the all_reduce sums every rank's rank+1.
    for rank in (0, 1):
        line = f"[worker-{rank}] rank {rank} of 2 in pod paddle-collective-worker-{rank}: all_reduce of ranks+1 = 3"
        assert line in logs, logs
    assert re.search(r"\[worker-0\] epoch 4: loss \d+\.\d+", logs), logs
    accuracies = [float(a) for a in re.findall(r"rank \d: test accuracy (\d\.\d+)", logs)]
    assert len(accuracies) == 2 and min(accuracies) > 0.85, accuracies

    job = kubectl.json("get", "paddlejob", "paddle-collective")
    assert job["status"]["conditions"][-1]["type"] == "Succeeded"
    assert job["status"]["conditions"][-1]["message"] == "PaddleJob default/paddle-collective successfully completed."
    assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    # Each launcher logged into its pod's emptyDir, none into the shared working directory.
    assert not (REPO / "examples" / "paddle-collective" / "log").exists()
    pulled = kubectl.json(
        "get", "events", "--field-selector", "reason=Pulled,involvedObject.name=paddle-collective-worker-0"
    )
    assert pulled["items"] and str(path("paddle")) in pulled["items"][-1]["message"], pulled
    kubectl("delete", "paddlejob", "paddle-collective")


def paddlejob(name: str, specs: dict[str, Any], elastic: dict[str, Any]) -> str:
    spec = {"paddleReplicaSpecs": specs, "elasticPolicy": elastic}
    return json.dumps({"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": name}, "spec": spec})


def replica(container: str = "paddle") -> dict[str, Any]:
    return {"template": {"spec": {"containers": [{"name": container, "image": "paddle:3", "command": ["true"]}]}}}


def test_bad_paddlejobs_get_422_with_field_paths(kubectl: Kubectl) -> None:
    bounds = kubectl.run(
        "apply",
        "-f",
        "-",
        input=paddlejob("pd-bounds", {"Worker": replica()}, {"minReplicas": 3, "maxReplicas": 2, "maxRestarts": -1}),
    )
    assert bounds.returncode != 0
    assert 'The PaddleJob "pd-bounds" is invalid' in bounds.stderr
    assert "spec.elasticPolicy.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`" in (
        bounds.stderr
    )
    assert "spec.elasticPolicy.maxRestarts: Invalid value: -1: must be greater than or equal to 0" in bounds.stderr

    shape = kubectl.run(
        "apply",
        "-f",
        "-",
        input=paddlejob("pd-shape", {"Master": replica("main"), "PS": replica()}, {"minReplicas": 0}),
    )
    assert shape.returncode != 0
    for expected in (
        "spec.paddleReplicaSpecs.Master.template.spec.containers: Required value: must have at least one container "
        'with name "paddle"',
        'spec.paddleReplicaSpecs.PS: Unsupported value: "PS": supported values: "Master", "Worker"',
        "spec.paddleReplicaSpecs.Worker: Required value: must be configured if elastic policy is used",
        "spec.elasticPolicy.minReplicas: Invalid value: 0: must be greater than or equal to 1",
    ):
        assert expected in shape.stderr, shape.stderr
    assert kubectl.run("get", "paddlejob", "pd-bounds").returncode != 0
    assert kubectl.run("get", "paddlejob", "pd-shape").returncode != 0
