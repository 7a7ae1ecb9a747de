"""MPIJob training progress end to end on the session plane: ``mpirun`` in the launcher starts rank 0
in the worker pod (the node's exec joins that pod's env and mounts), whose ``trainyard.runtime``
reports reach the operator's status server with the worker's token; ``kubectl get mpijob`` shows
them while it runs, and ``runPolicy.earlyStopping`` ends the job Succeeded (TargetMetricReached)
with its launcher Job suspended and every rank stopped.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually
from framework_envs import register

pytestmark = pytest.mark.e2e

IMAGE = "ghcr.io/trainyard/examples-mpi:latest"
TRAIN = """
import os, pathlib, time
from mpi4py import MPI
from trainyard import runtime
assert MPI.COMM_WORLD.Get_rank() == 0 and os.environ["OMPI_COMM_WORLD_RANK"] == "0"
print("rank 0 reports to", os.environ["TRAINYARD_PROGRESS_URL"], "as", os.environ["K_MPI_JOB_ROLE"], flush=True)
runtime.report(epoch=1, total_epochs=4, metrics={"loss": 0.5, "accuracy": 0.75})
runtime.flush()
release = pathlib.Path(RELEASE)
while not release.exists():
    time.sleep(0.05)
runtime.report(epoch=2, metrics={"loss": 0.25, "accuracy": 0.95})
runtime.flush()
time.sleep(600)  # MARKER: stopped by the early stop, never by finishing
"""


def mpijob(name: str, script: str) -> dict[str, Any]:
    def replica(command: list[str] | None) -> dict[str, Any]:
        container: dict[str, Any] = {"name": "mpi", "image": IMAGE, **({"command": command} if command else {})}
        return {"replicas": 1, "template": {"spec": {"terminationGracePeriodSeconds": 5, "containers": [container]}}}

    launcher = replica(["mpirun", "-n", "1", "python", "-c", script])
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "None", "earlyStopping": {"target": 0.9}},
            "mpiReplicaSpecs": {"Launcher": {**launcher, "restartPolicy": "Never"}, "Worker": replica(None)},
        },
    }


def row(kubectl: Kubectl, name: str, *wide: str) -> dict[str, str]:
    header, line = kubectl("get", "mpijob", name, *wide).splitlines()[:2]
    return dict(zip(header.split(), line.split(), strict=True))


def ranks_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_rank_0_in_a_worker_reports_progress_and_a_target_ends_the_job(
    plane: Plane, kubectl: Kubectl, tmp_path: Path
) -> None:
    register(plane, "mpi")
    name = "mpi-progress"
    marker = f"marker-{uuid.uuid4().hex[:8]}"
    release = tmp_path / "release"
    script = TRAIN.replace("RELEASE", repr(str(release))).replace("MARKER", marker)
    kubectl("create", "-f", "-", input=json.dumps(mpijob(name, script)))

    training = eventually(
        lambda: (r := row(kubectl, name))["PROGRESS"] == "25%" and r, timeout=120, what="PROGRESS 25% in kubectl get"
    )
    assert list(training) == ["NAME", "STATE", "PROGRESS", "EPOCH", "AGE"] and training["EPOCH"] == "1", training
    wide = row(kubectl, name, "-o", "wide")
    assert (wide["LOSS"], wide["ACCURACY"]) == ("0.5", "0.75"), wide
    # rank 0 ran in the worker pod (the node's exec into it), with the worker's env and token
    eventually(
        lambda: f"/mpijobs/{name}/trainingprogress as worker" in kubectl("logs", f"job/{name}-launcher"),
        timeout=30,
        what="rank 0's line in the launcher's log",
    )

    release.touch()

    def finished() -> dict[str, Any] | None:
        job: dict[str, Any] = kubectl.json("get", "mpijob", name)
        last = ((job.get("status") or {}).get("conditions") or [{}])[-1]
        return job if last.get("type") in ("Succeeded", "Failed") else None

    job = eventually(finished, timeout=60, what=f"{name} to finish")
    last = job["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Succeeded", "TargetMetricReached"), job["status"]
    assert last["message"] == "accuracy 0.95 >= target 0.9 at epoch 2", last
    assert job["status"]["trainingProgress"]["progress"] == "50%", job["status"]
    assert kubectl.json("get", "job", f"{name}-launcher")["spec"]["suspend"] is True
    # every rank and mpirun stopped (whatever cleanPodPolicy), and nothing was recreated
    eventually(lambda: not ranks_with(marker), timeout=30, what="no rank left after the early stop")
    eventually(
        lambda: not kubectl.json("get", "pods", "-l", f"training.kubeflow.org/job-name={name}")["items"],
        timeout=30,
        what="the launcher and the worker stopped",
    )
    kubectl("delete", "mpijob", name, "--wait=false")
