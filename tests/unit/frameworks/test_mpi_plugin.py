"""MPIJob v2beta1's objects as the mpi-operator builds them: hostfile, Service, launcher Job, workers."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from trainyard.api.defaults import apply_defaults
from trainyard.api.kinds import KINDS
from trainyard.api.kubeflow.mpi import MPIJob
from trainyard.api.meta import TypedObject
from trainyard.frameworks.registry import plugin_for

PLUGIN: Any = plugin_for("MPIJob")


def job(**spec: Any) -> MPIJob:
    body = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ml", "uid": "u"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {
                    "template": {"spec": {"containers": [{"name": "l", "image": "i", "command": ["mpirun"]}]}}
                },
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}},
            },
            **spec,
        },
    }
    return apply_defaults(MPIJob.model_validate(body), KINDS["MPIJob"])


def companions(j: MPIJob, running: tuple[str, ...] = (), domain: str = "") -> dict[str, dict[str, Any]]:
    out = PLUGIN.companions(j, running, (), lambda: ("PRIV", "PUB"), domain)
    return {o["kind"]: o for o in out}


@pytest.mark.parametrize(
    ("implementation", "line"),
    [
        ("OpenMPI", "pi-worker-{i}.pi.ml.svc slots=3\n"),
        ("Intel", "pi-worker-{i}.pi.ml.svc:3\n"),
        ("MPICH", "pi-worker-{i}.pi.ml.svc:3\n"),
    ],
)
def test_hostfile_lines_follow_the_implementation(implementation: str, line: str) -> None:
    data = companions(job(slotsPerWorker=3, mpiImplementation=implementation))["ConfigMap"]["data"]
    assert data["hostfile"] == line.format(i=0) + line.format(i=1)


def test_the_launcher_as_a_worker_comes_first_and_running_workers_are_discovered_sorted() -> None:
    data = companions(job(runLauncherAsWorker=True), running=("pi-worker-1", "pi-worker-0"), domain="corp.local")
    hostfile = data["ConfigMap"]["data"]["hostfile"].splitlines()
    assert hostfile[0] == "pi-launcher.pi.ml.svc.corp.local slots=1"
    assert data["ConfigMap"]["data"]["discover_hosts.sh"] == (
        "#!/bin/sh\n"
        "echo pi-launcher.pi.ml.svc.corp.local\n"
        "echo pi-worker-0.pi.ml.svc.corp.local\n"
        "echo pi-worker-1.pi.ml.svc.corp.local\n"
    )
    assert data["Service"]["spec"]["publishNotReadyAddresses"] is True


def test_the_ssh_secret_holds_a_fresh_pair_of_the_ssh_auth_type() -> None:
    secret = companions(job())["Secret"]
    assert secret["type"] == "kubernetes.io/ssh-auth"
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {"ssh-privatekey": "PRIV", "ssh-publickey": "PUB"}


def test_an_existing_ssh_secret_is_kept_as_read_and_no_pair_is_made() -> None:
    existing = TypedObject.model_validate({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "pi-ssh"}})

    def no_keys() -> tuple[str, str]:
        raise AssertionError("a key pair was made for a job that has one")

    out = PLUGIN.companions(job(), (), (existing,), no_keys, "")
    assert [o for o in out if getattr(o, "kind", None) == "Secret"] == [existing]


@pytest.mark.parametrize(
    ("implementation", "names"),
    [
        (
            "OpenMPI",
            {"OMPI_MCA_orte_default_hostfile", "OMPI_MCA_orte_set_default_slots", "PRTE_MCA_prte_default_hostfile"},
        ),
        ("Intel", {"I_MPI_HYDRA_HOST_FILE", "I_MPI_PERHOST", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS"}),
        ("MPICH", {"HYDRA_HOST_FILE", "HYDRA_LAUNCH_EXTRA_ARGS"}),
    ],
)
def test_the_launcher_env_follows_the_implementation(implementation: str, names: set[str]) -> None:
    template = PLUGIN.launcher_job(job(mpiImplementation=implementation))["spec"]["template"]
    env = {e["name"]: e["value"] for e in template["spec"]["containers"][0]["env"]}
    assert names <= set(env)
    assert env["K_MPI_JOB_ROLE"] == "launcher"
    assert env["NVIDIA_VISIBLE_DEVICES"] == ""


def test_the_launcher_job_carries_the_run_policy_and_mounts() -> None:
    launcher = PLUGIN.launcher_job(
        job(
            runPolicy={"backoffLimit": 2, "activeDeadlineSeconds": 60, "suspend": True}, sshAuthMountPath="/home/u/.ssh"
        )
    )
    spec = launcher["spec"]
    assert (spec["backoffLimit"], spec["activeDeadlineSeconds"], spec["suspend"]) == (2, 60, True)
    pod = spec["template"]["spec"]
    assert (pod["hostname"], pod["subdomain"], pod["restartPolicy"]) == ("pi-launcher", "pi", "OnFailure")
    mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {"ssh-auth": "/home/u/.ssh", "mpi-job-config": "/etc/mpi"}
    ssh = next(v for v in pod["volumes"] if v["name"] == "ssh-auth")["secret"]
    assert "defaultMode" not in ssh  # 0600 only under /root/.ssh
    labels = spec["template"]["metadata"]["labels"]
    assert labels["training.kubeflow.org/job-role"] == "launcher"
    assert labels["training.kubeflow.org/operator-name"] == "mpi-operator"


def test_a_worker_without_a_command_runs_sshd_and_counts_from_one_beside_a_launcher_worker() -> None:
    pod = {"metadata": {"name": "pi-worker-0", "labels": {}}, "spec": {"containers": [{"name": "w", "image": "i"}]}}
    out = PLUGIN.worker_pod(job(runLauncherAsWorker=True), 0, pod)
    assert out["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert out["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert out["spec"]["dnsConfig"]["searches"] == ["pi.ml.svc.cluster.local"]
    assert pod["spec"]["containers"][0].get("command") is None  # the input is left alone
