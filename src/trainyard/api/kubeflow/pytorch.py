"""PyTorchJob (``kubeflow.org/v1``): the schema, exactly as upstream names it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
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
