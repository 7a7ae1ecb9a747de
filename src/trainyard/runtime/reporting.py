"""Progress and metric reporting from inside training code: cheap to call every step, never in the way.

``report()`` and ``checkpoint_saved()`` only store the latest values in memory under a tiny lock;
a daemon thread sends at most one update per interval to a :class:`Sink`. A sink that fails is
logged once and its update dropped; a sink that hangs only holds the sender thread, never the
training loop. Only global rank 0 reports unless asked otherwise (``env.global_rank``).

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
(:func:`default_sink`); :func:`configure` replaces it (tests, custom sinks).
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping

from trainyard.runtime import progress, trainer_status
from trainyard.runtime.env import global_rank
from trainyard.runtime.snapshots import CheckpointInfo, MetricValue, Sink, Snapshot

_logger = logging.getLogger(__name__)

DEFAULT_INTERVAL_SECONDS = 1.0
DEFAULT_SEND_TIMEOUT_SECONDS = 5.0
ATEXIT_FLUSH_TIMEOUT_SECONDS = 2.0

__all__ = [
    "CheckpointInfo",
    "Reporter",
    "Sink",
    "Snapshot",
    "checkpoint_saved",
    "configure",
    "default_sink",
    "estimate_remaining",
    "flush",
    "fraction_done",
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


class Reporter:
    """Holds the latest values and a sender thread; see the module docstring.

    ``clock`` (monotonic) and ``wall`` are injectable so tests drive rate limiting without sleeping;
    with ``start=False`` no thread runs and tests call :meth:`pump` themselves.
    """

    def __init__(
        self,
        sink: Sink | None,
        *,
        interval: float = DEFAULT_INTERVAL_SECONDS,
        send_timeout: float = DEFAULT_SEND_TIMEOUT_SECONDS,
        enabled: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        start: bool = True,
    ) -> None:
        self.sink = sink
        self.interval = interval
        self.send_timeout = send_timeout
        self.enabled = enabled and sink is not None
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._sent_cond = threading.Condition()
        self._epoch: int | None = None
        self._total_epochs: int | None = None
        self._step: int | None = None
        self._total_steps: int | None = None
        self._metrics: dict[str, MetricValue] = {}
        self._checkpoint: CheckpointInfo | None = None
        self._version = 0  # bumped by every report; the sender compares it with what it sent
        self._sent_version = 0  # the version last handed to the sink (sent or dropped)
        self._last_send: float | None = None
        self._baseline: tuple[float, float] | None = None  # (fraction, clock) at the first known progress
        self._failed_once = False
        self._closed = False
        self.sent = 0
        self.dropped = 0
        self._thread: threading.Thread | None = None
        if start and self.enabled:
            self._thread = threading.Thread(target=self._run, name="trainyard-report", daemon=True)
            self._thread.start()

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
                self._version += 1
        except Exception:  # never let reporting break training (e.g. a non-mapping metrics)
            self._log_failure("report() ignored bad arguments", exc_info=True)

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

        True when everything reported before the call has been handed to the sink (sent or
        dropped). The send happens on the sender thread, so a hung sink costs only the timeout.
        """
        if not self.enabled:
            return True
        with self._lock:
            target = self._version
        if self._thread is None:
            self.pump(force=True)
            return self._sent_version >= target
        with self._sent_cond:
            self._flush_requested = True
            self._wake.set()
            return self._sent_cond.wait_for(lambda: self._sent_version >= target, timeout=timeout)

    def close(self, timeout: float = ATEXIT_FLUSH_TIMEOUT_SECONDS) -> None:
        self.flush(timeout)
        self._closed = True
        self._wake.set()

    # -- the sender side ------------------------------------------------------------------------

    _flush_requested = False

    def snapshot(self) -> Snapshot:
        now = self._clock()
        with self._lock:
            epoch, total_epochs = self._epoch, self._total_epochs
            step, total_steps = self._step, self._total_steps
            metrics = dict(self._metrics)
            checkpoint = self._checkpoint
        fraction = fraction_done(epoch, total_epochs, step, total_steps)
        eta = None
        if fraction is not None:
            if self._baseline is None:
                self._baseline = (fraction, now)
            base_fraction, base_time = self._baseline
            eta = estimate_remaining(fraction, base_fraction, now - base_time)
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
        )

    def pump(self, force: bool = False) -> bool:
        """One sender step: send the latest values if they changed and the interval has passed."""
        version = self._version
        if version == self._sent_version:
            return False
        now = self._clock()
        if not force and self._last_send is not None and now - self._last_send < self.interval:
            return False
        self._last_send = now
        snapshot = self.snapshot()
        try:
            assert self.sink is not None
            self.sink.send(snapshot, self.send_timeout)
            self.sent += 1
        except Exception as error:
            self.dropped += 1
            self._log_failure(f"progress update dropped: {error!r}")
        with self._sent_cond:
            self._sent_version = version
            self._sent_cond.notify_all()
        return True

    def next_due(self) -> float:
        """Seconds until the sender may send again (0 when it may now)."""
        if self._last_send is None:
            return 0.0
        return max(0.0, self.interval - (self._clock() - self._last_send))

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(self.next_due() if self._version != self._sent_version else self.interval)
            self._wake.clear()
            force, self._flush_requested = self._flush_requested, False
            try:
                self.pump(force=force)
            except Exception:  # the sender thread must survive anything
                self._log_failure("progress sender failed", exc_info=True)

    def _log_failure(self, message: str, exc_info: bool = False) -> None:
        if self._failed_once:
            _logger.debug(message, exc_info=exc_info)
            return
        self._failed_once = True
        _logger.warning("%s (further failures are logged at debug level)", message, exc_info=exc_info)


# -- the process-wide reporter ----------------------------------------------------------------

_default: Reporter | None = None
_default_lock = threading.Lock()


def default_sink() -> Sink | None:
    """The sink the environment names: trainyard's progress route, else Kubeflow Trainer's status server."""
    return progress.ProgressSink.from_environ() or trainer_status.TrainerStatusSink.from_environ()


def configure(
    sink: Sink | None = None,
    *,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    all_ranks: bool = False,
    start: bool = True,
) -> Reporter:
    """Replace the process-wide reporter. ``sink=None`` picks :func:`default_sink`."""
    global _default
    with _default_lock:
        old = _default
        chosen = sink if sink is not None else default_sink()
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
                sink = default_sink() if global_rank() == 0 else None
            except Exception:
                _logger.warning("progress reporting disabled", exc_info=True)
                sink = None
            _default = Reporter(sink)
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


def flush(timeout: float = DEFAULT_SEND_TIMEOUT_SECONDS) -> bool:
    """Send what is pending now; wait at most ``timeout`` seconds. Never raises."""
    try:
        return _default.flush(timeout) if _default is not None else True
    except Exception:
        _logger.debug("flush() failed", exc_info=True)
        return False


@atexit.register
def _flush_at_exit() -> None:
    flush(ATEXIT_FLUSH_TIMEOUT_SECONDS)
