"""Trainer v2's MPI runtimes run for real on the local node: ``mlx-distributed`` and ``deepspeed-distributed``.

A TrainJob with numNodes 2 on ``mlx-distributed`` runs the command the Kubeflow SDK writes for an
MPI runtime (``mpirun --hostfile /etc/mpi/hostfile ...``) in the launcher (itself node 0:
``runLauncherAsNode``) once the node pod is Ready; ``mpirun`` reaches the node pod through the
node's exec (its sshd is a stand-in) and MLX's MPI backend sums across both ranks. The same on
``deepspeed-distributed``, whose image runs in the ``mpi`` environment: DeepSpeed is not
installable here, so a plain mpi4py allreduce stands for the training program.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually
from framework_envs import register

pytestmark = pytest.mark.e2e

# What the SDK's MPI command starts with (kubeflow.trainer constants.MPI_COMMAND).
MPIRUN = ["mpirun", "--hostfile", "/etc/mpi/hostfile"]

MLX_SUM = """
import socket
import mlx.core as mx
world = mx.distributed.init(backend="mpi", strict=True)
total = mx.distributed.all_sum(mx.array([world.rank() + 1.0]))
print(f"mlx rank {world.rank()}/{world.size()} on {socket.gethostname()}: all_sum = {total.item()}", flush=True)
"""

MPI4PY_SUM = """
import socket
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.Get_rank() + 1)
print(f"mpi4py rank {comm.Get_rank()}/{comm.Get_size()} on {socket.gethostname()}: allreduce = {total}", flush=True)
"""


@pytest.fixture
def ns(plane: Plane, kubectl: Kubectl) -> Iterator[str]:
    register(plane, "mlx", "mpi")
    name = f"tmpi-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def apply(kubectl: Kubectl, ns: str, name: str, runtime: str, command: list[str]) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": 2, "command": command}},
    }
    kubectl("apply", "-f", "-", input=json.dumps(body))


def complete(kubectl: Kubectl, ns: str, name: str) -> None:
    def state() -> Any:
        found = kubectl.json("get", "trainjob", name, "-n", ns)
        return (found.get("status") or {}).get("state") in ("Complete", "Failed") and found

    try:
        found = eventually(state, timeout=60, what=f"TrainJob {name} done")
    except AssertionError as exc:  # a failing launcher is retried with its Job's backoff: its log says why
        raise AssertionError(f"{exc}\n{kubectl.run('logs', f'job/{name}-launcher-0', '-n', ns).stdout}") from None
    assert found["status"]["state"] == "Complete", found["status"]


def test_mlx_and_deepspeed_runtimes_run_mpirun_across_two_nodes(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    mlx, mpi4py = tmp_path / "mlx_sum.py", tmp_path / "mpi4py_sum.py"
    mlx.write_text(MLX_SUM)
    mpi4py.write_text(MPI4PY_SUM)
    apply(kubectl, ns, "mlx", "mlx-distributed", [*MPIRUN, "python3", str(mlx)])
    apply(kubectl, ns, "ds", "deepspeed-distributed", [*MPIRUN, "python3", str(mpi4py)])

    complete(kubectl, ns, "mlx")
    hostfile = kubectl.json("get", "configmap", "mlx-mpi-hostfile", "-n", ns)["data"]["hostfile"]
    assert hostfile == "mlx-launcher-0-0.mlx slots=1\nmlx-node-0-0.mlx slots=1\n", hostfile
    log = kubectl("logs", "job/mlx-launcher-0", "-n", ns)
    # Each rank runs in its own pod (its hostname): rank 0 in the launcher, rank 1 in the node pod.
    assert "mlx rank 0/2 on mlx-launcher-0-0: all_sum = 3.0" in log, log
    assert "mlx rank 1/2 on mlx-node-0-0: all_sum = 3.0" in log, log

    complete(kubectl, ns, "ds")
    log = kubectl("logs", "job/ds-launcher-0", "-n", ns)
    assert "mpi4py rank 0/2 on ds-launcher-0-0: allreduce = 3" in log, log
    assert "mpi4py rank 1/2 on ds-node-0-0: allreduce = 3" in log, log
