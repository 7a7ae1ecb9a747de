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
from trainyard.api.defaults import default_bounds
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kindinfo import KindInfo, ScalePaths
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS, VERSION
from trainyard.api.meta import K8sModel

ELASTIC = "spec.elasticPolicy"


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
    if job.spec.elastic_policy is not None:
        default_bounds(job.spec.elastic_policy, job.spec.paddle_replica_specs.get("Worker"))


def validate(job: TrainingJob) -> list[FieldError]:
    """The elasticPolicy rules upstream lacks, in the words Kubernetes uses for an HPA's same fields.

    Upstream admits every policy and its defaulting dereferences the Worker spec, so an elastic job
    without Workers crashes its controller pass; the Worker rule is PyTorchJob's.
    """
    assert isinstance(job, PaddleJob)
    elastic = job.spec.elastic_policy
    if elastic is None:
        return []
    errors: list[FieldError] = []
    if not any(name.lower() == "worker" for name in job.spec.paddle_replica_specs):
        errors.append(
            FieldError(
                ErrorType.REQUIRED, "spec.paddleReplicaSpecs.Worker", "must be configured if elastic policy is used"
            )
        )
    low, high, restarts = elastic.min_replicas, elastic.max_replicas, elastic.max_restarts
    if low is not None and low < 1:
        errors.append(
            FieldError(ErrorType.INVALID, f"{ELASTIC}.minReplicas", f"{low}: must be greater than or equal to 1")
        )
    if high is not None and high < 1:
        errors.append(FieldError(ErrorType.INVALID, f"{ELASTIC}.maxReplicas", f"{high}: must be greater than 0"))
    if low is not None and high is not None and high < low:
        errors.append(
            FieldError(
                ErrorType.INVALID, f"{ELASTIC}.maxReplicas", f"{high}: must be greater than or equal to `minReplicas`"
            )
        )
    if restarts is not None and restarts < 0:
        errors.append(
            FieldError(ErrorType.INVALID, f"{ELASTIC}.maxRestarts", f"{restarts}: must be greater than or equal to 0")
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
