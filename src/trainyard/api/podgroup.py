"""The PodGroup the operator writes for gang scheduling, in either scheduler's API (reference §6.6).

Two projects define a ``PodGroup``: scheduler-plugins (``scheduling.x-k8s.io/v1alpha1``, pods join
with a label) and Volcano (``scheduling.volcano.sh/v1beta1``, pods join with an annotation).
One model covers both: their specs differ only in which fields are set, and unknown fields are
kept (``K8sModel``), so a group read back and written again loses nothing. ``Quantity`` values
stay as written (``2``, ``"500m"``): they are compared by value, never by spelling.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from trainyard.api.meta import K8sModel, TypedObject

Quantity = int | str

VOLCANO_SCHEDULER = "volcano"
SCHEDULER_PLUGINS_SCHEDULER = "scheduler-plugins-scheduler"
"""The name the embedded plane's scheduler (and scheduler-plugins' usual install) answers to."""

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_TASK_ANNOTATION = "volcano.sh/task-spec"
DEFAULT_QUEUE = "default"


@dataclass(frozen=True)
class Flavour:
    """Which project's PodGroup a gang scheduler name selects (upstream: ``volcano`` or anything else)."""

    group: str
    version: str
    scheduler: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def volcano(self) -> bool:
        return self.group == "scheduling.volcano.sh"


def flavour(gang_scheduler_name: str) -> Flavour:
    if gang_scheduler_name == VOLCANO_SCHEDULER:
        return Flavour("scheduling.volcano.sh", "v1beta1", VOLCANO_SCHEDULER)
    return Flavour("scheduling.x-k8s.io", "v1alpha1", gang_scheduler_name)


class PodGroupSpec(K8sModel):
    min_member: int | None = None
    min_resources: dict[str, Quantity] | None = None
    # Volcano only
    queue: str | None = None
    priority_class_name: str | None = None
    # scheduler-plugins only
    schedule_timeout_seconds: int | None = None


class PodGroupStatus(K8sModel):
    phase: str | None = None


class PodGroup(TypedObject):
    spec: PodGroupSpec = Field(default_factory=PodGroupSpec)
    status: PodGroupStatus = Field(default_factory=PodGroupStatus)
