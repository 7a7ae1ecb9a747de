"""Operator settings: one explicit value, passed down; no globals."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

from trainyard.controller import ControllerSettings
from trainyard.frameworks.network import NetworkMode


@dataclass(frozen=True)
class OperatorSettings:
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    namespace: str = "*"
    """Namespace to watch; ``*`` watches all."""
    workers: int = 2
    kinds: tuple[str, ...] = ()
    """Kinds to reconcile (``--enable-scheme``); empty: every kind trainyard has a plugin for."""
    host_ports: tuple[int, int] = (20000, 32767)
    """Host network mode: the range ports are allocated from (``--host-ports``)."""

    @classmethod
    def host(cls, node_address: str = "127.0.0.1", gang_scheduler_name: str = "") -> OperatorSettings:
        return cls(
            controller=ControllerSettings(
                network_mode=NetworkMode.HOST, node_address=node_address, gang_scheduler_name=gang_scheduler_name
            )
        )


def with_pending_timeout(settings: OperatorSettings, seconds: float | None) -> OperatorSettings:
    """``settings`` with ``--pending-timeout``: None keeps the default, 0 turns the check off."""
    if seconds is None:
        return settings
    timeout = timedelta(seconds=seconds) if seconds > 0 else None
    return replace(settings, controller=replace(settings.controller, pending_timeout=timeout))
