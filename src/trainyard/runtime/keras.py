"""A Keras callback that reports ``model.fit``'s progress and metrics through :mod:`trainyard.runtime`.

``model.fit(..., callbacks=[ProgressCallback()])`` reports, through ``reporting.report``:

* at every batch end the global step (``epoch index * steps per epoch + batch + 1``) out of
  ``epochs * steps`` and that batch's logs; the reporter keeps only the latest values and sends
  at most one update a second, so this is cheap;
* at every epoch end the epochs completed out of ``params["epochs"]`` and the epoch's logs
  (``loss``, ``accuracy``, ``val_loss``, ``val_accuracy``, ...).

Only numbers are reported; a NaN or infinite loss goes as the string ``"nan"``/``"inf"`` (JSON has
no such numbers, and a diverged run is worth seeing). With ``checkpoint=`` (a ``ModelCheckpoint``
or the ``filepath`` pattern given to one) the file each epoch names is reported with
``checkpoint_saved`` once this ``fit()`` has written it, wherever the callbacks sit in the list.

Keras is imported only when ``ProgressCallback`` is first used: ``trainyard.runtime`` itself stays
stdlib-only. ``ProgressCallback`` subclasses ``keras.callbacks.Callback`` (Keras 3, or Keras 2 when
that is what ``import keras`` gives); :func:`callback_class` builds the same class on another base,
e.g. ``tf_keras.callbacks.Callback`` for TensorFlow's legacy Keras.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainyard.runtime import lazy, reporting
from trainyard.runtime.snapshots import MetricValue

__all__ = ["ProgressCallback", "callback_class", "numeric_metrics"]


def numeric_metrics(logs: Mapping[str, Any] | None, skip: frozenset[str] = frozenset()) -> dict[str, MetricValue]:
    """The numbers in ``logs`` (Python or NumPy scalars, 0-d tensors), non-finite ones as strings."""
    metrics: dict[str, MetricValue] = {}
    for name, value in (logs or {}).items():
        if name in skip or isinstance(value, bool | str) or not hasattr(value, "__float__"):
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):  # a tensor with more than one element, for one
            continue
        metrics[str(name)] = number if math.isfinite(number) else str(number)
    return metrics


def callback_class(base: type) -> type:
    """A progress callback class deriving from ``base`` (a Keras ``Callback`` class)."""

    class ProgressCallback(base):  # type: ignore[misc]
        """Reports epochs, steps and logs of ``model.fit``; see :mod:`trainyard.runtime.keras`."""

        def __init__(self, checkpoint: Any = None) -> None:
            super().__init__()
            pattern = getattr(checkpoint, "filepath", checkpoint)
            self._checkpoint_pattern = None if pattern is None else os.fspath(pattern)
            self._reported_files: dict[str, int] = {}  # path -> mtime_ns already reported
            self._epoch_logs: tuple[int, dict[str, Any]] | None = None  # (epoch index, logs) of the last epoch
            self._current_epoch = 0
            self._train_began_ns = 0

        # -- what model.fit tells us ----------------------------------------------------------

        def _sizes(self) -> tuple[int | None, int | None]:
            params = getattr(self, "params", None) or {}
            epochs, steps = params.get("epochs"), params.get("steps")
            return (epochs if isinstance(epochs, int) else None, steps if isinstance(steps, int) else None)

        def on_train_begin(self, logs: Mapping[str, Any] | None = None) -> None:
            self._train_began_ns = time.time_ns()
            self._epoch_logs = None  # a callback used for a second fit() starts over

        def on_train_batch_end(self, batch: int, logs: Mapping[str, Any] | None = None) -> None:
            epochs, steps = self._sizes()
            epoch_index = self._current_epoch
            step = None if steps is None else epoch_index * steps + batch + 1
            total_steps = None if steps is None or epochs is None else epochs * steps
            reporting.report(step=step, total_steps=total_steps, total_epochs=epochs, metrics=numeric_metrics(logs))

        def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
            self._current_epoch = epoch
            self._check_checkpoint()  # a ModelCheckpoint after us in the list wrote the last epoch's by now

        def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
            epochs, steps = self._sizes()
            reporting.report(
                epoch=epoch + 1,
                total_epochs=epochs,
                step=None if steps is None else (epoch + 1) * steps,
                total_steps=None if steps is None or epochs is None else epochs * steps,
                metrics=numeric_metrics(logs),
            )
            self._epoch_logs = (epoch, dict(logs or {}))
            self._check_checkpoint()

        def on_train_end(self, logs: Mapping[str, Any] | None = None) -> None:
            self._check_checkpoint()
            reporting.flush(timeout=1.0)  # the final epoch is worth a short wait; never longer

        # -- checkpoints ------------------------------------------------------------------------

        def _check_checkpoint(self) -> None:
            """Report the last epoch's checkpoint file when it exists and is new (``save_best_only``
            skips epochs; a rewritten file is reported again)."""
            if self._checkpoint_pattern is None or self._epoch_logs is None:
                return
            epoch, logs = self._epoch_logs
            try:
                # Keras' ModelCheckpoint names files the same way: 1-based epoch, the epoch's logs.
                path = self._checkpoint_pattern.format(epoch=epoch + 1, **logs)
                mtime = Path(path).stat().st_mtime_ns
            except (OSError, KeyError, IndexError, ValueError):
                return
            # A file older than this fit() is a previous run's (the slack covers coarse file times).
            if mtime < self._train_began_ns - 1_000_000_000 or self._reported_files.get(path) == mtime:
                return
            self._reported_files[path] = mtime
            reporting.checkpoint_saved(str(Path(path).absolute()), epoch=epoch + 1)

    return ProgressCallback


ProgressCallback: Any  # built by __getattr__ below; declared for `from ... import` and type checkers
# Built on first use so that importing this module (or trainyard.runtime) never imports Keras.
__getattr__ = lazy.class_getattr("keras", "callbacks.Callback", callback_class, __name__)
