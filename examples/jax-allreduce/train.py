"""JAX across processes on the CPU: every Worker of a JAXJob joins one distributed runtime.

Each process initialises ``jax.distributed`` from the operator's coordinator env, proves that
every process took part with a cross-process gather, then trains a softmax classifier on its
shard of scikit-learn's digits with gradients averaged across processes (data parallelism).
"""

from __future__ import annotations

import argparse
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    coordinator = f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}"
    world, me = int(os.environ["NUM_PROCESSES"]), int(os.environ["PROCESS_ID"])
    jax.distributed.initialize(coordinator, num_processes=world, process_id=me)
    print(f"process {jax.process_index()} of {jax.process_count()}, coordinator {coordinator}", flush=True)

    # Every process contributes its id; all of them must see the whole list.
    ids = multihost_utils.process_allgather(jnp.array([me]))
    print(f"process {me} gathered ids {sorted(int(i) for i in np.ravel(ids))}", flush=True)

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x / 16.0, y, test_size=0.25, random_state=0, stratify=y)
    shard = np.arange(len(x_train)) % world == me
    xs, ys = jnp.asarray(x_train[shard]), jax.nn.one_hot(y_train[shard], 10)
    params = {"w": jnp.zeros((64, 10)), "b": jnp.zeros(10)}

    def loss(p: dict[str, jax.Array], xb: jax.Array, yb: jax.Array) -> jax.Array:
        logits = xb @ p["w"] + p["b"]
        return -jnp.mean(jnp.sum(yb * jax.nn.log_softmax(logits), axis=1))

    grad = jax.jit(jax.value_and_grad(loss))
    for step in range(args.steps):
        value, g = grad(params, xs, ys)
        # Average the gradients of every process: each then takes the same step.
        g = jax.tree_util.tree_map(lambda a: np.mean(multihost_utils.process_allgather(a), axis=0), g)
        params = jax.tree_util.tree_map(lambda p, d: p - 0.5 * d, params, g)
        if me == 0 and step % 50 == 0:
            print(f"step {step}: local loss {float(value):.4f}", flush=True)
    accuracy = float(jnp.mean(jnp.argmax(x_test @ params["w"] + params["b"], axis=1) == y_test))
    print(f"process {me}: test accuracy {accuracy:.4f}", flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
