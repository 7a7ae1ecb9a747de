"""ParameterServerStrategy on scikit-learn's digits: every task of a TFJob runs this file, one role each.

The task comes from ``TF_CONFIG`` (set by the operator):

* ``ps`` and ``worker`` start a TensorFlow server and serve forever (``server.join()``), as
  ParameterServerStrategy wants: they never exit, so the job is done when the chief is, and
  ``cleanPodPolicy: Running`` stops them then;
* ``chief`` is the coordinator: it builds the model on the parameter servers, schedules training
  steps on the workers (``ClusterCoordinator``), saves the weights after every epoch into the
  checkpoint directory and exits 0 with the final test accuracy;
* ``evaluator`` evaluates each checkpoint the chief saves (a side-car evaluator), writes what it
  found beside it and exits after the last one; the chief prints that result too.

The checkpoint directory must be one that the chief and the evaluator both see: locally a
``hostPath`` volume (every pod runs on this machine); on a cluster a ReadWriteMany volume (or a
bucket path such as ``gs://...``, which TensorFlow writes to directly).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="ParameterServerStrategy training on digits")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--checkpoint-dir", type=Path, default=Path("/checkpoints"))
    parser.add_argument("--evaluator-timeout", type=float, default=120.0, help="seconds to wait for a checkpoint")
    return parser.parse_args()


def training_cluster(config: dict[str, Any]) -> tf.train.ClusterSpec:
    # The operator lists the evaluator in the cluster (as upstream does); it is no part of the
    # training cluster, and the coordinator would otherwise try to connect to it.
    return tf.train.ClusterSpec({job: tasks for job, tasks in config["cluster"].items() if job != "evaluator"})


def load_data() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        (x / 16.0).astype("float32"), y.astype("int64"), test_size=0.25, random_state=0, stratify=y
    )
    return x_train, y_train, x_test, y_test


def build_model() -> tf.keras.Model:
    return tf.keras.Sequential(
        [tf.keras.Input((64,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(10)]
    )


def accuracy(model: tf.keras.Model, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(model(x).numpy(), axis=1) == y))


def serve(config: dict[str, Any]) -> None:
    task = config["task"]
    server = tf.distribute.Server(
        training_cluster(config), job_name=task["type"], task_index=task["index"], protocol="grpc", start=True
    )
    print(f"{task['type']}-{task['index']}: serving {server.target}", flush=True)
    server.join()


def coordinate(config: dict[str, Any], args: argparse.Namespace) -> None:
    cluster = training_cluster(config)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster, task_type="chief", task_id=0, rpc_layer="grpc"
    )
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    workers, ps = cluster.num_tasks("worker"), cluster.num_tasks("ps")
    print(f"chief: coordinating {workers} worker(s) and {ps} parameter server(s)", flush=True)

    x_train, y_train, x_test, y_test = load_data()

    def dataset_fn() -> tf.data.Dataset:
        data = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        return data.shuffle(len(x_train), seed=0).repeat().batch(args.batch_size)

    with strategy.scope():
        model = build_model()
        optimizer = tf.keras.optimizers.Adam(0.01)
    loss_of = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    batches = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(iterator: Any) -> tf.Tensor:
        def step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_of(labels, model(features, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        features, labels = next(iterator)
        return strategy.run(step, args=(features, labels))

    checkpoints = args.checkpoint_dir
    checkpoints.mkdir(parents=True, exist_ok=True)
    for old in checkpoints.glob("*"):
        old.unlink()  # a previous run's files would pass for this run's
    has_evaluator = "evaluator" in config["cluster"]
    for epoch in range(args.epochs):
        losses = [coordinator.schedule(train_step, args=(batches,)) for _ in range(args.steps_per_epoch)]
        coordinator.join()
        loss = float(np.mean([result.fetch() for result in losses]))
        print(f"chief: epoch {epoch}: loss {loss:.4f}, test accuracy {accuracy(model, x_test, y_test):.4f}", flush=True)
        # Written under another name and renamed, so the evaluator never reads a half-written file.
        partial = checkpoints / f"partial-{epoch}.weights.h5"
        model.save_weights(partial)
        partial.rename(checkpoints / f"ckpt-{epoch}.weights.h5")
    (checkpoints / "final.json").write_text(json.dumps({"epoch": args.epochs - 1}))
    print(f"chief: final test accuracy {accuracy(model, x_test, y_test):.4f}", flush=True)
    if has_evaluator:
        report = wait_for(checkpoints / f"eval-{args.epochs - 1}.json", args.evaluator_timeout)
        found, epoch = report["accuracy"], report["epoch"]
        print(f"chief: the evaluator found test accuracy {found:.4f} at epoch {epoch}", flush=True)


def wait_for(path: Path, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"{path} did not appear within {timeout:.0f} s")
        time.sleep(0.5)
    return dict(json.loads(path.read_text()))


def evaluate(args: argparse.Namespace) -> None:
    # Only files written after this task started are this run's: the chief clears older ones at
    # its start, possibly after this task first looked.
    started = time.time() - 1
    model = build_model()
    _, _, x_test, y_test = load_data()
    checkpoints, done = args.checkpoint_dir, -1
    deadline = time.monotonic() + args.evaluator_timeout
    print(f"evaluator: watching {checkpoints} for checkpoints", flush=True)
    while True:
        fresh = sorted(
            (int(p.name.split(".")[0].removeprefix("ckpt-")), p)
            for p in checkpoints.glob("ckpt-*.weights.h5")
            if p.stat().st_mtime >= started
        )
        for epoch, path in fresh:
            if epoch <= done:
                continue
            model.load_weights(path)
            found = accuracy(model, x_test, y_test)
            print(f"evaluator: checkpoint of epoch {epoch}: test accuracy {found:.4f}", flush=True)
            (checkpoints / f"eval-{epoch}.json").write_text(json.dumps({"epoch": epoch, "accuracy": found}))
            done, deadline = epoch, time.monotonic() + args.evaluator_timeout
        final = checkpoints / "final.json"
        if final.exists() and final.stat().st_mtime >= started and json.loads(final.read_text())["epoch"] <= done:
            print(f"evaluator: evaluated the final checkpoint (epoch {done})", flush=True)
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"evaluator: no new checkpoint in {checkpoints} for {args.evaluator_timeout:.0f} s")
        time.sleep(0.5)


def main() -> None:
    args = parse_args()
    config = json.loads(os.environ["TF_CONFIG"])
    role = config["task"]["type"]
    if role in ("ps", "worker"):
        serve(config)
    elif role == "chief":
        coordinate(config, args)
    elif role == "evaluator":
        evaluate(args)
    else:
        raise SystemExit(f"unexpected task type {role!r}: this job needs a chief, ps, worker and an evaluator")


if __name__ == "__main__":
    main()
