"""Operator settings: one explicit value, passed down; no globals."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta

from trainyard.controller import ControllerSettings
from trainyard.frameworks.network import NetworkMode
from trainyard.frameworks.trainer.status import StatusServer

DEFAULT_HOST_PORTS = "20000-32767"
HOST_PORTS_ENV = "TRAINYARD_HOST_PORTS"
"""The default of ``--host-ports`` and the embedded plane's range: two planes on one host (or
parallel test workers) give each its own, since a port is reserved only by the operator holding it."""


@dataclass(frozen=True)
class OperatorSettings:
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    namespace: str = "*"
    """Namespace to watch; ``*`` watches all."""
    workers: int = 2
    kinds: tuple[str, ...] = ()
    """Kinds to reconcile (``--enable-scheme``); empty: every kind trainyard has a plugin for."""
    host_ports: tuple[int, int] = (20000, 32767)  # DEFAULT_HOST_PORTS
    """Host network mode: the range ports are allocated from (``--host-ports``)."""
    trainer_status: StatusServer | None = None
    """Where TrainJobs' trainer pods report progress (the status server this process serves); None: off."""
    observations: str | None = None
    """The SQLite file of Katib Trials' collected metrics (``--observations``); None: kept in memory."""

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


def parse_host_ports(text: str) -> tuple[int, int]:
    """``LOW-HIGH`` as ``--host-ports`` and ``$TRAINYARD_HOST_PORTS`` take it; ValueError names the rule."""
    low, sep, high = text.strip().partition("-")
    if not (sep and low.isdigit() and high.isdigit() and 1024 <= int(low) < int(high) <= 65535):
        raise ValueError(f"{text}: expected LOW-HIGH with 1024 <= LOW < HIGH <= 65535")
    return int(low), int(high)
