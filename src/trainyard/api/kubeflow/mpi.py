"""MPIJob (``kubeflow.org/v2beta1``): the mpi-operator's schema, defaults and rules (reference §3.7).

The mpi-operator's ``v2beta1/types.go`` and ``default.go``, and its ``validation.go`` run at
admission (upstream only runs it in the controller, which then warns with a ``ValidationError``
event and never creates anything, so a mistyped job sits silent): all registered through
``MPIJOB``. Validation sees the job as defaulting leaves it, as upstream's does, so a field left
out is not reported missing; one written wrong is reported with its path. The rules every kind
shares (names, ``runPolicy`` bounds) are ``api.validation``'s; the replica rules are this kind's
own (the mpi-operator's words, and only ``Never`` / ``OnFailure`` restart policies).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from trainyard.api.common import CleanPodPolicy, ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS
from trainyard.api.meta import K8sModel
from trainyard.api.validation import dns1035_problems

VERSION = "v2beta1"
LAUNCHER = "Launcher"
WORKER = "Worker"
OPERATOR_NAME = "mpi-operator"
"""The ``training.kubeflow.org/operator-name`` label of its pods, and its event source."""
MANAGED_BY = ("kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue")
"""The ``runPolicy.managedBy`` values admission accepts; the first is ours (``KindInfo.managed_by``)."""
ROOT_SSH_PATH = "/root/.ssh"


class MPIImplementation(StrEnum):
    OPEN_MPI = "OpenMPI"
    INTEL = "Intel"
    MPICH = "MPICH"


class LauncherCreationPolicy(StrEnum):
    AT_STARTUP = "AtStartup"
    WAIT_FOR_WORKERS_READY = "WaitForWorkersReady"


class MPIJobSpec(K8sModel):
    slots_per_worker: int | None = None
    run_launcher_as_worker: bool | None = None
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    mpi_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    ssh_auth_mount_path: str | None = None
    launcher_creation_policy: str | None = None
    mpi_implementation: str | None = None


class MPIJob(TrainingJob):
    api_version: Literal["kubeflow.org/v2beta1"] | None = "kubeflow.org/v2beta1"
    kind: Literal["MPIJob"] | None = "MPIJob"
    spec: MPIJobSpec = Field(default_factory=MPIJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.mpi_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def set_defaults(job: TrainingJob) -> None:
    """``default.go``: one slot per worker, ``/root/.ssh``, Open MPI, the launcher at startup."""
    assert isinstance(job, MPIJob)
    spec = job.spec
    if spec.slots_per_worker is None:
        spec.slots_per_worker = 1
    if spec.run_launcher_as_worker is None:
        spec.run_launcher_as_worker = False
    if not spec.ssh_auth_mount_path:
        spec.ssh_auth_mount_path = ROOT_SSH_PATH
    if not spec.mpi_implementation:
        spec.mpi_implementation = MPIImplementation.OPEN_MPI.value
    if not spec.launcher_creation_policy:
        spec.launcher_creation_policy = LauncherCreationPolicy.AT_STARTUP.value


def _supported(path: str, value: object, allowed: tuple[str, ...]) -> FieldError:
    listed = ", ".join(f'"{a}"' for a in sorted(allowed))  # as Go's sets.List() orders them
    return FieldError(ErrorType.NOT_SUPPORTED, path, f"{quote(value)}: supported values: {listed}")


def validate(job: TrainingJob) -> list[FieldError]:
    """``validation.go``'s rules for a (defaulted) MPIJob, with its messages."""
    assert isinstance(job, MPIJob)
    job = apply_defaults(job, MPIJOB)
    spec, base = job.spec, "spec"
    errors: list[FieldError] = []
    errors += _name(job)
    specs = f"{base}.mpiReplicaSpecs"
    for name in spec.mpi_replica_specs:
        if name not in (LAUNCHER, WORKER):
            errors.append(_supported(f"{specs}.{name}", name, (LAUNCHER, WORKER)))
    launcher = spec.mpi_replica_specs.get(LAUNCHER)
    if launcher is None:
        errors.append(FieldError(ErrorType.REQUIRED, f"{specs}.{LAUNCHER}", f"must have {LAUNCHER} replica spec"))
    else:
        errors += _replica(launcher, f"{specs}.{LAUNCHER}")
        if launcher.replicas is not None and launcher.replicas != 1:
            errors.append(
                FieldError(ErrorType.INVALID, f"{specs}.{LAUNCHER}.replicas", f"{launcher.replicas}: must be 1")
            )
    worker = spec.mpi_replica_specs.get(WORKER)
    if worker is not None:
        errors += _replica(worker, f"{specs}.{WORKER}")
        if worker.replicas is not None and worker.replicas <= 0:
            errors.append(
                FieldError(
                    ErrorType.INVALID,
                    f"{specs}.{WORKER}.replicas",
                    f"{worker.replicas}: must be greater than or equal to 1",
                )
            )
    if spec.slots_per_worker is not None and spec.slots_per_worker < 0:
        errors.append(
            FieldError(
                ErrorType.INVALID,
                f"{base}.slotsPerWorker",
                f"{spec.slots_per_worker}: must be greater than or equal to 0",
            )
        )
    policy = spec.run_policy.clean_pod_policy
    if policy is not None and policy not in tuple(CleanPodPolicy):
        errors.append(_supported(f"{base}.runPolicy.cleanPodPolicy", policy, tuple(CleanPodPolicy)))
    if spec.mpi_implementation not in tuple(MPIImplementation):
        errors.append(_supported(f"{base}.mpiImplementation", spec.mpi_implementation, tuple(MPIImplementation)))
    if spec.launcher_creation_policy not in tuple(LauncherCreationPolicy):
        errors.append(
            _supported(f"{base}.launcherCreationPolicy", spec.launcher_creation_policy, tuple(LauncherCreationPolicy))
        )
    return errors


def _replica(spec: ReplicaSpec, path: str) -> list[FieldError]:
    errors = []
    allowed = (RestartPolicy.NEVER.value, RestartPolicy.ON_FAILURE.value)
    if spec.restart_policy not in allowed:
        errors.append(_supported(f"{path}.restartPolicy", spec.restart_policy, allowed))
    if not spec.template.spec.containers:
        errors.append(
            FieldError(ErrorType.REQUIRED, f"{path}.template.spec.containers", "must define at least one container")
        )
    return errors


def _name(job: MPIJob) -> list[FieldError]:
    """The last worker's hostname must be a DNS-1035 label (it is its pod's name and its DNS name)."""
    worker = job.spec.mpi_replica_specs.get(WORKER)
    replicas = worker.replicas if worker is not None and worker.replicas and worker.replicas > 0 else 1
    longest = f"{job.name}-worker-{replicas - 1}"
    problems = dns1035_problems(longest)
    if not problems or not job.name:
        return []
    detail = f'will not able to create pod and service with invalid DNS label "{longest}": {", ".join(problems)}'
    return [FieldError(ErrorType.INVALID, "metadata.name", f"{quote(job.name)}: {detail}")]


MPIJOB = KindInfo(
    kind="MPIJob",
    plural="mpijobs",
    singular="mpijob",
    short_names=(),  # the mpi-operator's CRD declares none
    group=GROUP,
    version=VERSION,
    model=MPIJob,
    replica_specs_field="mpiReplicaSpecs",
    replica_types=(LAUNCHER, WORKER),
    default_container="",  # the mpi-operator treats each template's first container as the main one
    default_port_name="",  # and declares no port
    default_port=0,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name=OPERATOR_NAME,
    framework=UPSTREAM_FRAMEWORKS["MPIJob"],
    printer_columns=PRINTER_COLUMNS,  # upstream's State and Age, with trainyard's progress between
    categories=CATEGORIES,
    default_replicas={WORKER: 0},
    restart_policies={LAUNCHER: RestartPolicy.ON_FAILURE},
    managed_by=MANAGED_BY,
    common_replica_rules=False,
    set_defaults=set_defaults,
    validate=validate,
)
