"""The Experiment reconciler: Katib's trial counts, verdicts, suggestions and restarts, pass by pass."""

from __future__ import annotations

import copy
from typing import Any

from katib_objects import NOW, experiment, finished_trial

from trainyard.controller.katib.experiment import ExperimentObserved, ExperimentPlan, reconcile


class World:
    """What the API server would hold after each plan is applied: enough to run passes in a row."""

    def __init__(self, exp: dict[str, Any]) -> None:
        self.experiment = exp
        self.suggestion: dict[str, Any] | None = None
        self.trials: dict[str, dict[str, Any]] = {}
        self.series: dict[str, list[float]] = {}
        self.version = 10

    def observed(self) -> ExperimentObserved:
        return ExperimentObserved(self.experiment, self.suggestion, tuple(self.trials.values()), self.series, NOW)

    def step(self) -> ExperimentPlan:
        plan = reconcile(self.observed())
        self.version += 1
        if plan.suggestion is not None:
            self.suggestion = {**copy.deepcopy(plan.suggestion), "status": (self.suggestion or {}).get("status")}
        if plan.suggestion_status is not None:
            assert self.suggestion is not None
            self.suggestion["status"] = copy.deepcopy(plan.suggestion_status)
        for t in plan.create:
            made = copy.deepcopy(t)
            made["metadata"]["creationTimestamp"] = f"2026-12-03T12:00:{len(self.trials):02d}Z"
            self.trials[t["metadata"]["name"]] = made
        for name in plan.delete:
            self.trials.pop(name)
        if plan.status is not None:
            self.experiment = {**self.experiment, "status": copy.deepcopy(plan.status)}
        return plan

    def finish(self, name: str, state: str, loss: float | None) -> None:
        t = self.trials[name]
        self.trials[name] = finished_trial(t, state, loss, t["metadata"]["creationTimestamp"])

    def condition(self, type_: str) -> dict[str, Any] | None:
        found = [c for c in self.experiment["status"]["conditions"] if c["type"] == type_]
        return found[0] if found else None


def assigned(world: World) -> list[dict[str, str]]:
    assert world.suggestion is not None
    return [
        {p["name"]: p["value"] for p in a["parameterAssignments"]} for a in world.suggestion["status"]["suggestions"]
    ]


def test_the_first_passes_make_the_suggestion_then_parallel_trials() -> None:
    world = World(experiment())
    plan = world.step()
    assert plan.suggestion is not None and plan.suggestion["spec"]["requests"] == 2
    assert plan.suggestion["spec"]["algorithm"]["algorithmName"] == "random"
    assert world.condition("Running")["status"] == "True"  # type: ignore[index]
    plan = world.step()
    assert len(plan.create) == 2
    names = [t["metadata"]["name"] for t in plan.create]
    assert [a["name"] for a in world.suggestion["status"]["suggestions"]] == names  # type: ignore[index]
    for values in assigned(world):
        assert 0.001 <= float(values["lr"]) <= 0.1 and 8 <= int(values["units"]) <= 64
    # Nothing more while both run: parallelTrialCount is reached.
    plan = world.step()
    assert not plan.create and plan.suggestion is None and plan.suggestion_status is None
    assert world.experiment["status"]["trialsPending"] == 2


def test_finished_trials_make_room_and_the_best_is_current_optimal() -> None:
    world = World(experiment())
    world.step()
    world.step()
    first, second = list(world.trials)
    world.finish(first, "Succeeded", 0.3)
    world.finish(second, "Succeeded", 0.2)
    plan = world.step()
    assert world.suggestion["spec"]["requests"] == 4  # type: ignore[index]
    assert len(plan.create) == 2
    optimal = world.experiment["status"]["currentOptimalTrial"]
    assert optimal["bestTrialName"] == second
    assert optimal["observation"]["metrics"][0]["min"] == "0.2"
    assert world.experiment["status"]["succeededTrialList"] == [first, second]
    for name in [t["metadata"]["name"] for t in plan.create]:
        world.finish(name, "Succeeded", 0.5)
    world.step()
    done = world.condition("Succeeded")
    assert done is not None and done["reason"] == "ExperimentMaxTrialsReached"
    assert world.condition("Running")["status"] == "False"  # type: ignore[index]
    assert world.experiment["status"]["conditions"][-1]["type"] == "Succeeded"  # Katib's TYPE column
    assert world.experiment["status"]["completionTime"]
    # Finished: no pass makes anything more.
    plan = world.step()
    assert not plan.create and plan.status is None


def test_a_pass_that_dies_after_the_suggestion_makes_the_same_trials_again() -> None:
    world = World(experiment())
    world.step()
    plan = world.step()
    made = sorted(t["metadata"]["name"] for t in plan.create)
    world.trials.clear()  # the Trials were never created: the pass died after writing the Suggestion
    again = reconcile(world.observed())
    assert sorted(t["metadata"]["name"] for t in again.create) == made
    assert again.suggestion_status is None  # nothing new is suggested: the assignments are the history


def test_the_search_is_repeatable_for_the_same_experiment() -> None:
    one, two = World(experiment()), World(experiment())
    for world in (one, two):
        world.step()
        world.step()
    assert assigned(one) == assigned(two)


def test_max_failed_trials_fail_the_experiment() -> None:
    world = World(experiment())
    world.step()
    world.step()
    for name in list(world.trials):
        world.finish(name, "Failed", None)
    world.step()
    failed = world.condition("Failed")
    assert failed is not None and failed["reason"] == "ExperimentFailed"


def test_the_goal_ends_it_early() -> None:
    exp = experiment()
    exp["spec"]["objective"]["goal"] = 0.25
    world = World(exp)
    world.step()
    world.step()
    name = next(iter(world.trials))
    world.finish(name, "Succeeded", 0.2)
    world.step()
    assert world.condition("Succeeded")["reason"] == "ExperimentGoalReached"  # type: ignore[index]


def _finished_world(resume: str) -> World:
    world = World(experiment(resumePolicy=resume, maxTrialCount=2))
    world.step()
    world.step()
    for name in list(world.trials):
        world.finish(name, "Succeeded", 0.4)
    world.step()
    assert world.condition("Succeeded")["reason"] == "ExperimentMaxTrialsReached"  # type: ignore[index]
    return world


def test_long_running_restarts_when_max_trials_is_raised() -> None:
    world = _finished_world("LongRunning")
    world.experiment["spec"]["maxTrialCount"] = 3
    plan = world.step()
    assert world.condition("Restarting")["status"] == "True"  # type: ignore[index]
    assert world.condition("Succeeded") is None
    world.step()
    plan = world.step()
    assert len(world.trials) == 3
    assert world.condition("Running")["status"] == "True"  # type: ignore[index]
    assert not plan.create


def test_never_stays_finished() -> None:
    world = _finished_world("Never")
    world.experiment["spec"]["maxTrialCount"] = 3
    plan = world.step()
    assert not plan.create and world.condition("Succeeded")["status"] == "True"  # type: ignore[index]


def test_lowering_parallel_deletes_the_newest_and_forgets_their_assignments() -> None:
    world = World(experiment(parallelTrialCount=3, maxTrialCount=6))
    world.step()
    world.step()
    assert len(world.trials) == 3
    newest = max(world.trials.values(), key=lambda t: t["metadata"]["creationTimestamp"])["metadata"]["name"]
    world.experiment["spec"]["parallelTrialCount"] = 2
    plan = world.step()
    assert plan.delete == (newest,)
    assert newest not in [a["name"] for a in world.suggestion["status"]["suggestions"]]  # type: ignore[index]
    assert world.suggestion["spec"]["requests"] == 2  # type: ignore[index]
    plan = world.step()
    assert not plan.create and not plan.delete


def test_medianstop_gives_new_trials_the_median_rule() -> None:
    exp = experiment(
        parallelTrialCount=1,
        maxTrialCount=6,
        earlyStopping={
            "algorithmName": "medianstop",
            "algorithmSettings": [{"name": "min_trials_required", "value": "2"}, {"name": "start_step", "value": "2"}],
        },
    )
    world = World(exp)
    world.step()
    world.step()
    for loss in (0.4, 0.2):
        name = next(n for n, t in world.trials.items() if "status" not in t)
        world.finish(name, "Succeeded", loss)
        world.series[name] = [loss + 0.2, loss, loss - 0.1]
        world.step()
    rules = world.suggestion["status"]["suggestions"][-1].get("earlyStoppingRules")  # type: ignore[index]
    assert rules and rules[0]["name"] == "loss" and rules[0]["comparison"] == "greater"
    assert rules[0]["startStep"] == 2
    # The median of the running averages over the first 2 values: (0.6+0.4)/2=0.5 and (0.4+0.2)/2=0.3.
    assert abs(float(rules[0]["value"]) - 0.4) < 1e-9
    assert world.suggestion["status"]["suggestions"][0].get("earlyStoppingRules") is None  # type: ignore[index]


def test_without_random_state_each_experiment_draws_its_own_points() -> None:
    worlds = []
    for uid in ("uid-a", "uid-a", "uid-b"):
        exp = experiment(algorithm={"algorithmName": "random"})
        exp["metadata"]["uid"] = uid
        world = World(exp)
        world.step()
        world.step()
        worlds.append(assigned(world))
    assert worlds[0] == worlds[1] and worlds[0] != worlds[2]


def test_a_finished_experiment_marks_its_suggestion_succeeded_unless_long_running() -> None:
    def suggestion_conditions(world: World) -> dict[str, str]:
        assert world.suggestion is not None
        return {c["type"]: c["status"] for c in world.suggestion["status"]["conditions"]}

    never = _finished_world("Never")
    never.step()
    assert suggestion_conditions(never) == {"Created": "True", "Running": "False", "Succeeded": "True"}
    assert never.suggestion["status"]["conditions"][-1]["reason"] == "Experiment is succeeded"  # type: ignore[index]
    assert reconcile(never.observed()).suggestion_status is None  # once
    long_running = _finished_world("LongRunning")
    long_running.step()
    assert suggestion_conditions(long_running)["Running"] == "True"
    assert "Succeeded" not in suggestion_conditions(long_running)


def test_from_volume_restarts_its_succeeded_suggestion() -> None:
    world = _finished_world("FromVolume")
    world.step()
    assert world.suggestion["status"]["conditions"][-1]["type"] == "Succeeded"  # type: ignore[index]
    world.experiment["spec"]["maxTrialCount"] = 3
    for _ in range(3):
        world.step()
    assert len(world.trials) == 3
    conditions = {c["type"]: c["status"] for c in world.suggestion["status"]["conditions"]}  # type: ignore[index]
    assert conditions["Running"] == "True" and conditions["Succeeded"] == "False"
