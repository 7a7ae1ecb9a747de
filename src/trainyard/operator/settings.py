"""Operator settings: one explicit value, passed down; no globals."""

from __future__ import annotations

from dataclasses import dataclass, field

from trainyard.controller import ControllerSettings
from trainyard.frameworks.network import NetworkMode


@dataclass(frozen=True)
class OperatorSettings:
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    namespace: str = "*"
    """Namespace to watch; ``*`` watches all."""
    workers: int = 2

    @classmethod
    def host(cls, node_address: str = "127.0.0.1", gang_scheduler_name: str = "") -> OperatorSettings:
        return cls(
            controller=ControllerSettings(
                network_mode=NetworkMode.HOST, node_address=node_address, gang_scheduler_name=gang_scheduler_name
            )
        )
