"""Distributed XGBoost on scikit-learn's digits: one booster trained by every replica together.

The script shows what an XGBoostJob replica does with the operator's environment: RANK 0 (the
Master) hosts the Rabit tracker on MASTER_ADDR:MASTER_PORT, every rank (the Master too) joins
the collective through it with its RANK as task id, trains on its own shard of the training set,
and XGBoost's allreduce builds one model from all shards (each round's histograms are summed
across ranks, and so are the eval metrics). After each boosting round rank 0 reports the round and
the test set's loss and accuracy with ``trainyard.runtime.report`` (stdlib only: ``pip install
trainyard`` in the image), shown by ``kubectl get xgboostjob`` (PROGRESS, EPOCH, and LOSS / ACCURACY
with ``-o wide``); where no operator says where to report, the calls do nothing. Without WORLD_SIZE it
trains alone, with a tracker of its own.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from xgboost import collective
from xgboost.tracker import RabitTracker

from trainyard import runtime


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Distributed XGBoost training on digits")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--max-depth", type=int, default=4)
    parser.add_argument("--eta", type=float, default=0.3)
    return parser.parse_args()


def shard(rank: int, world_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """This rank's rows of the training set (rows rank, rank + world, ...), and the whole test set."""
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    return x_train[rank::world_size], y_train[rank::world_size], x_test, y_test


class ReportRounds(xgb.callback.TrainingCallback):
    """Reports each finished boosting round as an epoch, with the test set's loss and accuracy."""

    def __init__(self, rounds: int) -> None:
        super().__init__()
        self.rounds = rounds

    def after_iteration(self, model: xgb.Booster, epoch: int, evals_log: dict[str, dict[str, list[float]]]) -> bool:
        test = evals_log.get("test", {})
        metrics = {}
        if test.get("mlogloss"):
            metrics["loss"] = round(test["mlogloss"][-1], 4)
        if test.get("merror"):
            metrics["accuracy"] = round(1.0 - test["merror"][-1], 4)
        runtime.report(epoch=epoch + 1, total_epochs=self.rounds, metrics=metrics)
        return False  # never stops training


def train(args: argparse.Namespace, rank: int, world_size: int) -> None:
    x_train, y_train, x_test, y_test = shard(rank, world_size)
    print(f"rank {rank}/{world_size}: training shard of {len(y_train)} rows")
    # Rows summed over the ranks prove every rank's shard is in the collective (and none twice).
    rows = collective.allreduce(np.array([len(y_train)], dtype=np.float64), collective.Op.SUM)
    print(
        f"rank {collective.get_rank()}: collective world size {collective.get_world_size()}, "
        f"{int(rows[0])} training rows across ranks"
    )
    dtrain = xgb.DMatrix(x_train, label=y_train)
    dtest = xgb.DMatrix(x_test, label=y_test)
    params = {
        "objective": "multi:softprob",
        "num_class": 10,
        "tree_method": "hist",
        "max_depth": args.max_depth,
        "eta": args.eta,
        "eval_metric": ["mlogloss", "merror"],
        # Ranks may share a small machine; more threads per rank would only oversubscribe it.
        "nthread": 1,
    }
    # In a collective, each evaluation is reduced over all ranks: the test set counted world_size times
    # gives the same averages, and every rank prints the same line, so only rank 0 logs them.
    booster = xgb.train(
        params,
        dtrain,
        num_boost_round=args.rounds,
        evals=[(dtrain, "train"), (dtest, "test")],
        verbose_eval=rank == 0,
        callbacks=[ReportRounds(args.rounds)],
    )
    # Every rank holds the same model after training; rank 0 reports on the whole test set.
    predicted = booster.predict(dtest).argmax(axis=1)
    accuracy = float((predicted == y_test).mean())
    if rank == 0:
        print(f"final test_accuracy={accuracy:.4f} ({booster.num_boosted_rounds()} rounds, {world_size} ranks)")
        runtime.flush()  # the last round reaches the job's status before the process ends


def main() -> None:
    args = parse_args()
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    port = int(os.environ.get("MASTER_PORT", "0"))

    tracker = None
    if rank == 0:
        # sortby="task": ranks follow dmlc_task_id (our RANK), not the order workers happen to connect.
        tracker = RabitTracker(n_workers=world_size, host_ip=addr, port=port, sortby="task")
        tracker.start()
        port = int(tracker.worker_args()["dmlc_tracker_port"])
        print(f"rank 0: Rabit tracker for {world_size} workers on {addr}:{port}")

    # Workers that start before the master's tracker listens retry (dmlc_retry) until it does.
    with collective.CommunicatorContext(
        dmlc_tracker_uri=addr, dmlc_tracker_port=port, dmlc_task_id=str(rank), dmlc_retry=30
    ):
        train(args, rank, world_size)

    if tracker is not None:
        tracker.wait_for()


if __name__ == "__main__":
    main()
