"""JAXJob (``kubeflow.org/v1``): the schema as upstream names it; every replica is a Worker.

Upstream's ``jax_types.go`` and its webhook (reference §2.2), registered through ``JAXJOB``.
Upstream's JAXJob webhook skips the ``managedBy`` check; the common rules apply it here too.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.kindinfo import KindInfo, ScalePaths
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS, VERSION
from trainyard.api.meta import K8sModel


class JAXJobSpec(K8sModel):
    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    jax_replica_specs: dict[str, ReplicaSpec] = Field(default_factory=dict)


class JAXJob(TrainingJob):
    api_version: Literal["kubeflow.org/v1"] | None = "kubeflow.org/v1"
    kind: Literal["JAXJob"] | None = "JAXJob"
    spec: JAXJobSpec = Field(default_factory=JAXJobSpec)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.spec.jax_replica_specs

    @property
    def run_policy(self) -> RunPolicy:
        return self.spec.run_policy


JAXJOB = KindInfo(
    kind="JAXJob",
    plural="jaxjobs",
    singular="jaxjob",
    short_names=(),  # upstream's CRD declares none
    group=GROUP,
    version=VERSION,
    model=JAXJob,
    replica_specs_field="jaxReplicaSpecs",
    replica_types=("Worker",),
    default_container="jax",
    default_port_name="jaxjob-port",
    default_port=6666,
    default_restart_policy=RestartPolicy.NEVER,
    controller_name="jaxjob-controller",
    framework=UPSTREAM_FRAMEWORKS["JAXJob"],
    printer_columns=PRINTER_COLUMNS,
    categories=CATEGORIES,
    scale=ScalePaths(
        spec_replicas=".spec.jaxReplicaSpecs.Worker.replicas",
        status_replicas=".status.replicaStatuses.Worker.active",
        label_selector=".status.replicaStatuses.Worker.selector",
    ),
    ttl_deletion_reason="SuccessfulDeletePod",
)
