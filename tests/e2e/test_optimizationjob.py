"""An OptimizationJob on the session plane: four real training trials as TrainJobs, two at a time.

Each trial runs a tiny training (stdlib only) that reads its parameters from the
``KUBEFLOW_TRAINER_OPT_*`` env the controller injects, fits a line by gradient descent with that
learning rate and batch size, and reports its final loss through ``trainyard.runtime.report()``
into its TrainJob's ``status.trainerStatus``. The search must end Complete with exactly four
trials, never more than two unfinished at once, and the trial whose reported loss is smallest as
its result, with that TrainJob's parameters.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually

pytestmark = pytest.mark.e2e

TRAIN = """
import os, random
from trainyard import runtime
lr = float(os.environ["KUBEFLOW_TRAINER_OPT_LR"])
batch = int(os.environ["KUBEFLOW_TRAINER_OPT_BATCH_SIZE"])
rng = random.Random(0)
xs = [rng.uniform(-1, 1) for _ in range(64)]
ys = [3 * x + 0.5 for x in xs]
w = b = 0.0
for epoch in range(3):
    for start in range(0, len(xs), batch):
        chunk = list(zip(xs[start:start + batch], ys[start:start + batch]))
        gw = sum(2 * (w * x + b - y) * x for x, y in chunk) / len(chunk)
        gb = sum(2 * (w * x + b - y) for x, y in chunk) / len(chunk)
        w, b = w - lr * gw, b - lr * gb
loss = sum((w * x + b - y) ** 2 for x, y in zip(xs, ys)) / len(xs)
runtime.report(epoch=3, total_epochs=3, metrics={"loss": loss})
runtime.flush()
print("loss", loss)
"""


def optimizationjob(name: str, ns: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "OptimizationJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "objectives": [{"metric": "loss", "direction": "Minimize"}],
            "searchAlgorithm": {"random": {"seed": 3}},
            "parameters": [
                {"name": "lr", "searchSpace": {"logUniform": {"min": "0.001", "max": "0.3"}}},
                {"name": "batch_size", "searchSpace": {"categorical": {"choices": ["8", "32", "64"]}}},
            ],
            "numTrials": 4,
            "parallelTrials": 2,
            "trainJobTemplate": {
                "spec": {
                    "runtimeRef": {"name": "torch-distributed"},
                    "trainer": {"numNodes": 1, "command": ["python", "-c", TRAIN]},
                }
            },
            **spec,
        },
    }


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"opt-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _completed(trainjob: dict[str, Any]) -> datetime | None:
    for c in (trainjob.get("status") or {}).get("conditions") or []:
        if c["type"] in ("Complete", "Failed") and c["status"] == "True":
            return _time(c["lastTransitionTime"])
    return None


def test_a_random_search_runs_four_trials_two_at_a_time_and_finds_the_smallest_loss(
    plane: Plane, kubectl: Kubectl, ns: str
) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(optimizationjob("tune", ns)))
    label = "trainer.kubeflow.org/optimizationjob=tune"
    most: list[int] = []

    def done() -> Any:
        found = kubectl.json("get", "optimizationjob", "tune", "-n", ns)
        status = found.get("status") or {}
        most.append(int(status.get("trialsRunning") or 0))
        assert status.get("state") != "Failed", status
        return found if status.get("state") == "Complete" else None

    job = eventually(done, timeout=150, interval=1.0, what="OptimizationJob tune Complete")
    assert max(most) <= 2, most
    trainjobs = kubectl.json("get", "trainjobs", "-n", ns, "-l", label)["items"]
    names = sorted(t["metadata"]["name"] for t in trainjobs)
    assert names == [f"tune-trial-{i}" for i in range(4)], names
    # never more than two unfinished at once: each trial's [created, finished) against the others'
    spans = [(_time(t["metadata"]["creationTimestamp"]), _completed(t)) for t in trainjobs]
    assert all(end is not None for _, end in spans), trainjobs
    for start, _ in spans:
        assert sum(1 for s, e in spans if e is not None and s <= start < e) <= 2, spans
    losses = {
        t["metadata"]["name"]: float(
            next(m["value"] for m in t["status"]["trainerStatus"]["metrics"] if m["name"] == "loss")
        )
        for t in trainjobs
    }
    assert len(set(losses.values())) == 4, losses  # distinct, so the best is one trial
    best = min(losses, key=losses.__getitem__)
    status = job["status"]
    assert status["result"]["trainJobName"] == best, (status["result"], losses)
    assert float(status["bestValue"]) == losses[best]
    assert (status["trialsSucceeded"], status["trialsFailed"], status["trialsRunning"]) == (4, 0, 0)
    complete = next(c for c in status["conditions"] if c["type"] == "Complete")
    assert (complete["status"], complete["reason"]) == ("True", "MaxTrialsReached")
    # the result's parameters are what that trial's trainer was given
    winner = next(t for t in trainjobs if t["metadata"]["name"] == best)
    env = {e["name"]: e["value"] for e in winner["spec"]["trainer"]["env"]}
    chosen = {p["name"]: p["value"] for p in status["result"]["parameters"]}
    assert env == {"KUBEFLOW_TRAINER_OPT_LR": chosen["lr"], "KUBEFLOW_TRAINER_OPT_BATCH_SIZE": chosen["batch_size"]}
    assert {p["name"] for p in status["result"]["parameters"]} == {"lr", "batch_size"}
    # kubectl's printer columns and yard's table
    header, line = kubectl("get", "optimizationjob", "tune", "-n", ns).splitlines()
    row = dict(zip(header.split(), line.split(), strict=False))
    assert (row["STATE"], row["TRIALS"], row["SUCCEEDED"], row["BEST"]) == (
        "Complete",
        "4",
        "4",
        status["bestValue"],
    ), row
    header, line = plane.yard("get", "optimizationjobs", "tune", "-n", ns).stdout.splitlines()
    assert "TRIALS" in header and "BEST" in header, header
    assert "Complete" in line and "4/4" in line and status["bestValue"] in line, line
    # deleting the OptimizationJob deletes its trials (they are its children)
    kubectl("delete", "optimizationjob", "tune", "-n", ns)
    eventually(
        lambda: not kubectl.json("get", "trainjobs", "-n", ns, "-l", label)["items"],
        timeout=60,
        what="the trials of a deleted OptimizationJob gone",
    )


def test_a_bad_one_is_refused_with_field_paths(kubectl: Kubectl, ns: str) -> None:
    bad = optimizationjob("bad", ns, numTrials=2, parallelTrials=3, searchAlgorithm={"grid": {}})
    answer = kubectl.run("apply", "-f", "-", input=json.dumps(bad))
    assert answer.returncode != 0
    assert 'spec: Invalid value: "object": parallelTrials cannot exceed numTrials' in answer.stderr, answer.stderr
    assert "Grid search requires all parameters to be Categorical" in answer.stderr, answer.stderr
