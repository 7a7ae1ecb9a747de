"""The jobs the dashboard's tests watch: a PyTorchJob whose one replica is a ``python -c`` loop that
reports its epochs and metrics with ``trainyard.runtime`` and prints a line each, as a training does."""

from __future__ import annotations

from typing import Any

TRAIN = """
import sys, time
from trainyard import runtime
epochs, pause = int(sys.argv[1]), float(sys.argv[2])
for epoch in range(1, epochs + 1):
    time.sleep(pause)
    loss = round(2.0 / (epoch + 1), 4)
    runtime.report(epoch=epoch, total_epochs=epochs, metrics={"loss": loss, "accuracy": round(1 - loss / 2, 4)})
    print(f"epoch {epoch}/{epochs} loss={loss}", flush=True)
runtime.flush()
print("training done", flush=True)
"""


def pytorchjob(name: str, epochs: int, pause: float) -> dict[str, Any]:
    container = {
        "name": "pytorch",
        "image": "python:3.11",
        "command": ["python3", "-c", TRAIN, str(epochs), str(pause)],
    }
    spec = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"pytorchReplicaSpecs": {"Master": spec}},
    }


# A Katib trial: a loss falling over six reports to a floor set by its parameters (lowest at lr=0.01,
# units=32), printed in Katib's name=value format, which the StdOut collector reads.
TRIAL = """
import math, sys, time
lr, units = float(sys.argv[1]), int(sys.argv[2])
floor = (math.log10(lr) + 2) ** 2 + (units - 32) ** 2 / 1000
for epoch in range(6):
    print(f"epoch={epoch} loss={floor + (5 - epoch) * 0.3:.6f}", flush=True)
    time.sleep(0.2)
"""


def experiment(name: str, trials: int = 4) -> dict[str, Any]:
    """A Katib Experiment of ``trials`` batch Job trials, two at a time, random search over 2 parameters."""
    command = ["python3", "-c", TRIAL, "${trialParameters.lr}", "${trialParameters.units}"]
    pod = {"restartPolicy": "Never", "containers": [{"name": "training", "image": "python:3.11", "command": command}]}
    space = {"min": "0.001", "max": "0.1", "distribution": "logUniform"}
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "objective": {"type": "minimize", "objectiveMetricName": "loss"},
            "algorithm": {"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "3"}]},
            "parallelTrialCount": 2,
            "maxTrialCount": trials,
            "maxFailedTrialCount": 2,
            "parameters": [
                {"name": "lr", "parameterType": "double", "feasibleSpace": space},
                {"name": "units", "parameterType": "int", "feasibleSpace": {"min": "8", "max": "64"}},
            ],
            "trialTemplate": {
                "primaryContainerName": "training",
                "trialParameters": [{"name": p, "reference": p} for p in ("lr", "units")],
                "trialSpec": {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": pod}}},
            },
        },
    }
