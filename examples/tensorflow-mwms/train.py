"""MultiWorkerMirroredStrategy on scikit-learn's digits: a Chief and Workers of a TFJob, one replica each.

TF_CONFIG (from the operator) names every task; the strategy all-reduces gradients across them
(the chief counts as a worker). The loop is a custom one (``strategy.run`` + ``GradientTape``):
Keras 3's ``model.fit`` fails under multi-worker MWMS with TensorFlow 2.21.
"""

from __future__ import annotations

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--steps-per-epoch", type=int, default=20)
    args = parser.parse_args()
    task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {"type": "local", "index": 0})
    me = f"{task['type']}-{task['index']}"
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    replicas = strategy.num_replicas_in_sync
    print(f"{me}: {replicas} replicas in sync", flush=True)

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(
        (x / 16.0).astype("float32"), y.astype("int64"), test_size=0.25, random_state=0, stratify=y
    )
    global_batch = 32 * replicas
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    data = (
        tf.data.Dataset.from_tensor_slices((x_train, y_train))
        .shuffle(len(x_train), seed=0)
        .repeat()
        .batch(global_batch)
        .with_options(options)
    )
    batches = iter(strategy.experimental_distribute_dataset(data))

    with strategy.scope():
        model = tf.keras.Sequential(
            [tf.keras.Input((64,)), tf.keras.layers.Dense(64, activation="relu"), tf.keras.layers.Dense(10)]
        )
        optimizer = tf.keras.optimizers.Adam(0.01)
    loss_of = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    @tf.function
    def train_step(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        def step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                per_example = loss_of(labels, model(features, training=True))
                # by keyword: the second positional parameter is sample_weight, which would scale the loss
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        per_replica = strategy.run(step, args=inputs)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    for epoch in range(args.epochs):
        losses = [float(train_step(next(batches))) for _ in range(args.steps_per_epoch)]
        accuracy = float(np.mean(np.argmax(model(x_test).numpy(), axis=1) == y_test))
        print(f"{me}: epoch {epoch}: loss {np.mean(losses):.4f}, test accuracy {accuracy:.4f}", flush=True)
    print(f"{me}: final test accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
