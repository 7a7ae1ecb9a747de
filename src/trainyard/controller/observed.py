"""Everything one reconcile pass may look at: the job, the children it owns, and the time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.frameworks.network import NetworkMode


@dataclass(frozen=True)
class ControllerSettings:
    network_mode: NetworkMode = NetworkMode.CLUSTER_DNS
    node_address: str = "127.0.0.1"
    pending_timeout: timedelta | None = timedelta(minutes=5)
    """A pod Pending longer than this gives its job a ``Pending`` condition naming why; None: never."""


@dataclass(frozen=True)
class Observed:
    job: TrainingJob
    pods: tuple[Pod, ...]
    services: tuple[Service, ...]
    now: datetime
