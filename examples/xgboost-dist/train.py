"""Distributed XGBoost on scikit-learn's digits: one Master and N Workers of an XGBoostJob.

Every rank reads its shard of the training set and trains the same booster through XGBoost's
collective (allreduce of gradient histograms). Rank 0, the Master, also hosts the tracker the
ranks meet at. The operator gives each rank MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK.
"""

from __future__ import annotations

import argparse
import os
import threading

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from xgboost import collective
from xgboost.tracker import RabitTracker


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])

    if rank == 0:
        # The tracker only introduces the ranks to each other; it runs beside rank 0's training.
        tracker = RabitTracker(n_workers=world, host_ip=addr, port=port, sortby="task")
        tracker.start()
        threading.Thread(target=tracker.wait_for, daemon=True).start()
        print(f"tracker listening on {addr}:{port} for {world} ranks", flush=True)

    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    shard = np.arange(len(x_train)) % world == rank
    print(f"rank {rank} of {world}: {int(shard.sum())} training rows", flush=True)

    # Ranks that start before the tracker listens retry (with a warning) until it does.
    context = {
        "dmlc_communicator": "rabit",
        "dmlc_tracker_uri": addr,
        "dmlc_tracker_port": port,
        "dmlc_task_id": str(rank),
        "dmlc_retry": 30,
    }
    with collective.CommunicatorContext(**context):
        assert collective.get_world_size() == world, collective.get_world_size()
        train = xgb.DMatrix(x_train[shard], label=y_train[shard])
        test = xgb.DMatrix(x_test, label=y_test)
        params = {
            "objective": "multi:softprob",
            "num_class": 10,
            "max_depth": 4,
            "eta": 0.3,
            "tree_method": "hist",
            "nthread": 1,
            "eval_metric": "merror",
        }
        log: dict[str, dict[str, list[float]]] = {}
        booster = xgb.train(params, train, args.rounds, evals=[(test, "test")], evals_result=log, verbose_eval=False)
        errors = log["test"]["merror"]
        if rank == 0:
            for i in range(0, len(errors), 5):
                print(f"round {i + 1}: test error {errors[i]:.4f}", flush=True)
        accuracy = float((booster.predict(test).argmax(axis=1) == y_test).mean())
        # Every rank holds the same booster: the collective kept them in step.
        total = collective.allreduce(np.array([1.0]), collective.Op.SUM)[0]
        print(f"rank {rank}: {int(total)} ranks took part; test accuracy {accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
