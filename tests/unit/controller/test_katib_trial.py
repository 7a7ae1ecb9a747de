"""The Trial reconciler: its job, its outcome from the job's conditions and the metrics, early stopping."""

from __future__ import annotations

import copy
from typing import Any

from katib_objects import NOW, experiment

from trainyard.controller.katib.template import render, trial
from trainyard.controller.katib.trial import TrialObserved, reconcile
from trainyard.controller.search import MetricValue


def new_trial(**spec: Any) -> dict[str, Any]:
    exp = experiment()
    assignment = {
        "name": "digits-t1",
        "parameterAssignments": [{"name": "lr", "value": "0.01"}, {"name": "units", "value": "16"}],
    }
    made = trial(exp, assignment, render(exp, "digits-t1", {"lr": "0.01", "units": "16"}))
    made["metadata"].update({"uid": "trial-uid", "resourceVersion": "3"})
    made["spec"].update(spec)
    return made


def job_with(*conditions: tuple[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "digits-t1", "namespace": "default"},
        "status": {
            "conditions": [{"type": t, "status": "True", "reason": r, "message": f"{t} now"} for t, r in conditions]
        },
    }


def losses(*values: float) -> tuple[MetricValue, ...]:
    return tuple(MetricValue("loss", v) for v in values)


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def test_a_new_trial_creates_its_job() -> None:
    t = new_trial()
    plan = reconcile(TrialObserved(t, None, (), NOW))
    assert plan.create is not None and plan.create["metadata"]["name"] == "digits-t1"
    assert plan.status is not None and conditions(plan.status) == {"Created": "True"}
    assert plan.status["startTime"]
    assert [e.reason for e in plan.events] == ["JobCreated"]


def test_running_then_succeeded_with_its_observation() -> None:
    t = new_trial()
    t["status"] = reconcile(TrialObserved(t, None, (), NOW)).status
    plan = reconcile(TrialObserved(t, job_with(), (), NOW))
    assert plan.status is not None and conditions(plan.status)["Running"] == "True"
    assert plan.requeue is None  # no rules to check: the job's end wakes it
    t["status"] = plan.status
    values = (*losses(0.9, 0.4, 0.5), MetricValue("accuracy", 0.8))
    plan = reconcile(TrialObserved(t, job_with(("Complete", "Completed")), values, NOW))
    assert plan.status is not None
    assert conditions(plan.status) == {"Created": "True", "Running": "False", "Succeeded": "True"}
    assert plan.status["conditions"][-1]["reason"] == "TrialSucceeded. Job reason: Completed"
    metrics = {m["name"]: m for m in plan.status["observation"]["metrics"]}
    assert (metrics["loss"]["min"], metrics["loss"]["max"], metrics["loss"]["latest"]) == ("0.4", "0.9", "0.5")
    logged = [(m["metric"]["name"], m["metric"]["value"]) for m in plan.status["observationLog"]["metricLogs"]]
    assert logged == [("loss", "0.9"), ("loss", "0.4"), ("loss", "0.5"), ("accuracy", "0.8")]
    assert plan.delete  # not retained
    t["status"] = plan.status
    assert reconcile(TrialObserved(t, None, values, NOW)).status is None  # finished stays finished


def test_no_objective_is_metrics_unavailable() -> None:
    t = new_trial(retainRun=True)
    t["status"] = {"startTime": "x", "conditions": [{"type": "Running", "status": "True", "reason": "TrialRunning"}]}
    plan = reconcile(TrialObserved(t, job_with(("Complete", "Completed")), (MetricValue("accuracy", 1.0),), NOW))
    assert plan.status is not None and conditions(plan.status)["MetricsUnavailable"] == "True"
    assert not plan.delete  # retained


def test_a_failed_job_fails_the_trial_with_its_reason() -> None:
    t = new_trial()
    t["status"] = {"startTime": "x", "conditions": []}
    plan = reconcile(TrialObserved(t, job_with(("Failed", "BackoffLimitExceeded")), losses(1.0), NOW))
    assert plan.status is not None and conditions(plan.status)["Failed"] == "True"
    assert "BackoffLimitExceeded" in plan.status["conditions"][-1]["reason"]


def test_a_job_deleted_by_hand_kills_the_trial() -> None:
    t = new_trial()
    t["status"] = {"startTime": "x", "conditions": [{"type": "Running", "status": "True", "reason": "TrialRunning"}]}
    plan = reconcile(TrialObserved(t, None, (), NOW))
    assert plan.create is None and plan.status is not None and conditions(plan.status)["Killed"] == "True"


def test_a_rule_broken_stops_it_early_and_deletes_the_job() -> None:
    rule = {"name": "loss", "value": "0.5", "comparison": "greater", "startStep": 2}
    t = new_trial(earlyStoppingRules=[rule])
    t["status"] = {"startTime": "x", "conditions": [{"type": "Running", "status": "True", "reason": "TrialRunning"}]}
    running = reconcile(TrialObserved(copy.deepcopy(t), job_with(), losses(0.9), NOW))
    assert running.requeue is not None and not running.delete
    assert running.status is not None and "EarlyStopped" not in conditions(running.status)
    assert running.status["observationLog"] == {
        "metricLogs": [{"timeStamp": "", "metric": {"name": "loss", "value": "0.9"}}]
    }
    plan = reconcile(TrialObserved(t, job_with(), losses(0.9, 0.8, 0.7), NOW))
    assert plan.delete and plan.status is not None
    assert conditions(plan.status)["EarlyStopped"] == "True"
    assert plan.status["observation"]["metrics"][0]["latest"] == "0.7"
