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
import sys
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
        self.last = snapshot

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


HF_SCRIPT = """
import os
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments
from trainyard.runtime.hf import ProgressCallback, resume_checkpoint

class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
    def forward(self, x, labels=None):
        logits = self.linear(x)
        return {"loss": torch.nn.functional.cross_entropy(logits, labels), "logits": logits}

class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 32
    def __getitem__(self, i):
        x = torch.randn(4, generator=torch.Generator().manual_seed(i))
        return {"x": x, "labels": int(x.sum() > 0)}

def accuracy(prediction):
    return {"accuracy": float((prediction.predictions.argmax(-1) == prediction.label_ids).mean())}

class Pump(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step % 4 == 1:  # the first step of each epoch
            pump(f"step{state.global_step}")
    def on_save(self, args, state, control, **kwargs):
        pump(f"saved{state.global_step}")

def train(epochs, resume):
    args = TrainingArguments(
        output_dir=sys.argv[2], num_train_epochs=epochs, per_device_train_batch_size=8, logging_steps=2,
        eval_strategy="epoch", save_strategy="epoch", report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=Model(), args=args, train_dataset=Data(), eval_dataset=Data(),
                      compute_metrics=accuracy, callbacks=[ProgressCallback(), Pump()])
    trainer.train(resume_from_checkpoint=resume)

torch.manual_seed(0)
assert resume_checkpoint() is None
train(2, None)
# What the operator does after a restart: the last reported checkpoint becomes TRAINYARD_RESUME_FROM.
os.environ["TRAINYARD_RESUME_FROM"] = recorder.last.checkpoint.path
train(3, resume_checkpoint())
"""


def test_hf_trainer_callback_reports_steps_metrics_checkpoints_and_resumes(tmp_path: Path) -> None:
    records = run_script(Path(sys.executable), HF_SCRIPT, tmp_path, str(tmp_path))
    got = by_label(records)
    # 32 samples in batches of 8: 4 steps an epoch, 8 in the first run, 12 in the resumed one.
    assert (got["step1"]["step"], got["step1"]["total_steps"]) == (1, 8)
    assert (got["step1"]["epoch"], got["step1"]["total_epochs"]) == (0, 2)
    for epoch in (1, 2):
        record = got[f"saved{4 * epoch}"]
        assert (record["epoch"], record["total_epochs"], record["step"]) == (epoch, 2, 4 * epoch)
        assert record["progress_percentage"] == 50 * epoch
        assert record["checkpoint"] == {
            "path": str(tmp_path / f"checkpoint-{4 * epoch}"),
            "epoch": epoch,
            "time": record["checkpoint"]["time"],
        }
        metrics = record["metrics"]
        assert {"loss", "learning_rate", "eval_loss", "eval_accuracy", "accuracy"} <= set(metrics)
        assert "epoch" not in metrics
        assert metrics["accuracy"] == metrics["eval_accuracy"]
    # Resumed from checkpoint-8: the third epoch's steps, not a fresh start.
    assert "step1" in got and "step5" in got and "step9" in got
    assert (got["step9"]["step"], got["step9"]["total_steps"]) == (9, 12)
    assert (got["step9"]["epoch"], got["step9"]["total_epochs"]) == (2, 3)
    assert got["saved12"]["checkpoint"]["path"] == str(tmp_path / "checkpoint-12")
    assert (got["saved12"]["epoch"], got["saved12"]["progress_percentage"]) == (3, 100)
    assert [r["label"] for r in records].count("step1") == 1
