"""The pure OptimizationJob reconciler: trials as TrainJobs, parallelTrials at a time, the best one, the end.

Each test drives passes the way the shell does: the plan's TrainJobs become the observed ones (as
the API server would store them), their conditions and reported metrics are set as the TrainJob
controller and the trainer would, and the plan's status becomes the OptimizationJob's.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from trainyard.api import trainer
from trainyard.controller.optimizationjob import OptimizationJobObserved, OptimizationJobPlan, reconcile

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
Obj = dict[str, Any]


def optjob(name: str = "tune", **spec: Any) -> Obj:
    body: Obj = {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.OPTIMIZATIONJOB,
        "metadata": {"name": name, "namespace": "ml", "uid": f"uid-{name}"},
        "spec": {
            "objectives": [{"metric": "loss", "direction": "Minimize"}],
            "searchAlgorithm": {"random": {"seed": 7}},
            "parameters": [
                {"name": "lr", "searchSpace": {"uniform": {"min": "0.01", "max": "0.1", "type": "Float"}}},
                {"name": "batch-size", "searchSpace": {"categorical": {"choices": ["16", "32", "64"]}}},
            ],
            "numTrials": 4,
            "parallelTrials": 2,
            "trainJobTemplate": {
                "metadata": {"labels": {"team": "vision"}},
                "spec": {
                    "runtimeRef": {"name": "torch-distributed"},
                    "trainer": {"command": ["python", "train.py"], "env": [{"name": "EPOCHS", "value": "2"}]},
                },
            },
        },
    }
    body["spec"].update(spec)
    return body


class Run:
    """The world between passes: the OptimizationJob and its TrainJobs, as the server holds them."""

    def __init__(self, job: Obj) -> None:
        self.job = job
        self.trainjobs: dict[str, Obj] = {}

    def step(self) -> OptimizationJobPlan:
        plan = reconcile(OptimizationJobObserved(self.job, tuple(self.trainjobs.values()), NOW))
        for created in plan.create:
            stored = copy.deepcopy(created)
            ref = {
                "apiVersion": trainer.API_VERSION,
                "kind": trainer.OPTIMIZATIONJOB,
                "name": self.job["metadata"]["name"],
            }
            stored["metadata"]["ownerReferences"] = [{**ref, "uid": self.job["metadata"]["uid"], "controller": True}]
            self.trainjobs.setdefault(stored["metadata"]["name"], stored)
        if plan.status is not None:
            self.job = {**self.job, "status": plan.status}
        return plan

    def finish(self, name: str, loss: str | None = None, *, failed: bool = False) -> None:
        status: Obj = {
            "conditions": [
                {
                    "type": "Failed" if failed else "Complete",
                    "status": "True",
                    "reason": "x",
                    "message": "boom" if failed else "",
                }
            ]
        }
        if loss is not None:
            status["trainerStatus"] = {"metrics": [{"name": "loss", "value": loss}, {"name": "epoch", "value": "2"}]}
        self.trainjobs[name]["status"] = status

    def parameters(self, name: str) -> dict[str, str]:
        text = self.trainjobs[name]["metadata"]["annotations"][trainer.PARAMETERS_ANNOTATION]
        return {p["name"]: p["value"] for p in json.loads(text)}

    def running(self) -> list[str]:
        return [r["name"] for r in self.job["status"]["trials"] if r["state"] == "Running"]


def condition(job: Obj, type_: str) -> Obj | None:
    return next((c for c in job["status"].get("conditions") or [] if c["type"] == type_), None)


def test_the_first_pass_creates_parallel_trials_from_the_template_with_their_parameters() -> None:
    run = Run(optjob())
    plan = run.step()
    assert [t["metadata"]["name"] for t in plan.create] == ["tune-trial-0", "tune-trial-1"]
    first = plan.create[0]
    labels = first["metadata"]["labels"]
    assert labels == {"team": "vision", trainer.OPTIMIZATIONJOB_LABEL: "tune", trainer.TRIAL_INDEX_LABEL: "0"}
    chosen = run.parameters("tune-trial-0")
    assert list(chosen) == ["lr", "batch-size"] and 0.01 <= float(chosen["lr"]) <= 0.1
    assert chosen["batch-size"] in ("16", "32", "64")
    env = {e["name"]: e["value"] for e in first["spec"]["trainer"]["env"]}
    assert env == {
        "EPOCHS": "2",
        "KUBEFLOW_TRAINER_OPT_LR": chosen["lr"],
        "KUBEFLOW_TRAINER_OPT_BATCH_SIZE": chosen["batch-size"],
    }
    assert first["spec"]["runtimeRef"] == {"name": "torch-distributed"}
    status = run.job["status"]
    assert (status["state"], status["trialsRunning"], status["trialsSucceeded"]) == ("Running", 2, 0)
    created = condition(run.job, "Created")
    assert created is not None and (created["status"], created["reason"]) == ("True", "Created")
    assert status["trials"][0] == {
        "name": "tune-trial-0",
        "parameters": [{"name": "lr", "value": chosen["lr"]}, {"name": "batch-size", "value": chosen["batch-size"]}],
        "state": "Running",
    }


def test_a_pass_recomputed_after_a_restart_plans_the_same_names_and_no_more_than_parallel() -> None:
    job = optjob()
    again = reconcile(OptimizationJobObserved(job, (), NOW))
    run = Run(job)
    plan = run.step()
    assert [t["metadata"]["name"] for t in again.create] == [t["metadata"]["name"] for t in plan.create]
    assert again.create == plan.create  # a seeded search suggests the same points for the same history
    assert run.step().create == ()  # two running of two parallel: nothing more
    assert run.step().status is None  # nothing changed, nothing written


def test_trials_go_on_as_others_finish_and_the_best_is_the_smallest_loss() -> None:
    run = Run(optjob())
    run.step()
    run.finish("tune-trial-0", "0.5")
    plan = run.step()
    assert [t["metadata"]["name"] for t in plan.create] == ["tune-trial-2"]
    assert [(e.reason, e.message) for e in plan.events] == [("TrialSucceeded", "Trial tune-trial-0 finished: loss=0.5")]
    assert run.job["status"]["result"]["trainJobName"] == "tune-trial-0"
    run.finish("tune-trial-1", "0.25")
    run.finish("tune-trial-2", "0.75")
    assert [t["metadata"]["name"] for t in run.step().create] == ["tune-trial-3"]
    assert run.running() == ["tune-trial-3"]
    run.finish("tune-trial-3", "0.3")
    plan = run.step()
    assert plan.create == ()
    status = run.job["status"]
    assert status["state"] == "Complete" and status["trialsSucceeded"] == 4 and status["bestValue"] == "0.25"
    best = run.parameters("tune-trial-1")
    assert status["result"] == {
        "trainJobName": "tune-trial-1",
        "parameters": [{"name": k, "value": v} for k, v in best.items()],
    }
    complete = condition(run.job, "Complete")
    assert complete is not None and (complete["status"], complete["reason"]) == ("True", "MaxTrialsReached")
    assert "the best is tune-trial-1 with loss=0.25" in complete["message"]
    assert [e.reason for e in plan.events] == ["TrialSucceeded", "MaxTrialsReached"]
    assert run.step() == OptimizationJobPlan()  # finished: never reopened


def test_maximize_picks_the_largest_and_ties_go_to_the_earlier_trial() -> None:
    run = Run(optjob(objectives=[{"metric": "loss", "direction": "Maximize"}], numTrials=3, parallelTrials=3))
    run.step()
    for name, value in (("tune-trial-0", "0.9"), ("tune-trial-1", "0.9"), ("tune-trial-2", "0.1")):
        run.finish(name, value)
    run.step()
    assert run.job["status"]["result"]["trainJobName"] == "tune-trial-0"


def test_a_trial_without_the_metric_is_failed_for_the_search_and_says_why() -> None:
    run = Run(optjob(numTrials=2, parallelTrials=2))
    run.step()
    run.finish("tune-trial-0")  # Complete, nothing reported
    run.finish("tune-trial-1", "0.4")
    plan = run.step()
    status = run.job["status"]
    assert (status["trialsFailed"], status["trialsSucceeded"], status["state"]) == (1, 1, "Complete")
    failed = status["trials"][0]
    assert failed["state"] == "Failed" and "did not report it" in failed["message"] and "'loss'" in failed["message"]
    assert ("TrialFailed", failed["message"]) in [(e.reason, e.message) for e in plan.events]
    assert status["result"]["trainJobName"] == "tune-trial-1"


def test_every_trial_failed_fails_the_job_with_the_last_cause() -> None:
    run = Run(optjob(numTrials=2, parallelTrials=1))
    run.step()
    run.finish("tune-trial-0", failed=True)
    assert [t["metadata"]["name"] for t in run.step().create] == ["tune-trial-1"]  # a failure only takes its point
    run.finish("tune-trial-1", "not-a-number")
    plan = run.step()
    status = run.job["status"]
    assert status["state"] == "Failed" and "result" not in status
    failed = condition(run.job, "Failed")
    assert failed is not None and failed["reason"] == "AllTrialsFailed"
    assert "reported no number for it" in failed["message"]
    assert plan.events[-1].reason == "AllTrialsFailed" and plan.events[-1].type.value == "Warning"


def test_a_grid_with_fewer_points_than_trials_ends_when_it_has_none_left() -> None:
    grid = [{"name": "opt", "searchSpace": {"categorical": {"choices": ["adam", "sgd"]}}}]
    run = Run(optjob(searchAlgorithm={"grid": {}}, parameters=grid, numTrials=4, parallelTrials=4))
    plan = run.step()
    assert sorted(run.parameters(t["metadata"]["name"])["opt"] for t in plan.create) == ["adam", "sgd"]
    run.finish("tune-trial-0", "1.5")
    run.finish("tune-trial-1", "0.5")
    assert run.step().create == ()
    complete = condition(run.job, "Complete")
    assert complete is not None and complete["reason"] == "SearchSpaceExhausted"
    assert run.job["status"]["result"]["parameters"] == [
        {"name": "opt", "value": run.parameters("tune-trial-1")["opt"]}
    ]


def test_a_name_too_long_for_its_trials_is_said_and_nothing_is_created() -> None:
    name = "a" * 56  # a-...-trial-3 is 64 characters
    plan = reconcile(OptimizationJobObserved(optjob(name), (), NOW))
    assert plan.create == () and plan.status is not None
    (created,) = plan.status["conditions"]
    assert (created["type"], created["status"], created["reason"]) == ("Created", "False", "TrainJobsCreationFailed")
    assert "at most 55 characters" in created["message"]


def test_trainjobs_not_its_own_are_not_its_trials() -> None:
    run = Run(optjob())
    run.step()
    stranger = copy.deepcopy(run.trainjobs["tune-trial-0"])
    stranger["metadata"]["name"] = "tune-trial-9"
    stranger["metadata"]["ownerReferences"][0]["uid"] = "uid-an-older-tune"
    run.trainjobs["tune-trial-9"] = stranger
    run.finish("tune-trial-0", "0.1")
    run.step()
    assert [r["name"] for r in run.job["status"]["trials"]] == [f"tune-trial-{i}" for i in range(3)]


def test_a_trial_whose_trainjob_was_deleted_counts_as_failed_and_its_index_is_not_reused() -> None:
    run = Run(optjob())
    run.step()
    del run.trainjobs["tune-trial-1"]
    plan = run.step()
    assert [t["metadata"]["name"] for t in plan.create] == ["tune-trial-2"]
    gone = run.job["status"]["trials"][1]
    assert gone["state"] == "Failed" and "deleted before it finished" in gone["message"]


def test_without_a_seed_each_job_draws_its_own_points_the_same_on_every_pass() -> None:
    def first_points(uid: str) -> list[dict[str, str]]:
        job = optjob(searchAlgorithm={"random": {}})
        job["metadata"]["uid"] = uid
        run = Run(job)
        run.step()
        return [run.parameters(f"tune-trial-{i}") for i in range(2)]

    assert first_points("uid-a") == first_points("uid-a") != first_points("uid-b")
