"""``frameworks.openmpi``: the Open MPI launcher env, hostfile and key volume, and that the MPIJob's
launcher and Trainer v2's MPI policy both get exactly that env from it."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api.defaults import apply_defaults
from trainyard.api.kinds import KINDS
from trainyard.api.kubeflow.mpi import MPIJob
from trainyard.frameworks import openmpi
from trainyard.frameworks.registry import plugin_for
from trainyard.frameworks.trainer import policies
from trainyard.frameworks.trainer.template import Rendezvous

Obj = dict[str, Any]
MPIJOB_PLUGIN: Any = plugin_for("MPIJob")

OPEN_MPI_4 = {
    "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
    "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
    "OMPI_MCA_orte_set_default_slots": "3",
    "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
}
OPEN_MPI_5 = {
    "PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile",
    "PRTE_MCA_prte_keep_fqdn_hostnames": "true",
    "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10",
}


def _env(container: Obj) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env") or []}


def test_the_launcher_env_names_each_setting_for_open_mpi_4_and_5() -> None:
    assert openmpi.launcher_env(hostfile="/etc/mpi/hostfile", slots=3) == OPEN_MPI_4 | OPEN_MPI_5
    other = openmpi.launcher_env(hostfile="/h/f", slots=1, ssh_args="-o ConnectionAttempts=2")
    assert other["OMPI_MCA_orte_default_hostfile"] == other["PRTE_MCA_prte_default_hostfile"] == "/h/f"
    assert other["OMPI_MCA_plm_rsh_args"] == other["PRTE_MCA_plm_ssh_args"] == "-o ConnectionAttempts=2"
    assert other["OMPI_MCA_orte_set_default_slots"] == "1"


def test_the_hostfile_lists_each_host_with_its_slots_in_order() -> None:
    assert openmpi.hostfile(["b.x", "a.x"], 2) == "b.x slots=2\na.x slots=2\n"
    assert openmpi.hostfile([], 2) == ""


@pytest.mark.parametrize(
    ("default_mode", "key_modes", "secret_modes", "file_modes"),
    [
        pytest.param(None, None, {}, [None, None, None], id="the-volume-defaults"),
        pytest.param(0o600, None, {"defaultMode": 0o600}, [None, None, None], id="a-default-mode"),
        pytest.param(0o400, (0o640, 0o644), {"defaultMode": 0o400}, [0o640, 0o644, 0o644], id="per-file-modes"),
    ],
)
def test_the_key_volume_holds_the_pair_and_the_public_key_as_authorized_keys(
    default_mode: int | None, key_modes: tuple[int, int] | None, secret_modes: Obj, file_modes: list[int | None]
) -> None:
    volume = openmpi.ssh_volume("v", "job-ssh", default_mode=default_mode, key_modes=key_modes)
    source = volume["secret"]
    assert (volume["name"], source["secretName"]) == ("v", "job-ssh")
    assert {k: v for k, v in source.items() if k == "defaultMode"} == secret_modes
    assert [(i["key"], i["path"], i.get("mode")) for i in source["items"]] == [
        ("ssh-privatekey", "id_rsa", file_modes[0]),
        ("ssh-publickey", "id_rsa.pub", file_modes[1]),
        ("ssh-publickey", "authorized_keys", file_modes[2]),
    ]


def test_an_open_mpi_mpijob_launcher_gets_the_shared_env() -> None:
    body = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "ml", "uid": "u"},
        "spec": {
            "slotsPerWorker": 3,
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
                "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}},
            },
        },
    }
    job = apply_defaults(MPIJob.model_validate(body), KINDS["MPIJob"])
    launcher = MPIJOB_PLUGIN.launcher_job(job)
    env = _env(launcher["spec"]["template"]["spec"]["containers"][0])
    assert {k: v for k, v in env.items() if k.startswith(("OMPI_", "PRTE_"))} == OPEN_MPI_4 | OPEN_MPI_5


def _replicated_job(name: str) -> Obj:
    pod = {"containers": [{"name": "node", "image": "i"}]}
    return {"name": name, "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}


def test_a_trainer_mpi_policy_launcher_gets_the_shared_env_and_hostfile() -> None:
    trainjob = {"metadata": {"name": "tj"}, "spec": {"trainer": {"numNodes": 2}}}
    runtime = {"spec": {"mlPolicy": {"numNodes": 2, "mpi": {"numProcPerNode": 3}}}}
    js: Obj = {"spec": {"replicatedJobs": [_replicated_job("launcher"), _replicated_job("node")]}}
    built = policies.mpi(trainjob, runtime, js, Rendezvous("tj-node-0-0.tj", 29500))
    launcher, node = js["spec"]["replicatedJobs"]
    assert _env(launcher["template"]["spec"]["template"]["spec"]["containers"][0]) == OPEN_MPI_4 | OPEN_MPI_5
    assert _env(node["template"]["spec"]["template"]["spec"]["containers"][0]) == {}
    (config,) = built.companions
    assert config["data"] == {"hostfile": "tj-node-0-0.tj slots=3\ntj-node-0-1.tj slots=3\n"}
