"""PaddleJob (``kubeflow.org/v1``): the schema as upstream names it, its defaults and its rules.

Upstream's ``paddlepaddle_types.go``, ``SetDefaults_PaddleJob`` (reference §1.2) and the PaddleJob
part of its validating webhook (reference §2.2), registered through ``PADDLEJOB``. Upstream admits
any ``elasticPolicy``; here its mistakes are refused at admission with their field paths.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kindinfo import KindInfo, ScalePaths
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS, VERSION
from trainyard.api.meta import K8sModel


class PaddleElasticPolicy(K8sModel):
    min_replicas: int | None = None
    max_replicas: int | None = None
    max_restarts: int | None = None
    # autoscaling/v2 MetricSpec items; upstream defaults the policy but acts on none of it
    metrics: list[dict[str, Any]] | None = None


class PaddleJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    paddle_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    elastic_policy: PaddleElasticPolicy | None = None


class PaddleJob(TrainingJob):
    api_version: Literal["kubeflow.org/v1"] | None = "kubeflow.org/v1"
    kind: Literal["PaddleJob"] | None = "PaddleJob"
    spec: PaddleJobSpec = Field(default_factory=PaddleJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.paddle_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def set_defaults(job: TrainingJob) -> None:
    assert isinstance(job, PaddleJob)
    elastic = job.spec.elastic_policy
    if elastic is None:
        return
    worker = job.spec.paddle_replica_specs.get("Worker")
    workers = worker.replicas if worker and worker.replicas is not None else 1
    if elastic.min_replicas is None and elastic.max_replicas is None:
        elastic.min_replicas = elastic.max_replicas = workers
    elif elastic.min_replicas is None:
        elastic.min_replicas = elastic.max_replicas
    elif elastic.max_replicas is None:
        elastic.max_replicas = elastic.min_replicas


def validate(job: TrainingJob) -> list[FieldError]:
    assert isinstance(job, PaddleJob)
    elastic = job.spec.elastic_policy
    if elastic is None:
        return []
    errors: list[FieldError] = []
    path = "spec.elasticPolicy"
    if not any(name.lower() == "worker" for name in job.spec.paddle_replica_specs):
        errors.append(
            FieldError(
                ErrorType.REQUIRED, "spec.paddleReplicaSpecs.Worker", "must be configured if elastic policy is used"
            )
        )
    for field, value in (("minReplicas", elastic.min_replicas), ("maxReplicas", elastic.max_replicas)):
        if value is not None and value < 1:
            errors.append(FieldError(ErrorType.INVALID, f"{path}.{field}", f"{value}: must be at least 1"))
    low, high = elastic.min_replicas, elastic.max_replicas
    if low is not None and high is not None and 1 <= high < low:
        errors.append(
            FieldError(ErrorType.INVALID, f"{path}.maxReplicas", f"{high}: must not be less than minReplicas ({low})")
        )
    if elastic.max_restarts is not None and elastic.max_restarts < 0:
        errors.append(
            FieldError(ErrorType.INVALID, f"{path}.maxRestarts", f"{elastic.max_restarts}: must be non-negative")
        )
    return errors


PADDLEJOB = KindInfo(
    kind="PaddleJob",
    plural="paddlejobs",
    singular="paddlejob",
    short_names=(),  # upstream's CRD declares none
    group=GROUP,
    version=VERSION,
    model=PaddleJob,
    replica_specs_field="paddleReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="paddle",
    default_port_name="master",
    default_port=36543,
    default_restart_policy=RestartPolicy.ON_FAILURE,
    controller_name="paddlejob-controller",
    framework=UPSTREAM_FRAMEWORKS["PaddleJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    scale=ScalePaths(
        spec_replicas=".spec.paddleReplicaSpecs.Worker.replicas",
        status_replicas=".status.replicaStatuses.Worker.active",
        label_selector=".status.replicaStatuses.Worker.selector",
    ),
    ttl_deletion_reason="SuccessfulDeletePod",
    quote_container_name=True,
    set_defaults=set_defaults,
    validate=validate,
)
