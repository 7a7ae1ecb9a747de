"""TFJob (``kubeflow.org/v1``): the schema as upstream names it, its defaults and its admission rules.

Upstream's ``tensorflow_types.go``, ``SetDefaults_TFJob`` (``successPolicy`` nil becomes ``""``,
reference §1.2) and the TFJob part of its validating webhook (at most one Chief or Master, §2.2),
registered through ``TFJOB``. Two refusals go beyond upstream: a ``successPolicy`` other than
``""``/``AllWorkers`` (upstream takes any string and judges by the default policy), and, through
the common rules of ``api.validation``, a replica type TFJob does not have (upstream's TFJob
webhook checks no type, so a misspelt ``Workers`` was admitted).
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

SUCCESS_POLICIES = ("", "AllWorkers")


class TFJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    tf_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)
    success_policy: str | None = None
    """``""``: the chief (or worker 0 without one) decides; ``AllWorkers``: every worker must succeed."""
    enable_dynamic_worker: bool | None = None
    """Sparse ``TF_CONFIG`` (each worker sees only itself) and worker failures do not fail the job."""


class TFJob(TrainingJob):
    api_version: Literal["kubeflow.org/v1"] | None = "kubeflow.org/v1"
    kind: Literal["TFJob"] | None = "TFJob"
    spec: TFJobSpec = Field(default_factory=TFJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.tf_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def set_defaults(job: TrainingJob) -> None:
    assert isinstance(job, TFJob)
    if job.spec.success_policy is None:
        job.spec.success_policy = ""


def validate(job: TrainingJob) -> list[FieldError]:
    assert isinstance(job, TFJob)
    errors: list[FieldError] = []
    # Keys are matched case-insensitively (defaulting renames them), so "chief" and "Master" are two
    # leaders too; "Chief" and "chief" are one type, which the common rules call a duplicate.
    leaders = {name.lower() for name in job.spec.tf_replica_specs} & {"chief", "master"}
    if len(leaders) > 1:
        errors.append(
            FieldError(ErrorType.FORBIDDEN, "spec.tfReplicaSpecs", "must not have more than 1 Chief or Master role")
        )
    policy = job.spec.success_policy
    if policy is not None and policy not in SUCCESS_POLICIES:
        # upstream takes any string and judges by the default policy: a typo would go unnoticed
        errors.append(
            FieldError(ErrorType.NOT_SUPPORTED, "spec.successPolicy", f'"{policy}": supported values: "", "AllWorkers"')
        )
    return errors


TFJOB = KindInfo(
    kind="TFJob",
    plural="tfjobs",
    singular="tfjob",
    short_names=(),  # upstream's CRD declares none
    group=GROUP,
    version=VERSION,
    model=TFJob,
    replica_specs_field="tfReplicaSpecs",
    replica_types=("Chief", "Evaluator", "Master", "PS", "Worker"),
    default_container="tensorflow",
    default_port_name="tfjob-port",
    default_port=2222,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name="tfjob-controller",
    framework=UPSTREAM_FRAMEWORKS["TFJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    set_defaults=set_defaults,
    validate=validate,
)
