"""XGBoostJob (``kubeflow.org/v1``): the schema as upstream names it and its webhook rules.

Upstream's ``xgboostjob_types.go`` and the XGBoostJob part of its validating webhook (reference
§2.2: a Master, exactly one, hosts the collective's tracker), registered through ``XGBOOSTJOB``.
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


class XGBoostJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    xgb_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class XGBoostJob(TrainingJob):
    api_version: Literal["kubeflow.org/v1"] | None = "kubeflow.org/v1"
    kind: Literal["XGBoostJob"] | None = "XGBoostJob"
    spec: XGBoostJobSpec = Field(default_factory=XGBoostJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.xgb_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


def validate(job: TrainingJob) -> list[FieldError]:
    assert isinstance(job, XGBoostJob)
    specs = job.spec.xgb_replica_specs
    if not specs:
        return []  # the common rules already say the map is required
    master = next((name for name in specs if name.lower() == "master"), None)
    if master is None:
        return [FieldError(ErrorType.REQUIRED, "spec.xgbReplicaSpecs.Master", "must be present")]
    if specs[master].replicas not in (None, 1):
        # upstream also refuses an unset count (its webhook sees the job before defaulting, §0);
        # unset means 1 everywhere else, so it is accepted here, as for a PyTorchJob's Master
        return [FieldError(ErrorType.FORBIDDEN, f"spec.xgbReplicaSpecs.{master}.replicas", "must be 1")]
    return []


XGBOOSTJOB = KindInfo(
    kind="XGBoostJob",
    plural="xgboostjobs",
    singular="xgboostjob",
    short_names=("xgbj",),
    group=GROUP,
    version=VERSION,
    model=XGBoostJob,
    replica_specs_field="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="xgboost",
    default_port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name="xgboostjob-controller",
    framework=UPSTREAM_FRAMEWORKS["XGBoostJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    validate=validate,
)
