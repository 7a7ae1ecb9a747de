"""Katib's API on the shared plane, through the real ``kubectl`` and ``yard``.

The three CRDs are served in ``kubeflow.org/v1beta1`` beside v1's jobs; an Experiment of Katib's
example shape is accepted with Katib's defaults filled in; a bad one is a 422 whose causes carry
Katib's field paths; ``kubectl get`` prints Katib's columns and ``yard get experiments`` the
search's. The Experiment is deleted at the end, so no controller runs its trials for long.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import Kubectl, Plane

pytestmark = pytest.mark.e2e


def experiment(name: str) -> dict[str, Any]:
    """examples/v1beta1/hp-tuning/random.yaml's shape."""
    command = ["python3", "-c", "print('loss=0.5')", "--lr=${trialParameters.learningRate}"]
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "objective": {"type": "minimize", "goal": 0.001, "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random"},
            "maxTrialCount": 2,
            "parallelTrialCount": 1,
            "maxFailedTrialCount": 1,
            "parameters": [
                {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.01", "max": "0.05"}},
            ],
            "trialTemplate": {
                "primaryContainerName": "training-container",
                "trialParameters": [{"name": "learningRate", "description": "Learning rate", "reference": "lr"}],
                "trialSpec": {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "spec": {
                        "template": {
                            "spec": {
                                "containers": [{"name": "training-container", "image": "python", "command": command}],
                                "restartPolicy": "Never",
                            }
                        }
                    },
                },
            },
        },
    }


def test_katibs_kinds_are_served_defaulted_and_checked(kubectl: Kubectl, plane: Plane) -> None:
    resources = kubectl("api-resources", "--api-group=kubeflow.org", "-o", "name").split()
    assert {"experiments.kubeflow.org", "suggestions.kubeflow.org", "trials.kubeflow.org"} <= set(resources)
    assert "pytorchjobs.kubeflow.org" in resources, "v1's jobs are served beside v1beta1's kinds"

    bad = experiment("bad-experiment")
    bad["spec"]["algorithm"]["algorithmName"] = "hyperband"
    bad["spec"]["parallelTrialCount"] = 5
    bad["spec"]["trialTemplate"]["trialParameters"][0]["reference"] = "learning_rate"
    result = kubectl.run("create", "-f", "-", "-v=6", input=json.dumps(bad))
    assert result.returncode != 0, result.stdout
    assert " 422 Unprocessable Entity" in result.stderr
    assert 'The Experiment "bad-experiment" is invalid' in result.stderr
    for cause in (
        "* spec.parallelTrialCount: Invalid value: 5: should be less than or equal to spec.maxTrialCount",
        '* spec.algorithm.algorithmName: Unsupported value: "hyperband": not supported by trainyard',
        "* spec.trialTemplate.trialParameters[0].reference: Invalid value",
    ):
        assert cause in result.stderr, result.stderr
    missing = kubectl.run("get", "experiment", "bad-experiment", "-n", "default")
    assert missing.returncode != 0 and "NotFound" in missing.stderr

    kubectl("create", "-f", "-", input=json.dumps(experiment("random-e2e")))
    try:
        stored = kubectl.json("get", "experiment", "random-e2e", "-n", "default")
        spec = stored["spec"]
        assert spec["resumePolicy"] == "Never"
        assert spec["objective"]["metricStrategies"] == [{"name": "loss", "value": "min"}]
        assert spec["metricsCollectorSpec"] == {"collector": {"kind": "StdOut"}}
        assert spec["trialTemplate"]["successCondition"] == 'status.conditions.#(type=="Complete")#|#(status=="True")#'
        assert spec["parameters"][0]["feasibleSpace"]["distribution"] == "uniform"

        table = kubectl("get", "experiments", "-n", "default").splitlines()
        assert table[0].split() == ["NAME", "TYPE", "STATUS", "AGE"]
        assert any(line.split()[0] == "random-e2e" for line in table[1:])

        listed = plane.yard("get", "experiments", "-n", "default").stdout.splitlines()
        assert listed[0].split()[:7] == ["NAME", "STATE", "ALGORITHM", "TRIALS", "RUNNING", "FAILED", "BEST"]
        row = next(line.split() for line in listed[1:] if line.split()[0] == "random-e2e")
        assert row[2] == "random" and row[3].endswith("/2"), listed
    finally:
        kubectl("delete", "experiment", "random-e2e", "-n", "default", "--wait=false")
