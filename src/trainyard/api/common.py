"""Types shared by every training-job kind: replica specs, run policy, job status.

Names and JSON shapes follow Kubeflow Training Operator v1 (``kubeflow.org/v1``) so that its
manifests run unchanged.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field

from trainyard.api.core import PodTemplateSpec
from trainyard.api.meta import K8sModel, Time, TypedObject


class CleanPodPolicy(StrEnum):
    NONE = "None"
    RUNNING = "Running"
    ALL = "All"


class ConditionType(StrEnum):
    CREATED = "Created"
    RUNNING = "Running"
    RESTARTING = "Restarting"
    SUCCEEDED = "Succeeded"
    SUSPENDED = "Suspended"
    FAILED = "Failed"
    PENDING = "Pending"
    """trainyard: a pod has waited (unschedulable, image pull, config error) longer than allowed."""


class RestartScope(StrEnum):
    """trainyard: what a retryable replica failure restarts (``runPolicy.restartScope``).

    Unset: ``Job`` for a static world (every rank fixed at start), ``Replica`` for an elastic one.
    """

    REPLICA = "Replica"
    """Only the failed replica (upstream's behaviour)."""
    JOB = "Job"
    """Every replica, deleted and recreated together (a static DDP world cannot lose one rank)."""


class ReplicaSpec(K8sModel):
    replicas: int | None = None
    restart_policy: str | None = None
    template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)


QUEUE_IMMUTABLE = "spec.runPolicy.schedulingPolicy.queue is immutable"


class SchedulingPolicy(K8sModel):
    min_available: int | None = None
    # Upstream's CRD carries this CEL rule; admission enforces it (api.validation.validate_job_update).
    queue: str | None = Field(
        default=None,
        json_schema_extra={"x-kubernetes-validations": [{"rule": "self == oldSelf", "message": QUEUE_IMMUTABLE}]},
    )
    # A ResourceList: quantities are written as integers or strings (``cpu: 2``, ``memory: 1Gi``).
    min_resources: dict[str, int | str] | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: int | None = None


class EarlyStopping(K8sModel):
    """trainyard: end the job ``Succeeded`` early on a metric its training code reports
    (``status.trainingProgress``, through ``trainyard.runtime``): when it reaches ``target``, or
    after ``patience`` completed epochs without improving on its best by more than ``minDelta``.
    Defaults (``controller.progress``): metric ``accuracy``; mode ``min`` for a metric whose name
    says loss or error, else ``max``."""

    metric: str | None = None
    mode: str | None = None
    """``max`` or ``min``: which way is better."""
    target: float | None = None
    patience: int | None = None
    min_delta: float | None = None


class RunPolicy(K8sModel):
    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: int | None = None
    active_deadline_seconds: int | None = None
    backoff_limit: int | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None
    restart_scope: RestartScope | None = None
    early_stopping: EarlyStopping | None = None
    """trainyard's addition (``kubeflow.org/v1`` kinds): a success policy on reported metrics."""


class JobCondition(K8sModel):
    type: ConditionType
    status: str
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class ReplicaStatus(K8sModel):
    active: int | None = None
    succeeded: int | None = None
    failed: int | None = None
    label_selector: dict[str, Any] | None = None
    selector: str | None = None


class PodLedgerEntry(K8sModel):
    """trainyard: what of one live pod is already counted and reported (``controller.restarts``)."""

    name: str
    uid: str
    restarts: int = 0
    """Container restarts (in place, by the kubelet) already in ``JobStatus.restart_count``."""
    exits: int = 0
    """Exits of the default container already reported as ``ExitedWithCode`` events."""
    recreate: bool | None = None
    """Its failure is counted as a restart: the pod is to be deleted and recreated."""


class CheckpointRef(K8sModel):
    path: str
    epoch: int | None = None
    time: Time | None = None


class BestMetric(K8sModel):
    """The best value of ``runPolicy.earlyStopping``'s metric so far, and the epoch it was reported at."""

    metric: str
    value: float
    epoch: int | None = None


class TrainingProgress(K8sModel):
    """trainyard: what the job's training code last reported (``status.trainingProgress``).

    Written only by the operator's status server (``operator.statusserver``, merged by
    ``controller.progress.merge``); the reconciler reads it and never writes it back.
    """

    progress_percentage: int | None = None
    progress: str | None = None
    """``progressPercentage`` for display (``"45%"``), the PROGRESS column."""
    current_epoch: int | None = None
    """Epochs completed."""
    total_epochs: int | None = None
    current_step: int | None = None
    total_steps: int | None = None
    metrics: dict[str, int | float | str] | None = None
    """The latest value of each metric, by name."""
    estimated_remaining_seconds: int | None = None
    last_checkpoint: CheckpointRef | None = None
    best: BestMetric | None = None
    last_update_time: Time | None = None


class JobStatus(K8sModel):
    conditions: list[JobCondition] = Field(default_factory=list)
    replica_statuses: dict[str, ReplicaStatus] = Field(default_factory=dict)
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None
    restart_count: int | None = None
    """trainyard: every restart so far (in place, by re-creation, whole-job), bounded by backoffLimit."""
    pod_ledger: list[PodLedgerEntry] | None = None
    training_progress: TrainingProgress | None = None


class TrainingJob(TypedObject):
    """What every kind has in common; each kind names its replica-spec map differently."""

    status: JobStatus = Field(default_factory=JobStatus)

    @property
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        raise NotImplementedError

    @property
    def run_policy(self) -> RunPolicy:
        raise NotImplementedError
