"""Everything one reconcile pass may look at: the job, the children it owns, and the time."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainyard.api.autoscaling import HorizontalPodAutoscaler
from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.podgroup import PodGroup
from trainyard.frameworks.network import NetworkMode, WaitForMaster


@dataclass(frozen=True)
class ControllerSettings:
    network_mode: NetworkMode = NetworkMode.CLUSTER_DNS
    node_address: str = "127.0.0.1"
    wait_for_master: WaitForMaster | None = field(default_factory=WaitForMaster)
    """Cluster mode: the init container Worker pods wait for the master with (None: disabled)."""
    gang_scheduler_name: str = ""
    """Upstream's ``--gang-scheduler-name``: empty is no gang scheduling, ``volcano`` Volcano's
    PodGroups, any other name scheduler-plugins' (with pods sent to that scheduler)."""
    pending_timeout: timedelta | None = timedelta(minutes=5)
    """A pod Pending longer than this gives its job a ``Pending`` condition naming why; None: never."""


@dataclass(frozen=True)
class Observed:
    job: TrainingJob
    pods: tuple[Pod, ...]
    services: tuple[Service, ...]
    now: datetime
    pod_group: PodGroup | None = None
    """The PodGroup named after the job, when gang scheduling is on and it exists."""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    """PriorityClass values by name, read only when a PodGroup's minResources must be computed."""
    hpa: HorizontalPodAutoscaler | None = None
    """The HorizontalPodAutoscaler named after the job (PyTorchJob), when it exists and was read."""
