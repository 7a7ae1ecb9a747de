"""MPIJob (kubeflow.org/v2beta1) end to end: the example's ``mpirun`` starts a rank in each worker pod
(each with its worker's hostname) through the node's exec, with Open MPI 5 and Open MPI 4, run by
``yard run`` and by ``kubectl apply``; a rank that exits while its peer waits in a collective fails
the job with its launcher Job's reason and mpirun's exit code, the launcher's log kept; deleting a
running job leaves no process; bad input is refused at admission with field paths.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import Kubectl, Plane, eventually
from framework_envs import register
from trainyard.sdk import TrainingClient

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/mpi-allreduce/mpijob.yaml"
TWO_SLOTS = "examples/mpi-allreduce/mpijob-2slots.yaml"


@pytest.fixture(scope="module")
def sdk(plane: Plane) -> TrainingClient:
    register(plane, "mpi", "mpi-openmpi4")
    return TrainingClient(plane.kubeconfig, namespace="default")


def processes_with(marker: str) -> list[int]:
    """Pids whose command line holds ``marker`` (the rank programs of one test)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(proc.name))
    return found


def test_the_example_runs_one_rank_in_each_worker_and_trains(
    plane: Plane, sdk: TrainingClient, kubectl: Kubectl
) -> None:
    plane.yard("delete", "mpijob", "mpi-allreduce", "--ignore-not-found")
    run = plane.yard("run", "-f", EXAMPLE, "--timeout", "180", check=False)
    out = run.stdout
    assert run.returncode == 0, f"{out}\n{run.stderr}"
    for rank in (0, 1):
        # The rank runs in its worker pod: its hostname is the worker's, not the launcher's.
        assert f"rank {rank}/2 on mpi-allreduce-worker-{rank}: allreduce(rank+1) = 3" in out, out
    assert "weights identical: True" in out, out
    [accuracy] = re.findall(r"test accuracy ([\d.]+)", out)
    assert float(accuracy) > 0.9, out

    job = sdk.get_job("mpi-allreduce", job_kind="MPIJob")
    last = job["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == ("Succeeded", "True", "MPIJobSucceeded")
    assert last["message"] == "MPIJob default/mpi-allreduce successfully completed."
    assert job["status"]["replicaStatuses"]["Launcher"]["succeeded"] == 1
    launcher = kubectl.json("get", "job", "mpi-allreduce-launcher")
    assert [c["type"] for c in launcher["status"]["conditions"] if c["status"] == "True"][-1] == "Complete"
    logs = kubectl("logs", "job/mpi-allreduce-launcher")
    assert "rank 1/2 on mpi-allreduce-worker-1" in logs and "test accuracy" in logs, logs
    # cleanPodPolicy: Running: the workers (sshd's stand-ins never exit) are stopped once it is done.
    eventually(
        lambda: not kubectl.json("get", "pods", "-l", "training.kubeflow.org/job-role=worker")["items"],
        timeout=60,
        what="the workers stopped by cleanPodPolicy Running",
    )
    sdk.delete_job("mpi-allreduce", job_kind="MPIJob")


def test_two_slots_per_worker_on_open_mpi_4_through_kubectl(
    plane: Plane, kubectl: Kubectl, sdk: TrainingClient
) -> None:
    kubectl("delete", "-f", TWO_SLOTS, "--ignore-not-found")
    kubectl("apply", "-f", TWO_SLOTS)
    plane.yard("wait", "mpijob/mpi-allreduce-2slots", "--timeout", "180")
    hostfile = kubectl.json("get", "configmap", "mpi-allreduce-2slots-config")["data"]["hostfile"]
    assert hostfile == (
        "mpi-allreduce-2slots-worker-0.mpi-allreduce-2slots.default.svc slots=2\n"
        "mpi-allreduce-2slots-worker-1.mpi-allreduce-2slots.default.svc slots=2\n"
    )
    logs = kubectl("logs", "job/mpi-allreduce-2slots-launcher")
    for rank, worker in ((0, 0), (1, 0), (2, 1), (3, 1)):
        assert f"rank {rank}/4 on mpi-allreduce-2slots-worker-{worker}: allreduce(rank+1) = 10" in logs, logs
    assert "weights identical: True" in logs, logs
    kubectl("delete", "-f", TWO_SLOTS)


def mpijob(name: str, command: list[str], **run_policy: object) -> dict[str, object]:
    image = "ghcr.io/trainyard/examples-mpi:latest"
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running", **run_policy},
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {"spec": {"containers": [{"name": "launcher", "image": image, "command": command}]}},
                },
                "Worker": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "worker", "image": image}]}},
                },
            },
        },
    }


# Rank 1 exits 3 while rank 0 waits for it in a collective. ``-m mpi4py`` makes an uncaught exit
# abort the job (MPI_Abort), as mpi4py advises: a bare ``sys.exit`` on one rank waits in
# MPI_Finalize for peers that wait in the barrier, with ``mpirun`` outside trainyard too.
FAIL_RANK_1 = (
    "import sys; from mpi4py import MPI; world = MPI.COMM_WORLD; marker = '{marker}'; "
    "sys.exit(3) if world.Get_rank() == 1 else world.Barrier()"
)


def test_a_rank_that_exits_while_its_peer_waits_fails_the_job_naming_its_exit_code(
    sdk: TrainingClient, kubectl: Kubectl
) -> None:
    name, marker = "mpi-rank-fails", "trainyard-mpi-rank-fails-marker"
    command = ["mpirun", "-n", "2", "python", "-m", "mpi4py", "-c", FAIL_RANK_1.format(marker=marker)]
    sdk.create_job(mpijob(name, command, backoffLimit=0))
    sdk.wait_for_job_conditions(name, job_kind="MPIJob", expected_conditions={"Failed"}, wait_timeout=180)
    job = sdk.get_job(name, job_kind="MPIJob")
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"].startswith("BackoffLimitExceeded"), failed
    # Upstream's message, then how the launcher's mpirun exited: the failed rank's code.
    assert failed["message"].startswith("Job has reached the specified backoff limit: Launcher (pod "), failed
    assert failed["message"].endswith(") exited with code 3 (Error)"), failed
    assert job["status"]["conditions"][-1]["type"] == "Failed"
    assert job["status"]["replicaStatuses"]["Launcher"]["failed"] == 1
    # The launcher's pod is kept (restartPolicy Never), and its log holds mpirun's report.
    logs = kubectl("logs", f"job/{name}-launcher")
    assert "MPI_ABORT was invoked on rank 1" in logs and "Errorcode: 3" in logs, logs
    eventually(lambda: not processes_with(marker), timeout=60, what="no rank left once the job failed")
    sdk.delete_job(name, job_kind="MPIJob")


def test_deleting_a_running_job_leaves_no_rank_behind(sdk: TrainingClient, kubectl: Kubectl) -> None:
    name = "mpi-deleted"
    marker = "trainyard-mpi-deleted-marker"
    sleeper = f"import time; print('{marker}', flush=True); time.sleep(600)"
    sdk.create_job(mpijob(name, ["mpirun", "-n", "2", "python", "-c", sleeper]))
    sdk.wait_for_job_conditions(name, job_kind="MPIJob", expected_conditions={"Running"}, wait_timeout=120)
    eventually(lambda: len(processes_with(marker)) >= 3, timeout=60, what="mpirun and both ranks running")
    kubectl("delete", "mpijob", name, "--wait=false")
    eventually(lambda: not processes_with(marker), timeout=90, what="no rank left after the delete")
    eventually(
        lambda: not kubectl.json("get", "pods", "-l", f"training.kubeflow.org/job-name={name}")["items"], timeout=90
    )


def test_bad_input_is_refused_at_admission_and_nothing_is_created(kubectl: Kubectl) -> None:
    bad = mpijob("mpi-bad", ["mpirun"])
    spec = bad["spec"]
    assert isinstance(spec, dict)
    spec["slotsPerWorker"] = -1
    spec["mpiReplicaSpecs"]["Launcher"]["replicas"] = 2
    result = kubectl.run("apply", "-f", "-", input=json.dumps(bad))
    assert result.returncode == 1
    assert 'The MPIJob "mpi-bad" is invalid:' in result.stderr, result.stderr
    assert "spec.mpiReplicaSpecs.Launcher.replicas: Invalid value: 2: must be 1" in result.stderr
    assert "spec.slotsPerWorker: Invalid value: -1: must be greater than or equal to 0" in result.stderr
    assert kubectl.run("get", "mpijob", "mpi-bad").returncode == 1
    assert not kubectl.json("get", "pods,configmaps", "-l", "app=mpi-bad")["items"]


def test_the_launcher_as_a_worker_waits_for_ready_workers_and_hosts_rank_0(
    sdk: TrainingClient, kubectl: Kubectl
) -> None:
    name = "mpi-law"
    job = mpijob(name, ["mpirun", "-n", "3", "python", "train.py", "--steps", "20"], cleanPodPolicy="None")
    spec = job["spec"]
    assert isinstance(spec, dict)
    spec |= {"runLauncherAsWorker": True, "launcherCreationPolicy": "WaitForWorkersReady"}
    launcher = spec["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["workingDir"] = "/workspace/examples/mpi-allreduce"
    sdk.create_job(job)
    sdk.wait_for_job_conditions(name, job_kind="MPIJob", wait_timeout=180)
    logs = kubectl("logs", f"job/{name}-launcher")
    # The launcher is the first host of the hostfile: rank 0 runs in its own pod.
    for rank, host in ((0, f"{name}-launcher"), (1, f"{name}-worker-0"), (2, f"{name}-worker-1")):
        assert f"rank {rank}/3 on {host}: allreduce(rank+1) = 6" in logs, logs
    pods = kubectl.json("get", "pods", "-l", f"training.kubeflow.org/job-name={name}")["items"]
    # The workers have no readiness probe: Ready from the moment their container started (the plane's pod
    # conditions carry no lastTransitionTime yet).
    started = [
        p["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]
        for p in pods
        if p["metadata"]["labels"].get("training.kubeflow.org/job-role") == "worker"
    ]
    [created] = [p["metadata"]["creationTimestamp"] for p in pods if "launcher" in p["metadata"]["name"]]
    # WaitForWorkersReady: the launcher's pod exists only once both workers were Ready.
    assert len(started) == 2 and max(started) <= created, (started, created)
    sdk.delete_job(name, job_kind="MPIJob")
