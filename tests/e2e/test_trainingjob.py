"""Seed 004's basic TrainingJob applied as written, on a node that declares its 2 GPUs.

The session plane declares no GPU (this machine has none) and the seed's example asks one per
worker, so this module starts its own plane with ``TRAINYARD_GPUS=2`` (a simulation, as
tests/e2e/test_gpus.py). The TrainingJob compiles to a PyTorchJob (Master + Worker) that runs the
stand-in trainer for its 10 epochs; the test checks the seed's columns, the state it ends in, the
owned job and the hyperparameter env of the worker pods.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from conftest import REPO, Kubectl, Plane, eventually, free_port

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "trainingjob" / "mnist-training.yaml"
NS = "ml-training"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    p = Plane(tmp_path_factory.mktemp("yard-trainingjob"), free_port())
    os.environ["TRAINYARD_GPUS"] = "2"
    try:
        p.up()
    finally:
        del os.environ["TRAINYARD_GPUS"]
    yield p
    p.down()


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


def test_seed_basic_example_completes(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", NS)
    kubectl("apply", "-f", str(EXAMPLE))

    def state() -> str:
        return str((kubectl.json("get", "trainingjob", "mnist-training", "-n", NS).get("status") or {}).get("state"))

    # The owned PyTorchJob exists and both worker pods carry the seed's label and the hyperparameters.
    eventually(lambda: state() in ("Initializing", "Running", "Completed"), timeout=60, what="an owned job")
    owned = kubectl.json("get", "pytorchjob", "mnist-training", "-n", NS)
    assert owned["metadata"]["ownerReferences"][0]["kind"] == "TrainingJob"
    pods = eventually(
        lambda: (
            len(items := kubectl.json("get", "pods", "-n", NS, "-l", "training-job=mnist-training")["items"]) == 2
            and items
        ),
        timeout=60,
        what="two worker pods",
    )
    for pod in pods:
        env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
        assert (env["LEARNING_RATE"], env["BATCH_SIZE"], env["EPOCHS"]) == ("0.001", "64", "10")
        assert (env["MODEL_NAME"], env["DATASET_NAME"]) == ("cnn", "mnist")
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] in (1, "1")

    eventually(lambda: state() == "Completed", timeout=240, interval=1, what="Completed")
    table = kubectl("get", "trainingjobs", "-n", NS)
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "STATE", "PROGRESS", "EPOCH", "AGE"]
    assert row.split()[:4] == ["mnist-training", "Completed", "100%", "10"]
    status = kubectl.json("get", "trainingjob", "mnist-training", "-n", NS)["status"]
    assert status["job"]["kind"] == "PyTorchJob"
    assert status["resources"] == {"workers": 2, "gpusPerWorker": 1, "gpus": 2}
    assert status["duration"] and status["completionTime"]
    # the stand-in's reports, through the owned PyTorchJob's status.trainingProgress
    assert (status["progress"], status["currentEpoch"], status["totalEpochs"]) == ("100%", 10, 10)
    assert set(status["metrics"]) >= {"loss", "accuracy"}
    assert {c["type"] for c in status["conditions"] if c["status"] == "True"} >= {"Created", "Succeeded"}
    logs = kubectl("logs", "-n", NS, "-l", "training-job=mnist-training", "--tail=-1")
    assert "model 'cnn' -> small CNN" in logs and "epoch 10/10" in logs
