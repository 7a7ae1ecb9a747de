"""PyTorchJob (``kubeflow.org/v1``): the schema exactly as upstream names it, its defaults and its rules.

Upstream's ``pytorchjob_types.go``, ``SetDefaults_PyTorchJob`` (reference §1.2) and the
PyTorchJob part of its validating webhook (reference §2), all registered through ``PYTORCHJOB``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.defaults import default_bounds
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kindinfo import KindInfo, ScalePaths
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS, VERSION
from trainyard.api.meta import K8sModel


class RdzvConf(K8sModel):
    key: str
    value: str


class ElasticPolicy(K8sModel):
    min_replicas: int | None = None
    max_replicas: int | None = None
    rdzv_backend: str | None = None
    rdzv_port: int | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RdzvConf] | None = None
    standalone: bool | None = None
    n_proc_per_node: int | None = None
    max_restarts: int | None = None
    # autoscaling/v2 MetricSpec items, passed through to the HPA upstream creates
    metrics: list[dict[str, Any]] | None = None


class PyTorchJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    elastic_policy: ElasticPolicy | None = None
    nproc_per_node: str | None = None


class PyTorchJob(TrainingJob):
    api_version: Literal["kubeflow.org/v1"] | None = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] | None = "PyTorchJob"
    spec: PyTorchJobSpec = Field(default_factory=PyTorchJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.pytorch_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def set_defaults(job: TrainingJob) -> None:
    assert isinstance(job, PyTorchJob)
    elastic = job.spec.elastic_policy
    if job.spec.nproc_per_node is None and (elastic is None or elastic.n_proc_per_node is None):
        job.spec.nproc_per_node = "auto"
    if elastic is not None:
        default_bounds(elastic, job.spec.pytorch_replica_specs.get("Worker"))


def validate(job: TrainingJob) -> list[FieldError]:
    assert isinstance(job, PyTorchJob)
    errors: list[FieldError] = []
    specs = {k.lower(): v for k, v in job.spec.pytorch_replica_specs.items()}
    master = specs.get("master")
    if master is not None and master.replicas not in (None, 1):
        errors.append(FieldError(ErrorType.FORBIDDEN, "spec.pytorchReplicaSpecs.Master.replicas", "must be 1"))
    elastic = job.spec.elastic_policy
    if elastic is not None:
        if "worker" not in specs:
            errors.append(
                FieldError(
                    ErrorType.REQUIRED,
                    "spec.pytorchReplicaSpecs.Worker",
                    "must be configured if elastic policy is used",
                )
            )
        if elastic.n_proc_per_node is not None and job.spec.nproc_per_node is not None:
            errors.append(
                FieldError(
                    ErrorType.FORBIDDEN,
                    "spec.elasticPolicy.nProcPerNode",
                    "must not be used with spec.nprocPerNode",
                )
            )
    return errors


def warnings(spec: Mapping[str, Any]) -> list[str]:
    elastic = spec.get("elasticPolicy")
    if isinstance(elastic, Mapping) and elastic.get("nProcPerNode") is not None:
        return ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    return []


PYTORCHJOB = KindInfo(
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    short_names=("ptj",),
    group=GROUP,
    version=VERSION,
    model=PyTorchJob,
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="pytorch",
    default_port_name="pytorchjob-port",
    default_port=23456,
    default_restart_policy=RestartPolicy.ON_FAILURE,
    controller_name="pytorchjob-controller",
    framework=UPSTREAM_FRAMEWORKS["PyTorchJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    scale=ScalePaths(
        spec_replicas=".spec.pytorchReplicaSpecs.Worker.replicas",
        status_replicas=".status.replicaStatuses.Worker.active",
        label_selector=".status.replicaStatuses.Worker.selector",
    ),
    ttl_deletion_reason="SuccessfulDeletePod",
    set_defaults=set_defaults,
    validate=validate,
    warnings=warnings,
)
