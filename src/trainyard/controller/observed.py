"""Everything one reconcile pass may look at: the job, the children it owns, and the time."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.frameworks.network import NetworkMode, WaitForMaster


@dataclass(frozen=True)
class ControllerSettings:
    network_mode: NetworkMode = NetworkMode.CLUSTER_DNS
    node_address: str = "127.0.0.1"
    wait_for_master: WaitForMaster | None = field(default_factory=WaitForMaster)
    """Cluster mode: the init container Worker pods wait for the master with (None: disabled)."""


@dataclass(frozen=True)
class Observed:
    job: TrainingJob
    pods: tuple[Pod, ...]
    services: tuple[Service, ...]
    now: datetime
