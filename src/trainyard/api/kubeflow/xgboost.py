"""XGBoostJob (``kubeflow.org/v1``): the schema exactly as upstream names it, its defaults and its rules.

Upstream's ``xgboostjob_types.go``, its defaults (only the common ones of reference §1.2) and the
XGBoostJob part of its validating webhook (reference §2.2: a Master must be there, and only one),
all registered through ``XGBOOSTJOB``. The rules every kind shares (replica types, containers,
images, names, ``runPolicy``) are ``api.validation``'s.
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

MASTER = "Master"


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
    """The Master hosts the Rabit tracker: there must be one, and exactly one replica of it.

    A Master without ``replicas`` is accepted, as for PyTorchJob: defaulting makes it 1 (upstream
    refuses it, since its webhook sees the job before any default).
    """
    assert isinstance(job, XGBoostJob)
    base = f"spec.{XGBOOSTJOB.replica_specs_field}"
    # Keys are matched as defaulting will canonicalise them ("master" is the Master).
    master = next((spec for key, spec in job.replica_specs.items() if key.lower() == MASTER.lower()), None)
    if master is None:
        return [FieldError(ErrorType.REQUIRED, f"{base}.{MASTER}", "must be present")]
    if master.replicas not in (None, 1):
        return [FieldError(ErrorType.FORBIDDEN, f"{base}.{MASTER}.replicas", "must be 1")]
    return []


XGBOOSTJOB = KindInfo(
    kind="XGBoostJob",
    plural="xgboostjobs",
    singular="xgboostjob",
    short_names=(),  # upstream's CRD declares none
    group=GROUP,
    version=VERSION,
    model=XGBoostJob,
    replica_specs_field="xgbReplicaSpecs",
    replica_types=(MASTER, "Worker"),
    default_container="xgboost",
    default_port_name="xgboostjob-port",
    default_port=9999,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name="xgboostjob-controller",
    framework=UPSTREAM_FRAMEWORKS["XGBoostJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    ttl_deletion_reason="SuccessfulDeleteJob",
    validate=validate,
)
