"""What a sink receives, and the interface every sink implements.

Kept apart from ``reporting`` so that sinks (``trainer_status``, ``progress``, ``mlflow``) and the
reporter both import it without importing each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

MetricValue = float | int | str
ParamValue = object  # anything ``str()`` can show; mappings are flattened by the sinks that need it


@dataclass(frozen=True)
class CheckpointInfo:
    path: str
    epoch: int | None
    time: float  # wall clock, seconds since the epoch


@dataclass(frozen=True)
class EpochMetrics:
    """The metrics as they stood when ``report()`` first named ``epoch`` (an epoch boundary)."""

    epoch: int
    metrics: Mapping[str, MetricValue]
    time: float  # wall clock of that report, seconds since the epoch


@dataclass(frozen=True)
class Snapshot:
    """What a sink receives: the latest reported values and the derived progress.

    ``epochs`` holds the epoch boundaries crossed since the previous send, oldest first, and is
    filled only for reporters that have a history sink (see :class:`Sink`); ``params`` is every
    parameter given to ``log_params()`` so far.
    """

    epoch: int | None = None
    total_epochs: int | None = None
    step: int | None = None
    total_steps: int | None = None
    metrics: Mapping[str, MetricValue] = field(default_factory=dict)
    checkpoint: CheckpointInfo | None = None
    progress_percentage: int | None = None
    estimated_remaining_seconds: int | None = None
    time: float = 0.0  # wall clock when the snapshot was taken, seconds since the epoch
    params: Mapping[str, ParamValue] = field(default_factory=dict)
    epochs: tuple[EpochMetrics, ...] = ()


class Sink(Protocol):
    """Where updates go. ``send`` may block up to ``timeout`` seconds and may raise: the
    ``reporting.Reporter`` calls it only from its sender thread and counts an exception as a
    dropped update.

    Optional members, looked up with ``getattr``:

    * ``wants_history = True``: the reporter keeps every epoch boundary (bounded) and hands each
      one over exactly once in :attr:`Snapshot.epochs`; a sink that must not lose them on a failed
      send keeps them itself until they are through (``mlflow.MlflowSink`` does).
    * ``close(timeout)``: called once on the sender thread when the reporter closes (at process
      exit), after the last send; e.g. to mark a tracking run finished.

    The sinks: :class:`trainyard.runtime.progress.ProgressSink` posts to the trainyard status
    server (``status.trainingProgress`` of the ``kubeflow.org/v1`` kinds),
    :class:`trainyard.runtime.trainer_status.TrainerStatusSink` to Kubeflow Trainer v2's status
    server, :class:`trainyard.runtime.mlflow.MlflowSink` to an MLflow tracking server.
    """

    def send(self, snapshot: Snapshot, timeout: float) -> None: ...
