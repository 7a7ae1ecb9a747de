"""Collective data-parallel PaddlePaddle on the CPU: each Worker of a PaddleJob is one rank.

``python -m paddle.distributed.launch train.py`` in every pod meets the others at PADDLE_MASTER
(worker 0) and starts this script as one rank of the job. The ranks prove they are one world with
an all_reduce, then train a small classifier on their shards of scikit-learn's digits with
``paddle.DataParallel`` (gradients averaged over gloo).
"""

from __future__ import annotations

import argparse

import numpy as np
import paddle
import paddle.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()
    paddle.set_device("cpu")
    dist.init_parallel_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    total = paddle.to_tensor([float(rank + 1)])
    dist.all_reduce(total)
    print(f"rank {rank} of {world}: all_reduce of ranks+1 = {total.item():.0f}", flush=True)

    paddle.seed(0)
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x / 16.0, y, test_size=0.25, random_state=0, stratify=y)
    shard = np.arange(len(x_train)) % world == rank
    xs = paddle.to_tensor(x_train[shard].astype("float32"))
    ys = paddle.to_tensor(y_train[shard].astype("int64"))
    model = paddle.DataParallel(
        paddle.nn.Sequential(paddle.nn.Linear(64, 64), paddle.nn.ReLU(), paddle.nn.Linear(64, 10))
    )
    optimizer = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    loss_fn = paddle.nn.CrossEntropyLoss()
    for epoch in range(args.epochs):
        for start in range(0, len(xs), 64):
            loss = loss_fn(model(xs[start : start + 64]), ys[start : start + 64])
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
        if rank == 0:
            print(f"epoch {epoch}: loss {float(loss):.4f}", flush=True)
    logits = model(paddle.to_tensor(x_test.astype("float32")))
    accuracy = float((logits.argmax(axis=1).numpy() == y_test).mean())
    print(f"rank {rank}: test accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
