"""The table of job kinds trainyard serves: names, plurals, upstream constants per kind.

This is schema-level knowledge (what upstream keeps in ``*_types.go``): the API server needs it
to install CRDs and validate, the frameworks need it to build replicas. Behaviour lives in
``trainyard.frameworks``.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainyard.api.common import GROUP, VERSION, TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.kubeflow.pytorch import PyTorchJob


@dataclass(frozen=True)
class ScalePaths:
    spec_replicas: str
    status_replicas: str
    label_selector: str


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    model: type[TrainingJob]
    replica_specs_field: str
    replica_types: tuple[str, ...]
    default_container: str
    default_port_name: str
    default_port: int
    default_restart_policy: RestartPolicy
    controller_name: str
    scale: ScalePaths | None = None
    group: str = GROUP
    version: str = VERSION

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


PYTORCHJOB = KindInfo(
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    short_names=("ptj",),
    model=PyTorchJob,
    replica_specs_field="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    default_container="pytorch",
    default_port_name="pytorchjob-port",
    default_port=23456,
    default_restart_policy=RestartPolicy.ON_FAILURE,
    controller_name="pytorchjob-controller",
    scale=ScalePaths(
        spec_replicas=".spec.pytorchReplicaSpecs.Worker.replicas",
        status_replicas=".status.replicaStatuses.Worker.active",
        label_selector=".status.replicaStatuses.Worker.selector",
    ),
)

KINDS: dict[str, KindInfo] = {info.kind: info for info in (PYTORCHJOB,)}


def kind_for_plural(plural: str) -> KindInfo | None:
    return next((info for info in KINDS.values() if info.plural == plural), None)
