"""MXJob (``kubeflow.org/v1``, Training Operator v1.7): the schema as upstream named it, and its rules.

MXNet is retired (its last release is from 2022; no wheel for Python 3.11), and upstream dropped
the kind after v1.7. It is served so that old manifests still apply and run whatever command
they name, with v1.7's ``MX_CONFIG`` and ``DMLC_*`` wiring (``frameworks.mxnet``).

From v1.7's ``mxnet_types.go``, ``mxnet_defaults.go`` and its CRD: ``jobMode`` is a required
string (``MXTrain``: Scheduler, Servers, Workers; ``MXTune``: TunerTracker, TunerServers, a Tuner)
that nothing reads; the defaults are the common ones. v1.7 had no webhook: its controller checked
a job on every pass and, for a bad one, only logged "MXJobSpec is not valid" in an event. Here
the common admission rules (``api.validation``) refuse such a job with field paths instead.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from trainyard.api.common import ReplicaSpec, RunPolicy, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow import CATEGORIES, GROUP, PRINTER_COLUMNS, UPSTREAM_FRAMEWORKS, VERSION
from trainyard.api.meta import K8sModel


class MXJobSpec(K8sModel):
    # v1.7's CRD requires jobMode (a Go string without omitempty), so the API server refuses a job
    # without one ("spec.jobMode: Required value") before admission runs.
    model_config = ConfigDict(json_schema_extra={"required": ["jobMode"]})

    run_policy: RunPolicy = Field(default_factory=RunPolicy)
    job_mode: str = ""
    """``MXTrain`` or ``MXTune``; informational: upstream's controller never reads it."""
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
    ttl_deletion_reason="SuccessfulDeletePod",  # v1.7's MXJob DeleteJob records a pod's reason
)
