"""The subset of core/v1 (Pod, Service, Event) that the operator builds and reads.

Only the fields trainyard reasons about are typed; everything else in a pod template travels
through untouched as extra fields (see ``meta.K8sModel``).
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from trainyard.api.meta import K8sModel, ObjectMeta, Time, TypedObject


class RestartPolicy(StrEnum):
    ALWAYS = "Always"
    ON_FAILURE = "OnFailure"
    NEVER = "Never"
    EXIT_CODE = "ExitCode"  # replica-level only; pods get Never and the operator decides


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    UNKNOWN = "Unknown"


class EnvVar(K8sModel):
    name: str
    value: str | None = None


class ContainerPort(K8sModel):
    container_port: int
    name: str | None = None
    protocol: str | None = None


class Container(K8sModel):
    name: str
    image: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    env: list[EnvVar] | None = None
    ports: list[ContainerPort] | None = None


class PodSpec(K8sModel):
    containers: list[Container] = Field(default_factory=list)
    init_containers: list[Container] | None = None
    restart_policy: str | None = None
    node_name: str | None = None
    host_network: bool | None = None
    dns_policy: str | None = None
    termination_grace_period_seconds: int | None = None


class PodTemplateSpec(K8sModel):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class ContainerStateTerminated(K8sModel):
    exit_code: int
    reason: str | None = None
    message: str | None = None
    started_at: Time | None = None
    finished_at: Time | None = None


class ContainerStateRunning(K8sModel):
    started_at: Time | None = None


class ContainerStateWaiting(K8sModel):
    reason: str | None = None
    message: str | None = None


class ContainerState(K8sModel):
    running: ContainerStateRunning | None = None
    terminated: ContainerStateTerminated | None = None
    waiting: ContainerStateWaiting | None = None


class ContainerStatus(K8sModel):
    name: str
    ready: bool = False
    restart_count: int = 0
    image: str = ""
    image_id: str = ""
    started: bool | None = None
    state: ContainerState = Field(default_factory=ContainerState)
    last_state: ContainerState | None = None


class PodCondition(K8sModel):
    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_transition_time: Time | None = None


class PodStatus(K8sModel):
    phase: PodPhase | None = None
    reason: str | None = None
    message: str | None = None
    host_ip: str | None = None
    pod_ip: str | None = None
    start_time: Time | None = None
    conditions: list[PodCondition] | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None


class Pod(TypedObject):
    spec: PodSpec = Field(default_factory=PodSpec)
    status: PodStatus = Field(default_factory=PodStatus)

    @property
    def phase(self) -> PodPhase:
        return self.status.phase or PodPhase.PENDING

    def container_status(self, name: str) -> ContainerStatus | None:
        for status in self.status.container_statuses or []:
            if status.name == name:
                return status
        return None


class ServicePort(K8sModel):
    name: str | None = None
    port: int
    target_port: int | None = None
    protocol: str | None = None


class ServiceSpec(K8sModel):
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    selector: dict[str, str] | None = None
    ports: list[ServicePort] | None = None


class Service(TypedObject):
    spec: ServiceSpec = Field(default_factory=ServiceSpec)


class ObjectReference(K8sModel):
    api_version: str | None = None
    kind: str | None = None
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
