"""PaddleJob end to end: the collective example trains for real under ``paddle.distributed.launch``
in the paddle environment, and admission refuses elasticPolicy mistakes with field paths."""

from __future__ import annotations

import json
import re

import pytest

from conftest import Kubectl, Plane
from framework_envs import register

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/paddle-collective/paddlejob.yaml"


def test_the_collective_example_trains_on_both_workers(plane: Plane) -> None:
    register(plane, "paddle")
    plane.yard("delete", "paddlejob", "paddle-collective", "--ignore-not-found")
    run = plane.yard("run", "-f", EXAMPLE, "--timeout", "240", check=False)
    out = run.stdout
    assert run.returncode == 0, f"{out}\n{run.stderr}"
    # Both ranks joined one gloo world: the all_reduce of rank+1 over two ranks is 1 + 2.
    ranks = sorted(re.findall(r"\[worker-\d\] rank (\d) of 2: all_reduce of ranks\+1 = 3", out))
    assert ranks == ["0", "1"], out
    accuracies = [float(a) for a in re.findall(r"rank \d: test accuracy ([\d.]+)", out)]
    assert len(accuracies) == 2 and min(accuracies) > 0.85, out
    assert "paddlejob/paddle-collective succeeded" in run.stdout + run.stderr, run.stderr
    assert "runs in local environment 'paddle'" in plane.yard("get", "events", "-o", "json").stdout
    plane.yard("delete", "paddlejob", "paddle-collective")


def test_elastic_policy_mistakes_are_refused_at_admission(kubectl: Kubectl) -> None:
    container = {"name": "paddle", "image": "paddle:3", "command": ["true"]}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "paddle-bad-elastic"},
        "spec": {
            "elasticPolicy": {"minReplicas": 3, "maxReplicas": 2},
            "paddleReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}},
        },
    }
    result = kubectl.run("apply", "-f", "-", input=json.dumps(job))
    assert result.returncode != 0
    assert 'The PaddleJob "paddle-bad-elastic" is invalid' in result.stderr, result.stderr
    assert "spec.elasticPolicy.maxReplicas: Invalid value: 2: must not be less than minReplicas (3)" in result.stderr
    assert kubectl.run("get", "paddlejob", "paddle-bad-elastic").returncode != 0, "never half-created"
