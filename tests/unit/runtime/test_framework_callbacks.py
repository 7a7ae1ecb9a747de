"""The framework callbacks' own logic, on a plain base class and the real ``Reporter`` (no thread).

Their runs in real Keras and transformers are tests/e2e/test_runtime_callbacks.py; here the
decisions those runs cannot all reach cheaply: which log values count, epoch rounding, which
checkpoint files are new, other ranks, and that importing the modules imports no framework.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from trainyard.runtime import hf, keras, reporting
from trainyard.runtime.reporting import Reporter, Snapshot


class ListSink:
    def __init__(self) -> None:
        self.sent: list[Snapshot] = []

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self.sent.append(snapshot)


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def reporter(monkeypatch: pytest.MonkeyPatch, sink: ListSink) -> Reporter:
    monkeypatch.setattr(reporting, "_default", None)  # restored after the test
    monkeypatch.setenv("RANK", "0")
    return reporting.configure(sink, start=False)


def latest(reporter: Reporter, sink: ListSink) -> Snapshot:
    reporter.pump(force=True)
    return sink.sent[-1]


def test_importing_the_callback_modules_imports_no_framework() -> None:
    code = (
        "import sys, trainyard.runtime, trainyard.runtime.keras, trainyard.runtime.hf\n"
        "print(sorted(m for m in ('keras', 'tensorflow', 'transformers', 'torch') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"
    with pytest.raises(AttributeError):
        _ = keras.NoSuchThing


def test_numeric_metrics_keeps_numbers_and_names_non_finite_ones() -> None:
    logs = {
        "loss": 0.5,
        "accuracy": np.float32(0.25),
        "count": 3,
        "flag": True,
        "name": "x",
        "diverged": math.nan,
        "huge": -math.inf,
        "vector": np.array([1.0, 2.0]),
        "epoch": 2.0,
    }
    assert keras.numeric_metrics(logs, skip=frozenset({"epoch"})) == {
        "loss": 0.5,
        "accuracy": 0.25,
        "count": 3.0,
        "diverged": "nan",
        "huge": "-inf",
    }
    assert keras.numeric_metrics(None) == {}


def keras_callback(checkpoint: Any = None, epochs: int = 3, steps: int | None = 4) -> Any:
    callback = keras.callback_class(object)(checkpoint=checkpoint)
    callback.params = {"epochs": epochs, "steps": steps, "verbose": 0}
    return callback


def test_keras_steps_and_epochs(reporter: Reporter, sink: ListSink) -> None:
    callback = keras_callback()
    callback.on_train_begin()
    callback.on_epoch_begin(1)
    callback.on_train_batch_end(2, {"loss": 0.7})
    snapshot = latest(reporter, sink)
    assert (snapshot.step, snapshot.total_steps, snapshot.total_epochs) == (7, 12, 3)
    callback.on_epoch_end(1, {"loss": 0.6, "val_loss": 0.8})
    snapshot = latest(reporter, sink)
    assert (snapshot.epoch, snapshot.step, snapshot.progress_percentage) == (2, 8, 66)
    assert snapshot.metrics == {"loss": 0.6, "val_loss": 0.8}


def test_keras_unknown_steps_per_epoch_reports_epochs(reporter: Reporter, sink: ListSink) -> None:
    callback = keras_callback(epochs=4, steps=None)
    callback.on_epoch_begin(0)
    callback.on_train_batch_end(0, {"loss": 1.0})
    callback.on_epoch_end(0, {"loss": 1.0})
    snapshot = latest(reporter, sink)
    assert (snapshot.epoch, snapshot.total_epochs, snapshot.step, snapshot.progress_percentage) == (1, 4, None, 25)


def test_keras_checkpoint_files_new_to_this_fit(reporter: Reporter, sink: ListSink, tmp_path: Path) -> None:
    stale = tmp_path / "best.keras"
    stale.write_bytes(b"a previous run's")
    os.utime(stale, (1_000_000, 1_000_000))
    callback = keras_callback(checkpoint=SimpleNamespace(filepath=str(tmp_path / "best.keras")))
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    callback.on_epoch_end(0, {"loss": 1.0})
    assert latest(reporter, sink).checkpoint is None  # the stale file is not this run's
    stale.write_bytes(b"epoch 1")  # ModelCheckpoint after us in the list
    callback.on_epoch_begin(1)
    first = latest(reporter, sink).checkpoint
    assert first is not None and (first.path, first.epoch) == (str(stale), 1)
    callback.on_epoch_end(1, {"loss": 1.1})  # save_best_only: not better, not rewritten
    callback.on_train_end()
    last = latest(reporter, sink).checkpoint
    assert last is not None and last.epoch == 1
    assert all(sent.checkpoint is first for sent in sink.sent[1:])  # reported once, kept since


def test_keras_checkpoint_pattern_with_logs(reporter: Reporter, sink: ListSink, tmp_path: Path) -> None:
    callback = keras_callback(checkpoint=tmp_path / "w-{epoch:02d}-{val_loss:.2f}.weights.h5")
    callback.on_train_begin()
    callback.on_epoch_begin(0)
    (tmp_path / "w-01-0.50.weights.h5").write_bytes(b"w")
    callback.on_epoch_end(0, {"val_loss": 0.5})
    checkpoint = latest(reporter, sink).checkpoint
    assert checkpoint is not None and checkpoint.path == str(tmp_path / "w-01-0.50.weights.h5")
    callback.on_epoch_begin(1)
    callback.on_epoch_end(1, {"loss": 0.5})  # no val_loss to name the file with: nothing, no error
    checkpoint = latest(reporter, sink).checkpoint
    assert checkpoint is not None and checkpoint.epoch == 1


def hf_state(**fields: Any) -> SimpleNamespace:
    base: dict[str, Any] = {
        "epoch": 0.0,
        "global_step": 0,
        "max_steps": 12,
        "num_train_epochs": 3,
        "is_world_process_zero": True,
    }
    return SimpleNamespace(**{**base, **fields})


def test_hf_epochs_from_fractional_state() -> None:
    assert hf.completed_epochs(hf_state(epoch=2.9999999)) == 3
    assert hf.completed_epochs(hf_state(epoch=2.5)) == 2
    assert hf.completed_epochs(hf_state(epoch=None)) is None
    args = SimpleNamespace(num_train_epochs=2.5)
    assert hf.total_epochs(args, hf_state(num_train_epochs=0)) == 3
    assert hf.total_epochs(args, hf_state()) == 3
    assert hf.total_epochs(SimpleNamespace(num_train_epochs=0), hf_state(num_train_epochs=0)) is None


def test_hf_logs_aliases_and_other_ranks(reporter: Reporter, sink: ListSink, tmp_path: Path) -> None:
    callback = hf.callback_class(object)()
    args = SimpleNamespace(output_dir=str(tmp_path), num_train_epochs=3)
    state = hf_state(epoch=1.0, global_step=4)
    callback.on_log(args, state, None, logs={"eval_loss": 0.4, "eval_accuracy": 0.9, "epoch": 1.0})
    callback.on_epoch_end(args, state, None)
    snapshot = latest(reporter, sink)
    assert snapshot.metrics == {"eval_loss": 0.4, "eval_accuracy": 0.9, "accuracy": 0.9}
    assert (snapshot.epoch, snapshot.total_epochs, snapshot.step, snapshot.total_steps) == (1, 3, 4, 12)
    callback.on_save(args, state, None)  # no checkpoint-4 directory: nothing to report
    assert latest(reporter, sink).checkpoint is None
    (tmp_path / "checkpoint-4").mkdir()
    other = hf_state(epoch=1.0, global_step=4, is_world_process_zero=False)
    callback.on_save(args, other, None)
    callback.on_log(args, other, None, logs={"loss": 99.0})
    assert latest(reporter, sink).checkpoint is None
    callback.on_save(args, state, None)
    checkpoint = latest(reporter, sink).checkpoint
    assert checkpoint is not None and (checkpoint.path, checkpoint.epoch) == (str(tmp_path / "checkpoint-4"), 1)
    assert "loss" not in latest(reporter, sink).metrics
    no_alias = hf.callback_class(object)(aliases={})
    no_alias.on_log(args, state, None, logs={"eval_accuracy": 0.1})
    assert latest(reporter, sink).metrics["accuracy"] == 0.9


def test_hf_resume_checkpoint(tmp_path: Path) -> None:
    assert hf.resume_checkpoint({}) is None
    assert hf.resume_checkpoint({"TRAINYARD_RESUME_FROM": str(tmp_path / "gone")}) is None
    assert hf.resume_checkpoint({"TRAINYARD_RESUME_FROM": str(tmp_path)}) == str(tmp_path)
