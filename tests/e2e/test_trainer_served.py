"""Kubeflow Trainer v2's kinds on the shared plane, through the real ``kubectl``.

What the official ``kubeflow`` SDK needs before any TrainJob runs: the public ConfigMap it reads
at construction, the five shipped ClusterTrainingRuntimes (with their FRAMEWORK column), and a
bad TrainJob refused with a 422 whose causes carry field paths.
"""

from __future__ import annotations

import json

import pytest

from conftest import Kubectl

pytestmark = pytest.mark.e2e

SHIPPED = {"torch-distributed", "jax-distributed", "xgboost-distributed", "deepspeed-distributed", "mlx-distributed"}


def test_runtimes_public_configmap_and_a_rejected_trainjob(kubectl: Kubectl) -> None:
    table = kubectl("get", "clustertrainingruntimes").splitlines()
    assert table[0].split() == ["NAME", "FRAMEWORK", "AGE"]
    rows = {line.split()[0]: line.split()[1] for line in table[1:]}
    assert set(rows) >= SHIPPED and rows["torch-distributed"] == "torch" and rows["mlx-distributed"] == "mlx"

    public = kubectl.json("get", "configmap", "kubeflow-trainer-public", "-n", "kubeflow-system")
    assert public["data"]["kubeflow_trainer_version"].startswith("v2.")

    bad = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "bad-trainjob", "namespace": "default"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed", "kind": "PyTorchJob"},
            "managedBy": "someone/else",
            "trainer": {"numProcPerNode": 0, "resourcesPerNode": {"limits": {"cpu": 2.0}}},
        },
    }
    result = kubectl.run("create", "-f", "-", "-v=6", input=json.dumps(bad))
    assert result.returncode != 0, result.stdout
    assert " 422 Unprocessable Entity" in result.stderr
    assert 'The TrainJob "bad-trainjob" is invalid' in result.stderr
    for field in ("spec.runtimeRef.kind", "spec.managedBy", "spec.trainer.numProcPerNode"):
        assert f"* {field}: Invalid value" in result.stderr, result.stderr
    missing = kubectl.run("get", "trainjob", "bad-trainjob", "-n", "default")
    assert missing.returncode != 0 and "NotFound" in missing.stderr

    # The SDK's body (no apiGroup, a JSON number as a quantity) is accepted and defaulted; suspended,
    # so no controller starts it.
    good = {**bad, "metadata": {"name": "good-trainjob", "namespace": "default"}}
    good["spec"] = {
        "runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime"},
        "suspend": True,
        "trainer": {"numNodes": 1, "resourcesPerNode": {"limits": {"cpu": 2.0}}},
    }
    kubectl("create", "-f", "-", input=json.dumps(good))
    try:
        stored = kubectl.json("get", "trainjob", "good-trainjob", "-n", "default")
        assert stored["spec"]["runtimeRef"]["apiGroup"] == "trainer.kubeflow.org"
        assert stored["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
        header = kubectl("get", "trainjobs", "-n", "default").splitlines()[0]
        assert header.split() == ["NAME", "STATE", "RUNTIME", "PROGRESS", "AGE"]
    finally:
        kubectl.run("delete", "trainjob", "good-trainjob", "-n", "default", "--wait=false")
