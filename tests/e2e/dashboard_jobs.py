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
