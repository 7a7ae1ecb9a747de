"""Katib Experiments on a real ``yard up``: trials as real batch Jobs, metrics read from their output.

One small search to completion (the best trial is the one whose printed loss is lowest, never
more than ``parallelTrialCount`` at once), medianstop stopping a bad trial while it runs, and a
plane restarted mid-search that finishes without losing or repeating a trial.
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane
from trainyard.controller.search import Algorithm, Direction
from trainyard.controller.search.space import from_katib
from trainyard.controller.search.suggest import suggest

pytestmark = pytest.mark.e2e

# The trial's "training": a loss that falls over three epochs to a floor set by the parameters
# (lowest at lr=0.01, units=32), printed in Katib's name=value format.
TRAIN = """
import math, sys, time
lr, units = float(sys.argv[1]), int(sys.argv[2])
floor = (math.log10(lr) + 2) ** 2 + (units - 32) ** 2 / 1000
for epoch in range(3):
    print(f"epoch={epoch} loss={floor + (2 - epoch) * 0.5:.6f} accuracy={1 / (1 + floor):.4f}", flush=True)
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-katib")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"katib-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def experiment(name: str, ns: str, script: str, args: list[str], **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "objective": {"type": "minimize", "objectiveMetricName": "loss", "additionalMetricNames": ["accuracy"]},
        "algorithm": {"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "3"}]},
        "parallelTrialCount": 2,
        "maxTrialCount": 4,
        "maxFailedTrialCount": 2,
        "parameters": [
            {
                "name": "lr",
                "parameterType": "double",
                "feasibleSpace": {"min": "0.001", "max": "0.1", "distribution": "logUniform"},
            },
            {"name": "units", "parameterType": "int", "feasibleSpace": {"min": "8", "max": "64"}},
        ],
        "trialTemplate": {
            "primaryContainerName": "training",
            "trialParameters": [{"name": p, "reference": p} for p in ("lr", "units")],
            "trialSpec": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "training",
                                    "image": "python:3.11",
                                    "command": ["python3", "-c", script, *args],
                                }
                            ],
                        }
                    }
                },
            },
        },
    }
    body.update(spec)
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {"name": name, "namespace": ns},
        "spec": body,
    }


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_ and c["status"] == "True"),
        None,
    )


def trials(kubectl: Kubectl, ns: str, name: str) -> list[dict[str, Any]]:
    found = kubectl.json("get", "trials", "-n", ns, "-l", f"katib.kubeflow.org/experiment={name}")["items"]
    return sorted(found, key=lambda t: t["metadata"]["creationTimestamp"])


def finished(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any] | None:
    exp = kubectl.json("get", "experiment", name, "-n", ns)
    return exp if condition(exp, "Succeeded") or condition(exp, "Failed") else None


def metric(trial: dict[str, Any], name: str, field: str) -> float:
    found = next(m for m in trial["status"]["observation"]["metrics"] if m["name"] == name)
    return float(found[field])


def test_a_random_search_finds_the_trial_with_the_lowest_loss(kubectl: Kubectl, ns: str) -> None:
    args = ["${trialParameters.lr}", "${trialParameters.units}"]
    kubectl("apply", "-f", "-", input=json.dumps(experiment("digits", ns, TRAIN, args)))
    done = eventually(lambda: finished(kubectl, ns, "digits"), timeout=240, what="the Experiment finishes")
    assert condition(done, "Succeeded")["reason"] == "ExperimentMaxTrialsReached"  # type: ignore[index]
    found = trials(kubectl, ns, "digits")
    assert len(found) == 4 and done["status"]["trialsSucceeded"] == 4
    for t in found:
        values = {p["name"]: p["value"] for p in t["spec"]["parameterAssignments"]}
        floor = (math.log10(float(values["lr"])) + 2) ** 2 + (int(values["units"]) - 32) ** 2 / 1000
        assert metric(t, "loss", "min") == pytest.approx(floor, abs=1e-5)  # the last epoch's, by strategy min
        assert metric(t, "loss", "max") == pytest.approx(floor + 1.0, abs=1e-5)
        assert condition(t, "Succeeded")
    best = min(found, key=lambda t: metric(t, "loss", "min"))
    optimal = done["status"]["currentOptimalTrial"]
    assert optimal["bestTrialName"] == best["metadata"]["name"]
    assert optimal["parameterAssignments"] == best["spec"]["parameterAssignments"]
    # Never more than parallelTrialCount at once: at each trial's start, count those still running.
    spans = [(t["status"]["startTime"], t["status"]["completionTime"]) for t in found]
    for start, _ in spans:
        assert sum(1 for s, e in spans if s <= start < e) <= 2
    # The jobs are gone (trialTemplate.retain is false); the table shows the verdict.
    assert not kubectl.json("get", "jobs", "-n", ns)["items"]
    table = kubectl("get", "experiments", "-n", ns)
    assert "Succeeded" in table.splitlines()[1]


# Each trial reports its loss once per half second: a good one ends after 4 reports, a bad one
# (its loss far above the finished trials' median) would take 60.
CURVE = """
import sys, time
quality = sys.argv[1]
steps, loss = (60, 10.0) if quality == sys.argv[2] else (4, 1.0)
for step in range(steps):
    print(f"loss={loss - step * 0.01:.4f}", flush=True)
    time.sleep(0.5 if steps > 4 else 0.05)
"""


def test_medianstop_stops_the_bad_trial_early(kubectl: Kubectl, ns: str) -> None:
    parameters = [{"name": "quality", "parameterType": "categorical", "feasibleSpace": {"list": ["a", "b", "c"]}}]
    algorithm = {"algorithmName": "grid", "algorithmSettings": [{"name": "random_state", "value": "5"}]}
    # The grid's third point is the bad one: by then two trials have finished (parallelTrialCount 1).
    order = suggest(from_katib(parameters), Algorithm("grid", {"random_state": "5"}), Direction.MINIMIZE, [], 3)
    bad = order.assignments[2]["quality"]
    exp = experiment(
        "median",
        ns,
        CURVE,
        ["${trialParameters.quality}", bad],
        parameters=parameters,
        algorithm=algorithm,
        parallelTrialCount=1,
        maxTrialCount=3,
        earlyStopping={
            "algorithmName": "medianstop",
            "algorithmSettings": [{"name": "min_trials_required", "value": "2"}, {"name": "start_step", "value": "2"}],
        },
    )
    exp["spec"]["trialTemplate"]["trialParameters"] = [{"name": "quality", "reference": "quality"}]
    kubectl("apply", "-f", "-", input=json.dumps(exp))
    done = eventually(lambda: finished(kubectl, ns, "median"), timeout=240, what="the Experiment finishes")
    found = trials(kubectl, ns, "median")
    stopped = [t for t in found if condition(t, "EarlyStopped")]
    assert len(stopped) == 1, [t.get("status") for t in found]
    assert stopped[0]["spec"]["parameterAssignments"] == [{"name": "quality", "value": bad}]
    rule = stopped[0]["spec"]["earlyStoppingRules"][0]
    assert (rule["name"], rule["comparison"]) == ("loss", "greater") and float(rule["value"]) < 2
    # Stopped long before its 60 reports: the observation holds what it printed until then.
    assert metric(stopped[0], "loss", "latest") > 9.0
    assert done["status"]["trialsEarlyStopped"] == 1 and done["status"]["trialsSucceeded"] == 2


def test_a_restarted_plane_finishes_the_search_without_repeats(kubectl: Kubectl, plane: Plane, ns: str) -> None:
    args = ["${trialParameters.lr}", "${trialParameters.units}"]
    exp = experiment("resume", ns, TRAIN, args, parallelTrialCount=1, maxTrialCount=3)
    kubectl("apply", "-f", "-", input=json.dumps(exp))
    eventually(
        lambda: kubectl.json("get", "experiment", "resume", "-n", ns)["status"].get("trialsSucceeded", 0) >= 1,
        timeout=120,
        what="a first trial succeeded",
    )
    before = kubectl.json("get", "suggestion", "resume", "-n", ns)["status"]["suggestions"]
    plane.down()
    plane.up()
    done = eventually(lambda: finished(kubectl, ns, "resume"), timeout=240, what="the Experiment finishes")
    assert done["status"]["trialsSucceeded"] == 3
    after = kubectl.json("get", "suggestion", "resume", "-n", ns)["status"]["suggestions"]
    assert after[: len(before)] == before  # what was suggested before stays, none suggested twice
    names = [t["metadata"]["name"] for t in trials(kubectl, ns, "resume")]
    assert len(names) == len(set(names)) == 3 == len(after)
    assigned = [tuple(sorted((p["name"], p["value"]) for p in a["parameterAssignments"])) for a in after]
    assert len(set(assigned)) == 3


# A PyTorchJob trial that reports through trainyard.runtime.report (the Push collector reads the
# job's status.trainingProgress): three epochs, the loss falling to the parameter's value.
PUSHED = """
import sys, time
from trainyard import runtime
floor = float(sys.argv[1])
for epoch in range(1, 4):
    runtime.report(epoch=epoch, total_epochs=3, metrics={"loss": floor + (3 - epoch)})
    runtime.flush()
    time.sleep(0.3)
"""


def test_a_pushed_metric_reaches_the_trial(kubectl: Kubectl, ns: str) -> None:
    parameters = [{"name": "floor", "parameterType": "discrete", "feasibleSpace": {"list": ["0.5", "2.5"]}}]
    exp = experiment(
        "pushed",
        ns,
        PUSHED,
        ["${trialParameters.floor}"],
        parameters=parameters,
        algorithm={"algorithmName": "grid"},
        maxTrialCount=2,
        metricsCollectorSpec={"collector": {"kind": "Push"}},
    )
    template = exp["spec"]["trialTemplate"]
    template["trialParameters"] = [{"name": "floor", "reference": "floor"}]
    template["primaryContainerName"] = "pytorch"
    command = template["trialSpec"]["spec"]["template"]["spec"]["containers"][0]["command"]
    template["trialSpec"] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {"containers": [{"name": "pytorch", "image": "python:3.11", "command": command}]}
                    },
                }
            }
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(exp))
    done = eventually(lambda: finished(kubectl, ns, "pushed"), timeout=240, what="the Experiment finishes")
    assert done["status"]["trialsSucceeded"] == 2, done["status"]
    found = trials(kubectl, ns, "pushed")
    for t in found:
        floor = float(t["spec"]["parameterAssignments"][0]["value"])
        assert metric(t, "loss", "min") == pytest.approx(floor)
        assert metric(t, "loss", "latest") == pytest.approx(floor)
        logged = [float(m["metric"]["value"]) for m in t["status"]["observationLog"]["metricLogs"]]
        assert logged[-1] == pytest.approx(floor) and logged == sorted(logged, reverse=True)
    best = done["status"]["currentOptimalTrial"]
    assert best["parameterAssignments"] == [{"name": "floor", "value": "0.5"}]
