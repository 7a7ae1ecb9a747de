"""MXJob (``kubeflow.org/v1``, Training Operator v1.7): the schema as upstream named it.

MXNet is retired (its last release is from 2022; no wheel for Python 3.11), and upstream dropped
the kind after v1.7. It is served so that old manifests still apply and run whatever command
they name, with v1.7's ``MX_CONFIG`` and ``DMLC_*`` wiring (``frameworks.mxnet``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS, VERSION
from trainyard.api.meta import K8sModel

JOB_MODES = ("MXTrain", "MXTune")


class MXJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    job_mode: str | None = None
    """``MXTrain`` (Scheduler, Servers, Workers) or ``MXTune`` (TunerTracker, TunerServers, a Tuner)."""
    mx_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class MXJob(TrainingJob):
    api_version: Literal["kubeflow.org/v1"] | None = "kubeflow.org/v1"
    kind: Literal["MXJob"] | None = "MXJob"
    spec: MXJobSpec = Field(default_factory=MXJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.mx_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def set_defaults(job: TrainingJob) -> None:
    assert isinstance(job, MXJob)
    if not job.spec.job_mode:
        job.spec.job_mode = "MXTrain"


def validate(job: TrainingJob) -> list[FieldError]:
    assert isinstance(job, MXJob)
    mode = job.spec.job_mode
    if mode and mode not in JOB_MODES:
        return [FieldError(ErrorType.NOT_SUPPORTED, "spec.jobMode", f'"{mode}": supported values: "MXTrain", "MXTune"')]
    return []


MXJOB = KindInfo(
    kind="MXJob",
    plural="mxjobs",
    singular="mxjob",
    short_names=(),  # upstream's CRD declares none
    group=GROUP,
    version=VERSION,
    model=MXJob,
    replica_specs_field="mxReplicaSpecs",
    replica_types=("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"),
    default_container="mxnet",
    default_port_name="mxjob-port",
    default_port=9091,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name="mxjob-controller",
    framework=UPSTREAM_FRAMEWORKS["MXJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    set_defaults=set_defaults,
    validate=validate,
)
