"""The framework callbacks of ``trainyard.runtime`` in their real frameworks.

Each test runs a tiny real training (Keras 3 ``model.fit`` in the tensorflow environment, a
``transformers.Trainer`` on a torch model in trainyard's own venv) in a subprocess, with the
runtime's real ``Reporter`` sending to a sink that appends every snapshot to a JSON-lines file.
The reporter runs without its sender thread and a callback placed after ours pumps it at each
epoch end (and at the first batch of each epoch), so every test sees exactly the values reported
at those points instead of whatever one rate-limited send picked up.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from framework_envs import path as env_path

pytestmark = pytest.mark.e2e

# Shared by both scripts: a sink recording what the reporter sends, labelled by the pump's caller.
RECORDER = """
import dataclasses, json, sys
from trainyard.runtime import reporting

class Recorder:
    label = "start"
    def __init__(self, path):
        self.path = path
    def send(self, snapshot, timeout):
        with open(self.path, "a") as out:
            out.write(json.dumps({"label": self.label, **dataclasses.asdict(snapshot)}) + "\\n")

recorder = Recorder(sys.argv[1])
reporter = reporting.configure(sink=recorder, start=False)

def pump(label):
    recorder.label = label
    reporter.pump(force=True)
"""

KERAS_SCRIPT = """
import os
import numpy as np
import keras
from trainyard.runtime.keras import ProgressCallback

class Pump(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            pump(f"batch0-of-epoch{self._epoch}")
    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
    def on_epoch_end(self, epoch, logs=None):
        pump(f"epoch{epoch + 1}")

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 4)).astype("float32")
y = (x.sum(axis=1) > 0).astype("int32")
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, activation="softmax")])
model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
saver = keras.callbacks.ModelCheckpoint(
    os.path.join(sys.argv[2], "ckpt-{epoch:02d}.weights.h5"), save_weights_only=True)
# Ours first: the checkpoint ModelCheckpoint writes after us is reported when the next epoch begins.
model.fit(x, y, epochs=3, batch_size=16, validation_data=(x, y), verbose=0,
          callbacks=[ProgressCallback(checkpoint=saver), saver, Pump()])
print("keras", keras.__version__)
"""


def run_script(python: Path, script: str, tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    (tmp_path / "train.py").write_text(RECORDER + textwrap.dedent(script))
    records = tmp_path / "records.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "TF_CPP_MIN_LOG_LEVEL": "3", "RANK": "0"}
    for name in ("TRAINYARD_PROGRESS_URL", "KUBEFLOW_TRAINER_SERVER_URL", "MLFLOW_TRACKING_URI"):
        env.pop(name, None)  # the recorder is the only sink
    done = subprocess.run(
        [str(python), str(tmp_path / "train.py"), str(records), *args],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    return [json.loads(line) for line in records.read_text().splitlines()]


def by_label(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {record["label"]: record for record in records}


def test_keras_callback_reports_epochs_steps_logs_and_checkpoints(tmp_path: Path) -> None:
    python = env_path("tensorflow") / "bin" / "python"
    records = run_script(python, KERAS_SCRIPT, tmp_path, str(tmp_path))
    got = by_label(records)
    # 64 samples in batches of 16: 4 steps an epoch, 12 in all.
    assert got["batch0-of-epoch1"]["step"] == 5
    assert got["batch0-of-epoch1"]["total_steps"] == 12
    assert set(got["batch0-of-epoch1"]["metrics"]) >= {"loss", "accuracy"}
    for epoch in (1, 2, 3):
        record = got[f"epoch{epoch}"]
        assert (record["epoch"], record["total_epochs"]) == (epoch, 3)
        assert (record["step"], record["total_steps"]) == (4 * epoch, 12)
        assert record["progress_percentage"] == int(100 * epoch / 3)
        metrics = record["metrics"]
        assert set(metrics) >= {"loss", "accuracy", "val_loss", "val_accuracy"}
        assert all(isinstance(value, float) for value in metrics.values()), metrics
    # The pump at an epoch's end ran before that epoch's file was seen; the next epoch's start saw it.
    assert got["epoch1"]["checkpoint"] is None
    assert got["epoch2"]["checkpoint"]["path"] == str(tmp_path / "ckpt-01.weights.h5")
    assert got["epoch2"]["checkpoint"]["epoch"] == 1
    # on_train_end found the last one and flushed it (the last record, whatever its label).
    assert records[-1]["checkpoint"]["path"] == str(tmp_path / "ckpt-03.weights.h5")
    assert records[-1]["checkpoint"]["epoch"] == 3
    assert records[-1]["progress_percentage"] == 100
