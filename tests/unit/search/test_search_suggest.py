"""Suggestions by real Optuna: deterministic, resumable, a grid that runs out, TPE that learns."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Callable, Mapping

import pytest

from trainyard.controller.search import Algorithm, Direction, Parameter, ParameterKind, PastTrial, TrialState
from trainyard.controller.search.space import from_katib
from trainyard.controller.search.suggest import check, grid_size, suggest, trial_name

SPACE = from_katib(
    [
        {
            "name": "lr",
            "parameterType": "double",
            "feasibleSpace": {"min": "0.0001", "max": "0.1", "distribution": "logUniform"},
        },
        {"name": "units", "parameterType": "int", "feasibleSpace": {"min": "8", "max": "64", "step": "8"}},
        {"name": "optimizer", "parameterType": "categorical", "feasibleSpace": {"list": ["sgd", "adam", "rmsprop"]}},
        {"name": "dropout", "parameterType": "discrete", "feasibleSpace": {"list": ["0.1", "0.3", "0.5"]}},
    ]
)
GRID_SPACE = from_katib(
    [
        {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "0.1", "max": "0.3", "step": "0.1"}},
        {"name": "n", "parameterType": "int", "feasibleSpace": {"min": "1", "max": "2"}},
        {"name": "c", "parameterType": "categorical", "feasibleSpace": {"list": ["a", "b"]}},
    ]
)
PLANE = from_katib(
    [
        {"name": "x", "parameterType": "double", "feasibleSpace": {"min": "-5", "max": "5"}},
        {"name": "y", "parameterType": "double", "feasibleSpace": {"min": "-5", "max": "5"}},
    ]
)


def quadratic(a: Mapping[str, str]) -> float:
    return (float(a["x"]) - 1) ** 2 + (float(a["y"]) + 2) ** 2


def done(assignments: tuple[Mapping[str, str], ...], score: Callable[[Mapping[str, str]], float]) -> list[PastTrial]:
    return [PastTrial(a, TrialState.COMPLETE, score(a)) for a in assignments]


def running(assignments: tuple[Mapping[str, str], ...]) -> list[PastTrial]:
    return [PastTrial(a, TrialState.RUNNING) for a in assignments]


def lr_score(a: Mapping[str, str]) -> float:
    return abs(math.log10(float(a["lr"])) + 2) + int(a["units"]) / 64


@pytest.mark.parametrize("name", ["random", "grid", "tpe", "multivariate-tpe"])
def test_five_at_once_are_two_then_three(name: str) -> None:
    """A controller that asked for two, restarted, and asked for three more gets what one ask of five
    would have given: the suggestion index, not the call, seeds each draw."""
    space = GRID_SPACE if name == "grid" else SPACE
    algorithm = Algorithm(name, {"n_startup_trials": "3"} if "tpe" in name else {}, seed=7)
    # Past TPE's startup trials, so TPE's model (not its random start) makes these suggestions.
    before = [] if name == "grid" else done(suggest(space, algorithm, Direction.MINIMIZE, [], 4).assignments, lr_score)
    five = suggest(space, algorithm, Direction.MINIMIZE, before, 5)
    two = suggest(space, algorithm, Direction.MINIMIZE, before, 2)
    three = suggest(space, algorithm, Direction.MINIMIZE, before + running(two.assignments), 3)
    assert len(five.assignments) == 5
    assert two.assignments + three.assignments == five.assignments


@pytest.mark.parametrize("name", ["random", "grid", "tpe", "multivariate-tpe", "cmaes"])
def test_the_same_history_gives_the_same_suggestions(name: str) -> None:
    space = GRID_SPACE if name == "grid" else SPACE
    if name == "cmaes":
        space = PLANE
    algorithm = Algorithm(name, {"random_state": "3"})
    history = done(suggest(space, algorithm, Direction.MINIMIZE, [], 6).assignments, lambda a: float(len(str(a))))
    history[1] = PastTrial(history[1].assignments, TrialState.FAILED)
    history[2] = PastTrial(history[2].assignments, TrialState.PRUNED, 9.0)
    history[3] = PastTrial(history[3].assignments, TrialState.RUNNING)
    first = suggest(space, algorithm, Direction.MINIMIZE, history, 3)
    assert first == suggest(space, algorithm, Direction.MINIMIZE, history, 3)
    assert len(first.assignments) == 3


def test_seeds_differ_and_random_state_is_a_seed() -> None:
    a = suggest(SPACE, Algorithm("random", seed=1), Direction.MAXIMIZE, [], 3)
    b = suggest(SPACE, Algorithm("random", seed=2), Direction.MAXIMIZE, [], 3)
    c = suggest(SPACE, Algorithm("random", {"random_state": "1"}), Direction.MAXIMIZE, [], 3)
    assert a != b
    assert a == c


def test_values_stay_in_the_space_and_are_written_as_strings_katib_writes() -> None:
    got = suggest(SPACE, Algorithm("random"), Direction.MINIMIZE, [], 200).assignments
    lrs = [float(a["lr"]) for a in got]
    assert all(1e-4 <= x <= 0.1 for x in lrs)
    # Log-uniform: about as many draws in each decade (uniform would put ~90% in the top one).
    decades = [sum(10**-k <= x < 10 ** (-k + 1) for x in lrs) for k in (4, 3, 2)]
    assert min(decades) > 40, decades
    assert {a["units"] for a in got} <= {str(n) for n in range(8, 65, 8)}
    assert all(re.fullmatch(r"\d+", a["units"]) for a in got)
    assert {a["optimizer"] for a in got} == {"sgd", "adam", "rmsprop"}
    assert {a["dropout"] for a in got} == {"0.1", "0.3", "0.5"}


def test_a_grid_visits_every_point_once_then_is_exhausted() -> None:
    algorithm = Algorithm("grid")
    assert grid_size(GRID_SPACE) == 12
    history: list[PastTrial] = []
    seen: list[tuple[str, ...]] = []
    while True:
        got = suggest(GRID_SPACE, algorithm, Direction.MINIMIZE, history, 5)
        seen += [tuple(a.values()) for a in got.assignments]
        history += running(got.assignments)
        if got.exhausted:
            break
    assert len(seen) == 12
    assert len(set(seen)) == 12
    assert {s[0] for s in seen} == {"0.1", "0.2", "0.3"}
    after = suggest(GRID_SPACE, algorithm, Direction.MINIMIZE, history, 5)
    assert after.assignments == ()
    assert after.exhausted


def test_a_grid_skips_points_a_foreign_history_holds() -> None:
    """A history this function did not write (points out of its order) is never suggested again."""
    taken = [{"x": "0.1", "n": "1", "c": "a"}, {"x": "0.3", "n": "2", "c": "b"}, {"x": "0.2", "n": "1", "c": "b"}]
    history = [PastTrial(a, TrialState.FAILED) for a in taken]
    got = suggest(GRID_SPACE, Algorithm("grid"), Direction.MINIMIZE, history, 20)
    assert len(got.assignments) == 9
    assert got.exhausted
    assert not {tuple(a.items()) for a in got.assignments} & {tuple(a.items()) for a in taken}


def best_of(name: str, seed: int, budget: int = 30, parallel: int = 2) -> float:
    """A search as a controller runs one: ``parallel`` suggestions at a time, each finished before the next."""
    algorithm = Algorithm(name, {"n_startup_trials": "8"} if "tpe" in name else {}, seed=seed)
    history: list[PastTrial] = []
    while len(history) < budget:
        got = suggest(PLANE, algorithm, Direction.MINIMIZE, history, parallel)
        history += done(got.assignments, quadratic)
    return min(t.value for t in history if t.value is not None)


def test_tpe_beats_random_search_with_the_same_budget() -> None:
    """Over eight fixed seeds (the runs are deterministic: no flakiness), the median best of 30 trials
    on a 2-D quadratic: TPE below random search, multivariate TPE far below (it models x and y together)."""
    seeds = range(8)
    random_best = statistics.median(best_of("random", s) for s in seeds)
    tpe_best = statistics.median(best_of("tpe", s) for s in seeds)
    multivariate_best = statistics.median(best_of("multivariate-tpe", s) for s in seeds)
    assert tpe_best < random_best
    assert multivariate_best < random_best / 2


def test_cmaes_searches_the_plane() -> None:
    best = best_of("cmaes", seed=0, budget=30)
    assert best < 2.0


def test_maximize_means_higher_is_better() -> None:
    seeds = range(4)
    low = []
    for s in seeds:
        algorithm = Algorithm("multivariate-tpe", {"n_startup_trials": "8"}, seed=s)
        history: list[PastTrial] = []
        while len(history) < 24:
            got = suggest(PLANE, algorithm, Direction.MAXIMIZE, history, 2)
            history += done(got.assignments, lambda a: -quadratic(a))
        low.append(-max(t.value for t in history if t.value is not None))
    assert statistics.median(low) < 1.0


def test_check_refuses_what_katibs_optuna_service_refuses() -> None:
    assert check(Algorithm("tpe", {"n_startup_trials": "5", "n_ei_candidates": "10", "random_state": "1"}), SPACE) == []
    assert check(Algorithm("hyperband"), SPACE) == [
        ("algorithmName", "unknown algorithm name 'hyperband'; supported: random, grid, tpe, multivariate-tpe, cmaes")
    ]
    assert check(Algorithm("random", {"random_state": "-1", "sigma": "1"}), SPACE) == [
        ("algorithmSettings[0].value", "random_state='-1': must be greater than or equal to zero"),
        ("algorithmSettings[1].name", "unknown setting 'sigma' for algorithm random; known: random_state"),
    ]
    assert check(Algorithm("cmaes", {"restart_strategy": "bipop", "sigma": "x"}), PLANE) == [
        (
            "algorithmSettings[0].value",
            "restart_strategy='bipop': restart_strategy bipop is not supported in CMAES optimization; use ipop or none",
        ),
        ("algorithmSettings[1].value", "sigma='x': must be a number"),
    ]
    one_dimension = (Parameter("x", ParameterKind.DOUBLE, low=0, high=1),)
    assert "two or more dimensional" in check(Algorithm("cmaes"), one_dimension)[0][1]
    assert "needs feasibleSpace.step" in check(Algorithm("grid"), PLANE)[0][1]
    assert check(Algorithm("grid"), GRID_SPACE, max_trials=13) == [
        ("algorithmName", "Max Trial Count: 13 > all possible search combinations: 12")
    ]
    assert check(Algorithm("grid"), GRID_SPACE, max_trials=12) == []
    with pytest.raises(ValueError, match=r"spec.algorithm.algorithmName: unknown algorithm"):
        suggest(SPACE, Algorithm("bayesianoptimization"), Direction.MINIMIZE, [], 1)


def test_optuna_stays_quiet(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    suggest(PLANE, Algorithm("cmaes"), Direction.MINIMIZE, [], 2)
    suggest(PLANE, Algorithm("multivariate-tpe"), Direction.MINIMIZE, [], 2)
    assert [r for r in caplog.records if r.name.startswith("optuna")] == []


def test_trial_names_are_katibs_shape_deterministic_and_fit_a_label() -> None:
    name = trial_name("mnist-tpe", "5b3c", 0)
    assert re.fullmatch(r"mnist-tpe-[a-z0-9]{8}", name)
    assert name == trial_name("mnist-tpe", "5b3c", 0)
    assert name != trial_name("mnist-tpe", "5b3c", 1)
    assert name != trial_name("mnist-tpe", "other-uid", 0)
    long = trial_name("a" * 70, "u", 3)
    assert len(long) == 63
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", long)
