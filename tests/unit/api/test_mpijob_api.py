"""MPIJob v2beta1 at admission: the mpi-operator's validation with field paths, and its defaults."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api.defaults import apply_defaults
from trainyard.api.kinds import KINDS
from trainyard.api.kubeflow.mpi import MPIJob
from trainyard.api.validation import review_job

INFO = KINDS["MPIJob"]


def manifest(**spec: Any) -> dict[str, Any]:
    replicas = spec.pop("specs", None) or {
        "Launcher": {"replicas": 1, "template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
        "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}},
    }
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {"mpiReplicaSpecs": replicas, **spec},
    }


def errors(body: dict[str, Any]) -> list[str]:
    return [str(e) for e in review_job(body, INFO).errors]


def test_upstreams_example_is_valid() -> None:
    assert errors(manifest(slotsPerWorker=1, runPolicy={"cleanPodPolicy": "Running"})) == []


LAUNCHER = {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}}


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            manifest(specs={"Worker": {"replicas": 1, **LAUNCHER}}),
            ["spec.mpiReplicaSpecs.Launcher: Required value: must have Launcher replica spec"],
        ),
        (
            manifest(specs={"Launcher": {"replicas": 2, **LAUNCHER}}),
            ["spec.mpiReplicaSpecs.Launcher.replicas: Invalid value: 2: must be 1"],
        ),
        (manifest(slotsPerWorker=-1), ["spec.slotsPerWorker: Invalid value: -1: must be greater than or equal to 0"]),
        (
            manifest(mpiImplementation="OpenMPI5"),
            ['spec.mpiImplementation: Unsupported value: "OpenMPI5": supported values: "Intel", "MPICH", "OpenMPI"'],
        ),
        (
            manifest(specs={"Launcher": {"restartPolicy": "Always", **LAUNCHER}}),
            [
                "spec.mpiReplicaSpecs.Launcher.restartPolicy: Unsupported value: "
                '"Always": supported values: "Never", "OnFailure"'
            ],
        ),
        (
            manifest(specs={"Launcher": LAUNCHER, "Worker": {"replicas": 0, **LAUNCHER}}),
            ["spec.mpiReplicaSpecs.Worker.replicas: Invalid value: 0: must be greater than or equal to 1"],
        ),
        (
            manifest(specs={"Launcher": {"template": {"spec": {"containers": []}}}}),
            [
                "spec.mpiReplicaSpecs.Launcher.template.spec.containers: "
                "Required value: must define at least one container"
            ],
        ),
        (
            manifest(runPolicy={"managedBy": "kubeflow.org/training-operator"}),
            [
                'spec.runPolicy.managedBy: Unsupported value: "kubeflow.org/training-operator": supported values: '
                '"kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"'
            ],
        ),
    ],
    ids=[
        "no-launcher",
        "two-launchers",
        "negative-slots",
        "unknown-implementation",
        "launcher-always",
        "zero-workers",
        "no-containers",
        "managed-by-v1-operator",
    ],
)
def test_bad_input_is_refused_with_field_paths(body: dict[str, Any], expected: list[str]) -> None:
    assert errors(body) == expected


def test_a_name_too_long_for_the_last_workers_hostname_is_refused() -> None:
    body = manifest()
    body["metadata"]["name"] = "a" * 55
    [problem] = errors(body)
    assert problem.startswith("metadata.name: Invalid value: ")
    assert f'"{"a" * 55}-worker-1"' in problem


def test_defaults_are_the_mpi_operators() -> None:
    job = apply_defaults(MPIJob.model_validate(manifest(specs={"Launcher": LAUNCHER, "Worker": LAUNCHER})), INFO)
    assert job.spec.slots_per_worker == 1
    assert job.spec.ssh_auth_mount_path == "/root/.ssh"
    assert job.spec.mpi_implementation == "OpenMPI"
    assert job.spec.launcher_creation_policy == "AtStartup"
    assert job.spec.run_launcher_as_worker is False
    assert job.run_policy.clean_pod_policy == "None"
    launcher, worker = job.replica_specs["Launcher"], job.replica_specs["Worker"]
    assert (launcher.replicas, launcher.restart_policy) == (1, "OnFailure")
    assert (worker.replicas, worker.restart_policy) == (0, "Never")
    assert launcher.template.spec.containers[0].ports is None  # no port is defaulted
