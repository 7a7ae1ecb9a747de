"""mpi4py on every rank: one allreduce, then data-parallel training on scikit-learn's digits.

Each rank says who and where it is (its worker pod's hostname) and the sum of every rank's
``rank + 1``; then each trains a softmax regression on its own shard of the training set, the
gradients summed over the ranks with ``Allreduce`` on every step, so all ranks hold the same
weights. Rank 0 reports the test accuracy. Run it with ``mpirun -n N python train.py``.
"""

from __future__ import annotations

import argparse
import socket

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1.0)
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    total = comm.allreduce(rank + 1, op=MPI.SUM)
    print(f"rank {rank}/{size} on {socket.gethostname()}: allreduce(rank+1) = {total}", flush=True)
    assert total == size * (size + 1) // 2

    digits = load_digits()
    x = digits.data / 16.0
    x_train, x_test, y_train, y_test = train_test_split(x, digits.target, test_size=0.25, random_state=0)
    shard_x, shard_y = x_train[rank::size], y_train[rank::size]
    onehot = np.eye(10)[shard_y]
    weights = np.zeros((x.shape[1], 10))
    bias = np.zeros(10)
    count = comm.allreduce(len(shard_x), op=MPI.SUM)
    for _ in range(args.steps):
        error = softmax(shard_x @ weights + bias) - onehot
        grads = np.concatenate([(shard_x.T @ error).ravel(), error.sum(axis=0)])
        summed = np.empty_like(grads)
        comm.Allreduce(grads, summed, op=MPI.SUM)
        weights -= args.lr * summed[: weights.size].reshape(weights.shape) / count
        bias -= args.lr * summed[weights.size :] / count
    accuracy = float((np.argmax(x_test @ weights + bias, axis=1) == y_test).mean())
    # Every rank must hold the same model: compare a checksum of the weights across ranks.
    checksums = comm.allgather(round(float(weights.sum()), 9))
    if rank == 0:
        print(f"trained on {size} ranks ({count} samples), weights identical: {len(set(checksums)) == 1}", flush=True)
        print(f"test accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
