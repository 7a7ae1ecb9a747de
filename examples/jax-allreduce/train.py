"""Data-parallel softmax regression on scikit-learn's digits with ``jax.distributed`` on CPU.

Run by a JAXJob: every Worker is one JAX process. The operator's env names the coordinator
(``COORDINATOR_ADDRESS``, a host without a port, and ``COORDINATOR_PORT``), the number of processes
and this one's id. Each process first gathers every process id across the job (a collective that
only completes when every process took part), then trains on its own shard of the training rows:
each step's gradient is computed on the global batch, sharded over one CPU device per process,
so XLA averages the shards' gradients with a cross-process all-reduce (gloo).
"""

from __future__ import annotations

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def initialize() -> None:
    address = f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}"
    jax.distributed.initialize(
        coordinator_address=address,
        num_processes=int(os.environ["NUM_PROCESSES"]),
        process_id=int(os.environ["PROCESS_ID"]),
    )


def loss(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> jax.Array:
    logits = x @ params["w"] + params["b"]
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(y, 10), axis=-1))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.5)
    args = parser.parse_args()

    initialize()
    rank, world = jax.process_index(), jax.process_count()
    print(f"process {rank}/{world}: {jax.device_count()} devices in the job, {jax.local_device_count()} here")

    # The collective: every process contributes its id; the result lists all of them or never comes.
    ids = multihost_utils.process_allgather(np.array([rank], dtype=np.int32)).reshape(-1)
    print(f"process {rank}: gathered process ids {ids.tolist()}")

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data / 16.0, digits.target, test_size=0.25, random_state=0, stratify=digits.target
    )
    # Equal shards (the global batch must split evenly over the devices): this process's rows.
    per_process = len(x_train) // world
    rows = slice(rank * per_process, (rank + 1) * per_process)
    x_local = x_train[rows].astype(np.float32)
    y_local = y_train[rows].astype(np.int32)
    print(f"process {rank}: training shard of {len(x_local)} rows")

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    batch = NamedSharding(mesh, PartitionSpec("data"))
    replicated = NamedSharding(mesh, PartitionSpec())
    x = jax.make_array_from_process_local_data(batch, x_local)
    y = jax.make_array_from_process_local_data(batch, y_local)

    params = {"w": jnp.zeros((64, 10), jnp.float32), "b": jnp.zeros((10,), jnp.float32)}
    params = jax.device_put(params, replicated)

    @jax.jit
    def step(params: dict[str, jax.Array], x: jax.Array, y: jax.Array) -> tuple[dict[str, jax.Array], jax.Array]:
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return jax.tree.map(lambda p, g: p - args.lr * g, params, grads), value

    for i in range(args.steps):
        params, value = step(params, x, y)
        if i % 25 == 0 or i == args.steps - 1:
            print(f"process {rank}: step {i} global loss {float(value):.4f}")

    # Every process holds the same replicated parameters; each scores the same held-out rows.
    w, b = np.asarray(params["w"]), np.asarray(params["b"])
    accuracy = float(np.mean(np.argmax(x_test @ w + b, axis=1) == y_test))
    print(f"process {rank}: test accuracy {accuracy:.3f} on {len(y_test)} rows after {args.steps} steps")
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
