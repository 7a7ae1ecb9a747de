"""What a progress sink receives, and the interface every sink implements.

Kept apart from ``reporting`` so that sinks (``trainer_status``) and the reporter both import it
without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

MetricValue = float | int | str


@dataclass(frozen=True)
class CheckpointInfo:
    path: str
    epoch: int | None
    time: float  # wall clock, seconds since the epoch


@dataclass(frozen=True)
class Snapshot:
    """What a sink receives: the latest reported values and the derived progress."""

    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: Mapping[str, MetricValue] = field(default_factory=dict)
    checkpoint: CheckpointInfo | None = None
    progress_percentage: int | None = None
    estimated_remaining_seconds: int | None = None
    time: float = 0.0  # wall clock when the snapshot was taken, seconds since the epoch


class Sink(Protocol):
    """Where updates go. ``send`` may block up to ``timeout`` seconds and may raise: the
    ``reporting.Reporter`` calls it only from its sender thread and counts an exception as a
    dropped update.

    Two sinks are planned. :class:`trainyard.runtime.trainer_status.TrainerStatusSink` posts to
    Kubeflow Trainer v2's status server, as the official SDK does. The sink for the
    ``kubeflow.org/v1`` kinds will carry the same :class:`Snapshot` (epoch, metrics, checkpoint
    and all) to the control plane for ``status.trainingProgress``; its transport is chosen with
    that status field and is not defined yet, so no such sink exists in this module.
    """

    def send(self, snapshot: Snapshot, timeout: float) -> None: ...
