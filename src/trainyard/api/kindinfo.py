"""What trainyard knows of one job kind: names, schema model, upstream constants and its own rules.

Schema-level knowledge (what upstream keeps in ``*_types.go``, ``*_defaults.go`` and its webhook).
A kind's API module (``api/kubeflow/<kind>.py``) builds its ``KindInfo``; ``api.kinds.KINDS`` is
the one table of them. Generic code knows a kind only through it: the API server installs the
CRD and admits writes (``api.crd``, ``api.validation``), defaulting calls the kind's hook
(``api.defaults``), the controller, operator, SDK and CLI take names, labels and event reasons
from it. Behaviour (env, success rules) is the framework plugin's (``trainyard.frameworks``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainyard.api.common import TrainingJob
from trainyard.api.core import RestartPolicy
from trainyard.api.field_errors import FieldError


@dataclass(frozen=True)
class ScalePaths:
    spec_replicas: str
    status_replicas: str
    label_selector: str


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry of the CRD: what ``kubectl get`` shows."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    """0: always shown; 1: only with ``-o wide``."""


def no_defaults(job: TrainingJob) -> None:
    """A kind with no defaults of its own beyond the common ones of ``api.defaults``."""


def no_errors(job: TrainingJob) -> list[FieldError]:
    """A kind with no admission rules of its own beyond the common ones of ``api.validation``."""
    return []


def no_warnings(spec: Mapping[str, Any]) -> list[str]:
    """A kind with no deprecated fields."""
    return []


@dataclass(frozen=True)
class KindInfo:
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    group: str
    version: str
    model: type[TrainingJob]
    replica_specs_field: str
    replica_types: tuple[str, ...]
    default_container: str
    default_port_name: str
    default_port: int
    default_restart_policy: RestartPolicy
    controller_name: str
    framework: str
    """The ``framework`` label of the operator's job metrics, as upstream's controllers set it."""
    printer_columns: tuple[PrinterColumn, ...]
    categories: tuple[str, ...]
    """``kubectl get <category>`` lists every kind that names it."""
    scale: ScalePaths | None = None
    quote_container_name: bool = False
    """Upstream's webhook quotes the default container's name in its "must have at least one
    container with name" error for some kinds (PaddleJob); kept word for word."""
    ttl_deletion_reason: str = "SuccessfulDeleteJob"
    """The reason of the event a ``ttlSecondsAfterFinished`` deletion records. Upstream names it
    after a pod for some kinds (reference §6.5); kept so that event filters written for upstream
    keep matching."""
    default_replicas: Mapping[str, int] = field(default_factory=dict, compare=False)
    """Replica types whose ``replicas`` default to other than 1 (the mpi-operator's Worker: 0)."""
    restart_policies: Mapping[str, RestartPolicy] = field(default_factory=dict, compare=False)
    """Replica types whose ``restartPolicy`` defaults to other than ``default_restart_policy``."""
    managed_by: tuple[str, ...] = (
        "kubeflow.org/training-operator",
        "kueue.x-k8s.io/multikueue",
        "trainyard.dev/operator",
    )
    """The ``runPolicy.managedBy`` values admission accepts; the first is the one this operator
    reconciles (as is no value at all), any other names a controller that does the work instead."""
    training_progress: bool = True
    """Whether jobs of the kind get ``status.trainingProgress`` from their training code (the
    status server's route, the progress env of their pods) and may set
    ``runPolicy.earlyStopping``: every ``kubeflow.org`` kind (MPIJob's launcher Job template
    and workers are decorated by ``controller.launched``, the others' pods by the replica pass)."""
    common_replica_rules: bool = True
    """Whether ``api.validation``'s replica rules (types, containers, images, the default
    container's name, replicas >= 1) apply; False for a kind whose own ``validate`` has its own."""
    set_defaults: Callable[[TrainingJob], None] = no_defaults
    """The kind's own defaults, applied in place to a copy the common defaults were applied to."""
    validate: Callable[[TrainingJob], list[FieldError]] = no_errors
    """The kind's own admission errors for a parsed job (the common ones are ``api.validation``'s)."""
    warnings: Callable[[Mapping[str, Any]], list[str]] = no_warnings
    """Deprecation warnings for a manifest's raw ``spec`` (raw, so they come even with type errors)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"
