"""XGBoostJob end to end: the example trains one booster across Master + 2 Workers in the real xgboost
environment, a Worker that fails under ``restartPolicy: Never`` fails the job with upstream's words,
and ``TrainingClient.create_job(job_kind="XGBoostJob", train_func=...)`` runs a function on every rank.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conftest import Plane, eventually
from framework_envs import register
from trainyard.sdk import JobFailedError, TrainingClient

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/xgboost-dist/xgboostjob.yaml"


@pytest.fixture(scope="module")
def sdk(plane: Plane) -> TrainingClient:
    register(plane, "xgboost")
    return TrainingClient(plane.kubeconfig, namespace="default")


def conditions(job: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", "")) for c in job["status"]["conditions"]]


def test_the_example_trains_one_booster_on_every_ranks_shard(plane: Plane, sdk: TrainingClient) -> None:
    plane.yard("delete", "xgboostjob", "xgboost-dist", "--ignore-not-found")
    run = plane.yard("run", "-f", EXAMPLE, "--timeout", "120", check=False)
    out = run.stdout
    assert run.returncode == 0, f"{out}\n{run.stderr}"

    # Every rank trained on its own third of the 1347 training rows, in one collective of three.
    for replica, rank in (("master-0", 0), ("worker-0", 1), ("worker-1", 2)):
        assert f"[{replica}] rank {rank}/3: training shard of 449 rows" in out, out
        assert f"[{replica}] rank {rank}: collective world size 3, 1347 training rows across ranks" in out, out
    assert "[master-0] rank 0: Rabit tracker for 3 workers on 127.0.0.1:" in out, out
    # The master reports each round's metrics (reduced over the ranks) and the final accuracy.
    rounds = re.findall(r"\[master-0\] .*\[(\d+)\]\s+train-mlogloss:[\d.]+\s+train-merror:[\d.]+\s+test-mlogloss", out)
    assert rounds == [str(i) for i in range(10)], out
    accuracy = float(re.findall(r"\[master-0\] final test_accuracy=([\d.]+) \(10 rounds, 3 ranks\)", out)[0])
    assert accuracy > 0.9, out

    job = sdk.get_job("xgboost-dist", job_kind="XGBoostJob")
    assert conditions(job)[-1] == ("Succeeded", "True", "XGBoostJobSucceeded")
    # As upstream, a succeeded XGBoostJob shows it ran, even if no pass saw its master running.
    assert ("Running", "False", "XGBoostJobRunning") in conditions(job)
    assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    # train.py reports each boosting round through trainyard.runtime (status.trainingProgress)
    progress = job["status"]["trainingProgress"]
    assert (progress["progress"], progress["currentEpoch"], progress["totalEpochs"]) == ("100%", 10, 10), progress
    assert progress["metrics"]["accuracy"] > 0.9, progress
    # The example's image ran in the xgboost environment, not trainyard's own.
    events = json.loads(plane.yard("get", "events", "-o", "json").stdout)["items"]
    assert any('runs in local environment "xgboost"' in e["message"] for e in events), events
    sdk.delete_job("xgboost-dist", job_kind="XGBoostJob")


def test_a_worker_failing_under_never_fails_the_job_with_upstreams_message(sdk: TrainingClient) -> None:
    def replica(code: str) -> dict[str, Any]:
        container = {"name": "xgboost", "image": "python:3.11", "command": ["python", "-c", code]}
        return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}

    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "XGBoostJob",
        "metadata": {"name": "xgb-worker-fails"},
        "spec": {
            # Running pods are stopped once the job has failed; the master would otherwise sleep on.
            "runPolicy": {"cleanPodPolicy": "Running"},
            "xgbReplicaSpecs": {
                "Master": replica("import time; time.sleep(60)"),
                "Worker": replica("import sys; print('worker gives up', flush=True); sys.exit(1)"),
            },
        },
    }
    sdk.create_job(job)
    with pytest.raises(JobFailedError):
        sdk.wait_for_job_conditions("xgb-worker-fails", job_kind="XGBoostJob", wait_timeout=60, polling_interval=0.5)

    failed = sdk.get_job("xgb-worker-fails", job_kind="XGBoostJob")
    last = failed["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Failed", "XGBoostJobFailed")
    assert last["message"] == "XGBoostJob xgb-worker-fails is failed because 1 Worker replica(s) failed."
    sdk.delete_job("xgb-worker-fails", job_kind="XGBoostJob")


def report_rank() -> None:
    import os

    import xgboost

    print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"], "xgboost", xgboost.__version__, flush=True)


def test_a_function_runs_on_one_master_and_two_workers(sdk: TrainingClient) -> None:
    sdk.create_job(name="xgb-fn", job_kind="XGBoostJob", train_func=report_rank, num_workers=3)
    sdk.wait_for_job_conditions("xgb-fn", job_kind="XGBoostJob", wait_timeout=60, polling_interval=0.5)

    def printed() -> dict[str, str]:
        logs, _ = sdk.get_job_logs("xgb-fn", job_kind="XGBoostJob", is_master=False)
        return {pod: text.strip() for pod, text in logs.items()}

    expected = {
        "xgb-fn-master-0": "rank 0 of 3 xgboost 3.2.0",
        "xgb-fn-worker-0": "rank 1 of 3 xgboost 3.2.0",
        "xgb-fn-worker-1": "rank 2 of 3 xgboost 3.2.0",
    }
    # The job succeeds with its Master (upstream's rule): a loaded machine may still be starting a
    # Worker's Python then, so its line is awaited rather than read at once.
    # The default image is the examples' XGBoost one, so the function runs where xgboost is installed.
    eventually(lambda: printed() == expected, timeout=60, what=f"every rank's line: {expected}")
    assert printed() == expected
    sdk.delete_job("xgb-fn", job_kind="XGBoostJob")
