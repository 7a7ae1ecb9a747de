"""Progress and metric reporting from inside training code: cheap to call every step, never in the way.

``report()``, ``checkpoint_saved()`` and ``log_params()`` only store values in memory under a tiny
lock; a daemon thread per :class:`Sink` sends it at most one update per interval. A sink that
fails is logged once and its update dropped; a sink that hangs only holds its own sender thread,
never the training loop nor the other sinks. Only global rank 0 reports unless asked otherwise (``env.global_rank``).

Several sinks can be fed at once (:func:`default_sinks`): a status sink, which needs only the
latest values, and a history sink (MLflow), which must see every epoch. For history sinks the
reporter also keeps, at each epoch boundary, a copy of the metrics as they stood (a bounded queue:
the oldest go first if the sender cannot keep up with :data:`HISTORY_LIMIT` epochs) and hands each
one over once. An epoch boundary is a ``report()`` naming an ``epoch`` different from the last one
recorded, so pass an epoch's metrics in the call that names it: ``report(epoch=3,
total_epochs=10, metrics={"loss": ..., "accuracy": ...})`` after the third epoch. Step-level
reports in between may carry ``epoch`` too; they cost nothing extra.

Meaning of the arguments, which progress and the ETA are computed from:

* ``step`` / ``total_steps`` count optimizer steps over the whole run (not within an epoch);
  when both are known they decide the progress.
* ``epoch`` / ``total_epochs`` otherwise: ``epoch`` is the number of epochs completed, so
  ``report(epoch=3, total_epochs=10)`` after the third epoch is 30 %.
* Arguments left out keep their previous values; ``metrics`` are merged by name, the latest
  value of each kept.
* The ETA extrapolates the rate of progress since the first report of this process, so a run
  resumed at 60 % does not count the first 60 % as done in no time.

Module-level functions use one reporter per process, built on first use from the environment
(:func:`default_sinks`); :func:`configure` replaces it (tests, custom sinks). At exit it sends
what is pending and closes its sinks (MLflow marks its run finished), waiting at most
:data:`ATEXIT_FLUSH_TIMEOUT_SECONDS`.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from trainyard.runtime import mlflow as mlflow_sink
from trainyard.runtime import trainer_status
from trainyard.runtime.env import global_rank
from trainyard.runtime.snapshots import CheckpointInfo, EpochMetrics, MetricValue, ParamValue, Sink, Snapshot

_logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 1.0
DEFAULT_SEND_TIMEOUT_SECONDS = 5.0
ATEXIT_FLUSH_TIMEOUT_SECONDS = 5.0
HISTORY_LIMIT = 10_000  # epoch boundaries kept for history sinks while the sender catches up
ENV_PROGRESS_URL = "TRAINYARD_PROGRESS_URL"

__all__ = [
    "CheckpointInfo",
    "EpochMetrics",
    "Reporter",
    "Sink",
    "Snapshot",
    "checkpoint_saved",
    "configure",
    "default_sink",
    "default_sinks",
    "estimate_remaining",
    "flush",
    "fraction_done",
    "log_params",
    "report",
]


def fraction_done(
    epoch: int | None, total_epochs: int | None, step: int | None, total_steps: int | None
) -> float | None:
    """Progress in [0, 1]: steps when both are known, else completed epochs, else unknown."""
    if step is not None and total_steps:
        return min(1.0, max(0.0, step / total_steps))
    if epoch is not None and total_epochs:
        return min(1.0, max(0.0, epoch / total_epochs))
    return None


def estimate_remaining(fraction: float | None, baseline: float | None, elapsed_seconds: float) -> int | None:
    """Seconds left at the rate observed since ``baseline`` (the fraction at the first report)."""
    if fraction is None or baseline is None or elapsed_seconds <= 0:
        return None
    if fraction >= 1.0:
        return 0
    gained = fraction - baseline
    if gained <= 0:
        return None
    return max(0, round((1.0 - fraction) * elapsed_seconds / gained))


class _Lane:
    """One sink and the thread that feeds it, so that a slow or hung sink delays only itself."""

    def __init__(self, sink: Sink, history: deque[EpochMetrics] | None) -> None:
        self.sink = sink
        self.history = history  # epoch boundaries not yet handed to this sink; None: it wants none
        self.wake = threading.Event()
        self.sent_version = 0  # the reporter's version last handed to this sink (sent or dropped)
        self.last_send: float | None = None
        self.flush_requested = False
        self.close_requested = False
        self.closed = threading.Event()
        self.thread: threading.Thread | None = None


class Reporter:
    """Holds the latest values and one sender thread per sink; see the module docstring.

    ``clock`` (monotonic) and ``wall`` are injectable so tests drive rate limiting without sleeping;
    with ``start=False`` no thread runs and tests call :meth:`pump` themselves.
    """

    def __init__(
        self,
        sink: Sink | Sequence[Sink] | None,
        *,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        send_timeout: float = DEFAULT_SEND_TIMEOUT_SECONDS,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        start: bool = True,
        history_limit: int = HISTORY_LIMIT,
    ) -> None:
        self.sinks: tuple[Sink, ...] = _as_sinks(sink)
        self.interval = interval
        self.send_timeout = send_timeout
        self.enabled = enabled and bool(self.sinks)
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._sent_cond = threading.Condition()
        self._epoch: int | None = None
        self._total_epochs: int | None = None
        self._step: int | None = None
        self._total_steps: int | None = None
        self._metrics: dict[str, MetricValue] = {}
        self._params: dict[str, ParamValue] = {}
        self._checkpoint: CheckpointInfo | None = None
        self._lanes = tuple(
            _Lane(s, deque(maxlen=history_limit) if getattr(s, "wants_history", False) else None) for s in self.sinks
        )
        # The history sinks' queues, which report() appends to at an epoch boundary.
        self._histories = tuple(lane.history for lane in self._lanes if lane.history is not None)
        self._history_epoch: int | None = None  # the epoch of the last boundary recorded
        self.history_dropped = 0
        self._version = 0  # bumped by every report; each lane compares it with what it sent
        self._baseline: tuple[float, float] | None = None  # (fraction, clock) at the first known progress
        self._warned: set[object] = set()  # what has been logged at warning level once
        self._closed = False
        self.sent = 0
        self.dropped = 0
        if start and self.enabled:
            for lane in self._lanes:
                name = f"trainyard-report-{type(lane.sink).__name__}"
                lane.thread = threading.Thread(target=self._run, args=(lane,), name=name, daemon=True)
                lane.thread.start()

    # -- called by training code: store and return --------------------------------------------

    def report(
        self,
        epoch: int | None = None,
        total_epochs: int | None = None,
        step: int | None = None,
        total_steps: int | None = None,
        metrics: Mapping[str, MetricValue] | None = None,
    ) -> None:
        if not self.enabled:
            return
        try:
            with self._lock:
                if epoch is not None:
                    self._epoch = epoch
                if total_epochs is not None:
                    self._total_epochs = total_epochs
                if step is not None:
                    self._step = step
                if total_steps is not None:
                    self._total_steps = total_steps
                if metrics:
                    self._metrics.update(metrics)
                if epoch is not None and epoch != self._history_epoch and self._histories:
                    self._record_epoch(epoch)
                self._version += 1
        except Exception:  # never let reporting break training (e.g. a non-mapping metrics)
            self._log_failure("arguments", "report() ignored bad arguments", exc_info=True)

    def _record_epoch(self, epoch: int) -> None:
        # Under self._lock, at most once per epoch: the copy is what makes history cost nothing
        # on the step-level calls in between.
        self._history_epoch = epoch
        record = EpochMetrics(epoch=epoch, metrics=dict(self._metrics), time=self._wall())
        for history in self._histories:
            if len(history) == history.maxlen:
                self.history_dropped += 1
            history.append(record)

    def log_params(self, params: Mapping[str, ParamValue]) -> None:
        """Record run parameters (hyperparameters); merged by name, sent with the next update."""
        if not self.enabled:
            return
        try:
            with self._lock:
                self._params.update(params)
                self._version += 1
        except Exception:
            self._log_failure("arguments", "log_params() ignored bad arguments", exc_info=True)

    def checkpoint_saved(self, path: str, epoch: int | None = None) -> None:
        if not self.enabled:
            return
        info = CheckpointInfo(path=str(path), epoch=epoch, time=self._wall())
        with self._lock:
            self._checkpoint = info
            if epoch is not None and (self._epoch is None or epoch > self._epoch):
                self._epoch = epoch
            self._version += 1

    def flush(self, timeout: float = DEFAULT_SEND_TIMEOUT_SECONDS) -> bool:
        """Send what is pending now, ignoring the interval; wait at most ``timeout`` seconds.

        True when everything reported before the call has been handed to every sink (sent or
        dropped). Sends happen on the sender threads, so a hung sink costs only the timeout.
        """
        if not self.enabled:
            return True
        with self._lock:
            target = self._version
        if not self._threaded:
            self.pump(force=True)
            return all(lane.sent_version >= target for lane in self._lanes)
        with self._sent_cond:
            for lane in self._lanes:
                lane.flush_requested = True
                lane.wake.set()
            return self._sent_cond.wait_for(
                lambda: all(lane.sent_version >= target for lane in self._lanes), timeout=timeout
            )

    def close(self, timeout: float = ATEXIT_FLUSH_TIMEOUT_SECONDS) -> None:
        """Flush, then close the sinks that have a ``close`` (each on its sender thread); all within
        ``timeout`` seconds. Once only: later calls and reports do nothing."""
        if self._closed:
            return
        deadline = time.monotonic() + timeout
        self.flush(timeout)
        if self.enabled:
            for lane in self._lanes:
                if lane.thread is None:
                    self._close_lane(lane)
                else:
                    lane.close_requested = True
                    lane.wake.set()
            for lane in self._lanes:
                lane.closed.wait(max(0.0, deadline - time.monotonic()))
        self.enabled = False
        self._closed = True
        for lane in self._lanes:
            lane.wake.set()

    # -- the sender side ------------------------------------------------------------------------

    @property
    def _threaded(self) -> bool:
        return any(lane.thread is not None for lane in self._lanes)

    def snapshot(self, history: deque[EpochMetrics] | None = None) -> Snapshot:
        """The latest values, with the epoch boundaries queued in ``history`` (taken out of it:
        each is handed over once)."""
        now = self._clock()
        with self._lock:
            epoch, total_epochs = self._epoch, self._total_epochs
            step, total_steps = self._step, self._total_steps
            metrics = dict(self._metrics)
            params = dict(self._params)
            checkpoint = self._checkpoint
            epochs: tuple[EpochMetrics, ...] = ()
            if history:
                epochs = tuple(history)
                history.clear()
            fraction = fraction_done(epoch, total_epochs, step, total_steps)
            if fraction is not None and self._baseline is None:
                self._baseline = (fraction, now)
            baseline = self._baseline
        eta = None
        if fraction is not None and baseline is not None:
            eta = estimate_remaining(fraction, baseline[0], now - baseline[1])
        return Snapshot(
            epoch=epoch,
            total_epochs=total_epochs,
            step=step,
            total_steps=total_steps,
            metrics=metrics,
            checkpoint=checkpoint,
            progress_percentage=None if fraction is None else int(fraction * 100),
            estimated_remaining_seconds=eta,
            time=self._wall(),
            params=params,
            epochs=epochs,
        )

    def pump(self, force: bool = False) -> bool:
        """One sender step for every sink: send the latest values to each whose values changed
        and whose interval has passed. True when any was sent to."""
        return any([self._pump(lane, force) for lane in self._lanes])

    def _pump(self, lane: _Lane, force: bool) -> bool:
        version = self._version
        if version == lane.sent_version:
            return False
        now = self._clock()
        if not force and lane.last_send is not None and now - lane.last_send < self.interval:
            return False
        lane.last_send = now
        snapshot = self.snapshot(lane.history)
        try:
            lane.sink.send(snapshot, self.send_timeout)
            sent = True
        except Exception as error:
            sent = False
            self._log_failure(lane, f"{type(lane.sink).__name__}: update dropped: {error!r}")
        with self._sent_cond:
            if sent:
                self.sent += 1
            else:
                self.dropped += 1
            lane.sent_version = version
            self._sent_cond.notify_all()
        return True

    def _next_due(self, lane: _Lane) -> float:
        """Seconds until the lane may send again (0 when it may now)."""
        if lane.last_send is None:
            return 0.0
        return max(0.0, self.interval - (self._clock() - lane.last_send))

    def _run(self, lane: _Lane) -> None:
        while not self._closed:
            lane.wake.wait(self._next_due(lane) if self._version != lane.sent_version else self.interval)
            lane.wake.clear()
            if lane.close_requested:
                self._close_lane(lane)
                return
            force, lane.flush_requested = lane.flush_requested, False
            try:
                self._pump(lane, force)
            except Exception:  # the sender thread must survive anything
                self._log_failure("sender", "progress sender failed", exc_info=True)

    def _close_lane(self, lane: _Lane) -> None:
        try:
            self._pump(lane, force=True)
            close = getattr(lane.sink, "close", None)
            if close is not None:
                close(self.send_timeout)
        except Exception as error:
            self._log_failure(lane, f"{type(lane.sink).__name__}: close failed: {error!r}")
        finally:
            lane.closed.set()

    def _log_failure(self, key: object, message: str, exc_info: bool = False) -> None:
        # Once per sink (or per kind of failure) at warning level: a sink that is down for the
        # whole run must not flood the training log, nor hide another sink's first failure.
        if key in self._warned:
            _logger.debug(message, exc_info=exc_info)
            return
        self._warned.add(key)
        _logger.warning("%s (further failures are logged at debug level)", message, exc_info=exc_info)


def _as_sinks(sink: Sink | Sequence[Sink] | None) -> tuple[Sink, ...]:
    if sink is None:
        return ()
    if isinstance(sink, list | tuple):
        return tuple(s for s in sink if s is not None)
    return (sink,)  # type: ignore[return-value]


# -- the process-wide reporter ----------------------------------------------------------------

_default: Reporter | None = None
_default_lock = threading.Lock()


def default_sink() -> Sink | None:
    """The status sink the environment names, or None.

    trainyard's progress route (``status.trainingProgress`` of a ``kubeflow.org/v1`` job) when
    ``TRAINYARD_PROGRESS_URL`` is set, else Kubeflow Trainer v2's status server when
    ``KUBEFLOW_TRAINER_SERVER_URL`` is set. Never both: an operator injects one of them.
    """
    if os.environ.get(ENV_PROGRESS_URL):
        try:
            # Imported by name, not statically: the progress sink is a separate module that this
            # one must not depend on to import.
            progress: Any = importlib.import_module("trainyard.runtime.progress")
        except ImportError:
            _logger.warning("%s is set but trainyard.runtime.progress is missing", ENV_PROGRESS_URL)
        else:
            sink: Sink | None = progress.ProgressSink.from_environ()
            if sink is not None:
                return sink
    return trainer_status.TrainerStatusSink.from_environ()


def default_sinks() -> list[Sink]:
    """Every sink the environment names: :func:`default_sink`, plus the MLflow sink when
    ``MLFLOW_TRACKING_URI`` is set (``trainyard.runtime.mlflow``)."""
    sinks: list[Sink] = []
    status = default_sink()
    if status is not None:
        sinks.append(status)
    tracking = mlflow_sink.MlflowSink.from_environ()
    if tracking is not None:
        mlflow_sink.exit_on_sigterm()  # so that a stopped pod's run ends KILLED, not RUNNING forever
        sinks.append(tracking)
    return sinks


def configure(
    sink: Sink | Sequence[Sink] | None = None,
    *,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    all_ranks: bool = False,
    start: bool = True,
) -> Reporter:
    """Replace the process-wide reporter (closing the old one). ``sink`` is one sink or a list;
    ``None`` picks :func:`default_sinks`."""
    global _default
    with _default_lock:
        old = _default
        chosen = sink if sink is not None else default_sinks()
        enabled = all_ranks or global_rank() == 0
        _default = Reporter(chosen, interval=interval, enabled=enabled, start=start)
    if old is not None:
        old.close(timeout=0.1)
    return _default


def _reporter() -> Reporter:
    global _default
    with _default_lock:
        if _default is None:
            try:
                sinks = default_sinks() if global_rank() == 0 else []
            except Exception:
                _logger.warning("progress reporting disabled", exc_info=True)
                sinks = []
            _default = Reporter(sinks)
        return _default


def report(
    epoch: int | None = None,
    total_epochs: int | None = None,
    step: int | None = None,
    total_steps: int | None = None,
    metrics: Mapping[str, MetricValue] | None = None,
) -> None:
    """Record progress and metrics; see the module docstring. Returns at once, never raises."""
    try:
        (_default or _reporter()).report(epoch, total_epochs, step, total_steps, metrics)
    except Exception:
        _logger.debug("report() failed", exc_info=True)


def checkpoint_saved(path: str, epoch: int | None = None) -> None:
    """Record that a checkpoint was written; sent with the next update. Never raises."""
    try:
        (_default or _reporter()).checkpoint_saved(path, epoch)
    except Exception:
        _logger.debug("checkpoint_saved() failed", exc_info=True)


def log_params(params: Mapping[str, ParamValue]) -> None:
    """Record run parameters, merged by name; sent to the sinks that keep them (MLflow). Never raises.

    Values are shown with ``str()``, nested mappings flattened to dotted names (``{"optimizer":
    {"lr": 0.1}}`` is ``optimizer.lr = 0.1``). A tracking server keeps a parameter's first value:
    log each name once.
    """
    try:
        (_default or _reporter()).log_params(params)
    except Exception:
        _logger.debug("log_params() failed", exc_info=True)


def flush(timeout: float = DEFAULT_SEND_TIMEOUT_SECONDS) -> bool:
    """Send what is pending now; wait at most ``timeout`` seconds. Never raises."""
    try:
        return _default.flush(timeout) if _default is not None else True
    except Exception:
        _logger.debug("flush() failed", exc_info=True)
        return False


@atexit.register
def _close_at_exit() -> None:
    # Send what is pending and close the sinks (an MLflow run ends), bounded so that a server
    # that is down delays the exit of a finished training by at most this long.
    try:
        if _default is not None:
            _default.close(ATEXIT_FLUSH_TIMEOUT_SECONDS)
    except Exception:
        _logger.debug("closing the reporter failed", exc_info=True)
