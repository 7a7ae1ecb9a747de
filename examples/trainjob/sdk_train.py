"""The Python-first path to a TrainJob: the official Kubeflow SDK's ``TrainerClient`` runs ``train()`` on two nodes.

The SDK (``kubeflow`` 0.5.0, Kubeflow Trainer v2) is used unchanged. It pins ``kubernetes<36``,
so ``make install`` puts it beside the venv rather than in it; run this with it on the path:

    PYTHONPATH=$VIRTUAL_ENV/clients/kubeflow python examples/trainjob/sdk_train.py

It talks to the plane of ``$TRAINYARD_HOME`` (else ``$KUBECONFIG``, else the default plane's
kubeconfig), as it would to any cluster with Kubeflow Trainer installed: the SDK builds a TrainJob
on the ``torch-distributed`` runtime whose command writes ``train()``'s source to a file and runs
it with ``torchrun``; the plane's TrainJob controller gives every node its rendezvous.
"""

from __future__ import annotations

import os
from pathlib import Path

from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, TrainerClient
from train import train


def kubeconfig() -> str | None:
    """The plane's kubeconfig; None lets the SDK read ``$KUBECONFIG`` (or ~/.kube/config) itself."""
    home = os.environ.get("TRAINYARD_HOME")
    if home:
        return str(Path(home) / "kubeconfig")
    default_plane = Path.home() / ".trainyard" / "kubeconfig"
    if os.environ.get("KUBECONFIG") or not default_plane.exists():
        return None
    return str(default_plane)


client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig()))
print("runtimes:", ", ".join(sorted(r.name for r in client.list_runtimes())))

name = client.train(runtime="torch-distributed", trainer=CustomTrainer(func=train, num_nodes=2))
print(f"TrainJob {name} created")
job = client.wait_for_job_status(name, {"Complete"}, timeout=600, polling_interval=1)  # RuntimeError if it fails
print(f"TrainJob {name} is {job.status}")
for step in sorted(job.steps, key=lambda s: s.name):  # node-0, node-1 (the SDK lists the newest first)
    print(f"--- {step.name} ({step.pod_name})")
    for line in client.get_job_logs(name, step=step.name):
        print(line)
client.delete_job(name)
