"""A Hugging Face ``transformers.Trainer`` callback that reports progress, metrics and checkpoints
through :mod:`trainyard.runtime`, and where to resume from.

``Trainer(..., callbacks=[ProgressCallback()])`` reports, on the world's process zero only:

* at every optimizer step and epoch end: ``state.global_step`` of ``state.max_steps`` and the
  epochs completed (``state.epoch`` counts fractions; the whole epochs done are reported) of the
  run's epochs (``state.num_train_epochs``, else ``args.num_train_epochs`` rounded up);
* every ``on_log``: the numbers logged (``loss``, ``learning_rate``, ``grad_norm``, ``eval_*`` ...,
  not ``epoch``, which is progress). Evaluation metrics carry an ``eval_`` prefix while
  ``kubectl``'s ACCURACY column and ``runPolicy.earlyStopping``'s default metric read ``accuracy``,
  so ``eval_accuracy`` is also reported as ``accuracy`` (``aliases`` changes or turns that off);
* every ``on_save``: the ``checkpoint-<step>`` directory the Trainer just wrote, with
  ``checkpoint_saved``, so that it becomes the job's ``lastCheckpoint`` and, after a restart,
  ``TRAINYARD_RESUME_FROM``; :func:`resume_checkpoint` reads that back for
  ``trainer.train(resume_from_checkpoint=...)``.

``transformers`` is imported only when ``ProgressCallback`` is first used: ``trainyard.runtime``
itself stays stdlib-only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainyard.runtime import lazy, reporting
from trainyard.runtime.keras import numeric_metrics
from trainyard.runtime.snapshots import MetricValue

__all__ = ["DEFAULT_ALIASES", "ProgressCallback", "callback_class", "resume_checkpoint"]

ENV_RESUME_FROM = "TRAINYARD_RESUME_FROM"  # injected by the operator (contract of issue #18, section 4)
DEFAULT_ALIASES: Mapping[str, str] = {"eval_accuracy": "accuracy"}
CHECKPOINT_PREFIX = "checkpoint"  # transformers' PREFIX_CHECKPOINT_DIR: the Trainer saves checkpoint-<global step>
_NOT_METRICS = frozenset({"epoch"})
_EPSILON = 1e-6  # state.epoch is a float sum of step fractions: 2.9999999 at an epoch's end means 3


def completed_epochs(state: Any) -> int | None:
    epoch = getattr(state, "epoch", None)
    return None if epoch is None else math.floor(epoch + _EPSILON)


def total_epochs(args: Any, state: Any) -> int | None:
    planned = getattr(state, "num_train_epochs", 0) or getattr(args, "num_train_epochs", 0)
    return math.ceil(planned - _EPSILON) if planned and planned > 0 else None


def resume_checkpoint(environ: Mapping[str, str] | None = None) -> str | None:
    """The checkpoint directory ``TRAINYARD_RESUME_FROM`` names when it exists, else None: the value
    for ``trainer.train(resume_from_checkpoint=...)`` (None starts from scratch)."""
    named = (os.environ if environ is None else environ).get(ENV_RESUME_FROM, "").strip()
    return named if named and Path(named).is_dir() else None


def callback_class(base: type) -> type:
    """A progress callback class deriving from ``base`` (``transformers.TrainerCallback``)."""

    class ProgressCallback(base):  # type: ignore[misc]
        """Reports a Trainer's steps, epochs, logs and checkpoints; see :mod:`trainyard.runtime.hf`."""

        def __init__(self, aliases: Mapping[str, str] = DEFAULT_ALIASES) -> None:
            super().__init__()
            self.aliases = dict(aliases)

        def _progress(self, args: Any, state: Any, metrics: Mapping[str, MetricValue] | None = None) -> None:
            reporting.report(
                epoch=completed_epochs(state),
                total_epochs=total_epochs(args, state),
                step=state.global_step,
                total_steps=state.max_steps or None,
                metrics=metrics,
            )

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                self._progress(args, state)

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                self._progress(args, state)

        def on_log(
            self, args: Any, state: Any, control: Any, logs: Mapping[str, Any] | None = None, **kwargs: Any
        ) -> None:
            if not state.is_world_process_zero:
                return
            metrics = numeric_metrics(logs, skip=_NOT_METRICS)
            for name, alias in self.aliases.items():
                if name in metrics:
                    metrics[alias] = metrics[name]
            if metrics:
                # With the progress they belong to: an epoch's evaluation is logged after on_epoch_end.
                self._progress(args, state, metrics)

        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if not state.is_world_process_zero:
                return
            # Where Trainer._save_checkpoint wrote; a hyperparameter search's trial directories are
            # elsewhere and are not reported (no such directory here).
            path = Path(args.output_dir) / f"{CHECKPOINT_PREFIX}-{state.global_step}"
            if path.is_dir():
                reporting.checkpoint_saved(str(path.absolute()), epoch=completed_epochs(state))

        def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.is_world_process_zero:
                reporting.flush(timeout=1.0)  # the final values are worth a short wait; never longer

    return ProgressCallback


ProgressCallback: Any  # built by __getattr__ below; declared for `from ... import` and type checkers
# Built on first use so that importing this module (or trainyard.runtime) never imports transformers.
__getattr__ = lazy.class_getattr("transformers", "TrainerCallback", callback_class, __name__)
