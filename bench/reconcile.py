"""How fast the pure reconciler decides, for jobs of growing size. Prints figures and ratios."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from trainyard.api import PyTorchJob
from trainyard.controller import ControllerSettings, Observed, reconcile
from trainyard.frameworks.network import NetworkMode
from trainyard.frameworks.registry import plugin_for


def job(workers: int) -> PyTorchJob:
    container = {"name": "pytorch", "image": "x", "command": ["python", "train.py"]}
    replica = {"template": {"spec": {"containers": [container]}}}
    return PyTorchJob.model_validate(
        {
            "metadata": {"name": "bench", "namespace": "default", "uid": "u"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, **replica},
                    "Worker": {"replicas": workers, **replica},
                }
            },
        }
    )


def main() -> None:
    plugin = plugin_for("PyTorchJob")
    settings = ControllerSettings(NetworkMode.CLUSTER_DNS)
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base = None
    print(f"{'workers':>8} {'passes/s':>10} {'ms/pass':>9} {'ms/replica':>11}")
    for workers in (1, 8, 64, 256):
        observed = Observed(job(workers), (), (), now)
        reconcile(observed, plugin, settings)
        passes, start = 0, time.perf_counter()
        while time.perf_counter() - start < 1.0:
            reconcile(observed, plugin, settings)
            passes += 1
        per_pass = (time.perf_counter() - start) / passes * 1000
        base = base or per_pass / (workers + 1)
        per_replica = per_pass / (workers + 1)
        print(
            f"{workers:>8} {passes / (per_pass * passes / 1000):>10.0f} {per_pass:>9.2f} {per_replica:>11.3f}"
            f"   (x{per_replica / base:.2f} of the 1-worker cost per replica)"
        )


if __name__ == "__main__":
    main()
