"""Suggestions: the next parameter sets of a search, asked of Optuna from the trials so far.

``suggest`` is a pure function of the space, the algorithm, the direction and the history: it builds
an in-memory Optuna study, replays every past trial into it (complete, failed, pruned and still
running ones, so a running trial's point counts as taken), asks for ``count`` new ones and keeps
nothing. That makes a search resumable: a controller that restarts mid-way passes the same history
and gets the suggestions it would have got without the restart. Every random draw is seeded from the
search's seed (``Algorithm.seed``, else Katib's ``random_state`` setting, else 0) and the suggestion's
index, so for random and grid suggestion *i* is the same whether suggestions come one call at a time
or many at once; tpe and cmaes learn from the history, which decides theirs.

The algorithms and settings are those of Katib's optuna suggestion service (``OptimizerConfiguration``);
``check`` refuses what that service would refuse, as field errors under ``spec.algorithm``.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import re
import threading
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.samplers import BaseSampler, CmaEsSampler, GridSampler, RandomSampler, TPESampler
from optuna.study import Study
from optuna.trial import FrozenTrial

from trainyard.controller.search import Algorithm, Direction, Parameter, ParameterKind, PastTrial, Suggested, TrialState
from trainyard.controller.search.space import MAX_GRID_POINTS, Value, distributions, format_value, grid, parse_value

RANDOM = "random"
GRID = "grid"
TPE = "tpe"
MULTIVARIATE_TPE = "multivariate-tpe"
CMAES = "cmaes"
ALGORITHMS = (RANDOM, GRID, TPE, MULTIVARIATE_TPE, CMAES)

# Katib's settings per algorithm (OptimizerConfiguration.__conversion_dict and its validators).
_SETTINGS: dict[str, tuple[str, ...]] = {
    RANDOM: ("random_state",),
    GRID: ("random_state",),
    TPE: ("n_startup_trials", "n_ei_candidates", "random_state"),
    MULTIVARIATE_TPE: ("n_startup_trials", "n_ei_candidates", "random_state"),
    CMAES: ("restart_strategy", "sigma", "random_state"),
}
_RESTART_STRATEGIES = ("ipop", "None", "none")


def check(algorithm: Algorithm, space: Sequence[Parameter], max_trials: int | None = None) -> list[tuple[str, str]]:
    """What Katib's ``ValidateAlgorithmSettings`` refuses: ``(path under spec.algorithm, message)``.

    Problems of the space that only this algorithm has (grid without steps, cmaes in one dimension)
    are reported at ``algorithmName``. ``max_trials``: the Experiment's ``maxTrialCount``, which a
    grid must be able to fill.
    """
    if algorithm.name not in _SETTINGS:
        return [("algorithmName", f"unknown algorithm name {algorithm.name!r}; supported: {', '.join(ALGORITHMS)}")]
    problems: list[tuple[str, str]] = []
    known = _SETTINGS[algorithm.name]
    for i, (name, value) in enumerate(algorithm.settings.items()):
        at = f"algorithmSettings[{i}]"
        if name not in known:
            problems.append(
                (f"{at}.name", f"unknown setting {name!r} for algorithm {algorithm.name}; known: {', '.join(known)}")
            )
            continue
        message = _setting_problem(name, value)
        if message:
            problems.append((f"{at}.value", f"{name}={value!r}: {message}"))
    if algorithm.name == CMAES:
        continuous = sum(p.kind in (ParameterKind.DOUBLE, ParameterKind.INT) for p in space)
        if continuous < 2:
            problems.append(
                ("algorithmName", "cmaes only supports two or more dimensional continuous search space; use tpe")
            )
    if algorithm.name == GRID:
        try:
            points = _grid_size(space)
        except ValueError as e:
            problems.append(("algorithmName", str(e)))
        else:
            if max_trials is not None and max_trials > points:
                problems.append(
                    ("algorithmName", f"Max Trial Count: {max_trials} > all possible search combinations: {points}")
                )
    return problems


def suggest(
    space: Sequence[Parameter],
    algorithm: Algorithm,
    direction: Direction,
    history: Sequence[PastTrial],
    count: int,
) -> Suggested:
    """``count`` new parameter sets after ``history`` (in suggestion order), as strings.

    Raises ``ValueError`` for what ``check`` reports. A grid returns fewer, with ``exhausted``, once
    every point is taken.
    """
    problems = check(algorithm, space)
    if problems:
        raise ValueError("; ".join(f"spec.algorithm.{path}: {message}" for path, message in problems))
    seed = _base_seed(algorithm)
    fixed = distributions(space)
    with _quiet():
        if algorithm.name == GRID:
            return _suggest_grid(space, fixed, seed, direction, history, count)
        sampler = _sampler(algorithm, seed, index=len(history))
        study = optuna.create_study(direction=direction.value, sampler=sampler)
        if algorithm.name == CMAES:
            # CMA-ES keeps its state in the system attributes of the trials it sampled: the history
            # is replayed through it, one ask and tell per trial, so its generations are rebuilt.
            _replay_asked(study, space, fixed, history)
        else:
            _replay_added(study, space, fixed, history)
        out: list[Mapping[str, str]] = []
        for k in range(count):
            if algorithm.name in (TPE, MULTIVARIATE_TPE):
                study.sampler = _sampler(algorithm, seed, index=len(history) + k)
            trial = study.ask(fixed_distributions=fixed)
            out.append(_assignments(space, trial.params))
    return Suggested(assignments=tuple(out))


def seed_of(uid: str) -> int:
    """The seed of a search that names none: its object's uid's, so each search draws its own
    sequence, the same on every pass (and after a restart)."""
    return int(hashlib.sha256(uid.encode()).hexdigest()[:8], 16)


def trial_name(experiment: str, uid: str, index: int) -> str:
    """A trial's name, Katib's shape ``<experiment>-<8 lowercase letters and digits>``, from the owner's
    uid and the suggestion index (so a restarted controller names a trial as it did before)."""
    digest = int.from_bytes(hashlib.sha256(f"{uid}/{index}".encode()).digest()[:8], "big")
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
    suffix = ""
    for _ in range(8):
        digest, r = divmod(digest, len(alphabet))
        suffix += alphabet[r]
    prefix = re.sub(r"[^a-z0-9-]", "-", experiment.lower())[: 63 - 1 - len(suffix)].strip("-")
    return f"{prefix}-{suffix}" if prefix else suffix


def grid_size(space: Sequence[Parameter]) -> int:
    """How many points a grid search over ``space`` has; ``ValueError`` when it has no grid."""
    return _grid_size(space)


def _grid_size(space: Sequence[Parameter]) -> int:
    return math.prod(len(grid(p)) for p in space)


def _setting_problem(name: str, value: str) -> str | None:
    if name == "restart_strategy":
        if value not in _RESTART_STRATEGIES:
            return f"restart_strategy {value} is not supported in CMAES optimization; use ipop or none"
        return None
    try:
        number = float(value) if name == "sigma" else int(value)
    except ValueError:
        return "must be a number" if name == "sigma" else "must be a whole number"
    if number < 0:
        return "must be greater than or equal to zero"
    if name == "n_ei_candidates" and number == 0:
        return "must be at least 1"
    return None


def _base_seed(algorithm: Algorithm) -> int:
    if algorithm.seed is not None:
        return algorithm.seed
    return int(algorithm.settings.get("random_state", 0))


def _draw_seed(*parts: object) -> int:
    """A seed for one draw: a hash, so nearby indices give unrelated streams."""
    text = "/".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


class _IndexSeededRandom(BaseSampler):
    """Optuna's RandomSampler, seeded per trial number and parameter: draw *i* is the same in any study
    that reaches trial *i*, however many asks it took to get there."""

    def __init__(self, seed: int) -> None:
        self._seed = seed

    def infer_relative_search_space(self, study: Study, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self, study: Study, trial: FrozenTrial, param_name: str, param_distribution: BaseDistribution
    ) -> Any:
        draw = RandomSampler(seed=_draw_seed(self._seed, trial.number, param_name))
        return draw.sample_independent(study, trial, param_name, param_distribution)


def _sampler(algorithm: Algorithm, seed: int, index: int) -> BaseSampler:
    settings = algorithm.settings
    if algorithm.name in (TPE, MULTIVARIATE_TPE):
        return TPESampler(
            seed=_draw_seed(seed, index),
            n_startup_trials=int(settings.get("n_startup_trials", 10)),
            n_ei_candidates=int(settings.get("n_ei_candidates", 24)),
            # Optuna 5 makes single-objective TPE multivariate by default: say which one Katib meant.
            multivariate=algorithm.name == MULTIVARIATE_TPE,
            # Katib sets it: a running trial's point is a guess at its outcome, not a free spot.
            constant_liar=True,
        )
    if algorithm.name == CMAES:
        # restart_strategy is accepted for Katib's Experiments and not passed: Optuna 4.4 dropped it
        # (it falls back to no restarts, with a warning).
        sigma = settings.get("sigma")
        return CmaEsSampler(
            seed=seed,
            sigma0=float(sigma) if sigma is not None else None,
            independent_sampler=_IndexSeededRandom(seed),
            warn_independent_sampling=False,
        )
    return _IndexSeededRandom(seed)


def _suggest_grid(
    space: Sequence[Parameter],
    fixed: dict[str, BaseDistribution],
    seed: int,
    direction: Direction,
    history: Sequence[PastTrial],
    count: int,
) -> Suggested:
    """Optuna's GridSampler, shuffled once by the search's seed (as Katib's is): its trial *n* takes
    the shuffled grid's point *n*, so suggestion *i* is point *i*. A point the history already holds
    (a history not written by this function) is replaced by the first free point in grid order."""
    points = {p.name: list(grid(p)) for p in space}
    total = math.prod(len(v) for v in points.values())
    if total > MAX_GRID_POINTS:
        raise ValueError(f"the grid has {total} points; at most {MAX_GRID_POINTS}")
    taken = {_key(space, t.assignments) for t in history}
    study = optuna.create_study(direction=direction.value, sampler=GridSampler(points, seed=seed))
    _replay_added(study, space, fixed, history)
    out: list[Mapping[str, str]] = []
    for _ in range(count):
        if len(taken) >= total:
            break
        trial = study.ask(fixed_distributions=fixed)
        chosen = _assignments(space, trial.params)
        if _key(space, chosen) in taken:
            chosen = next(
                a
                for a in (
                    {p.name: format_value(p, v) for p, v in zip(space, combo, strict=True)}
                    for combo in itertools.product(*(points[p.name] for p in space))
                )
                if _key(space, a) not in taken
            )
        taken.add(_key(space, chosen))
        out.append(chosen)
    return Suggested(assignments=tuple(out), exhausted=len(taken) >= total)


def _replay_added(
    study: Study, space: Sequence[Parameter], fixed: dict[str, BaseDistribution], history: Sequence[PastTrial]
) -> None:
    """Each past trial as a finished (or running) Optuna trial; trial numbers are history indices."""
    for past in history:
        params = _params(space, past.assignments)
        state, value = _state(past)
        if params is None:
            # Unreadable assignments still take their index, so later trial numbers stay put.
            study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL))
            continue
        pruned = state is optuna.trial.TrialState.PRUNED
        study.add_trial(
            optuna.trial.create_trial(
                state=state,
                value=value if state is optuna.trial.TrialState.COMPLETE else None,
                params=params,
                distributions=fixed,
                # A pruned trial's last value: TPE weighs pruned trials by it.
                intermediate_values={0: value} if pruned and value is not None else None,
            )
        )


def _replay_asked(
    study: Study, space: Sequence[Parameter], fixed: dict[str, BaseDistribution], history: Sequence[PastTrial]
) -> None:
    for past in history:
        params = _params(space, past.assignments)
        if params is not None:
            study.enqueue_trial(params, skip_if_exists=False)
        trial = study.ask(fixed_distributions=fixed if params is not None else {})
        state, value = _state(past)
        if params is None or state is optuna.trial.TrialState.FAIL:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        elif state is optuna.trial.TrialState.COMPLETE:
            study.tell(trial, value)
        elif state is optuna.trial.TrialState.PRUNED:
            if value is not None:
                trial.report(value, 0)
            study.tell(trial, state=optuna.trial.TrialState.PRUNED)


def _state(past: PastTrial) -> tuple[optuna.trial.TrialState, float | None]:
    value = past.value if past.value is not None and math.isfinite(past.value) else None
    if past.state is TrialState.RUNNING:
        return optuna.trial.TrialState.RUNNING, None
    if past.state is TrialState.COMPLETE:
        # A trial that finished without its objective taught nothing: Optuna counts it failed.
        return (optuna.trial.TrialState.COMPLETE, value) if value is not None else (optuna.trial.TrialState.FAIL, None)
    if past.state is TrialState.PRUNED:
        return optuna.trial.TrialState.PRUNED, value
    return optuna.trial.TrialState.FAIL, None


def _params(space: Sequence[Parameter], assignments: Mapping[str, str]) -> dict[str, Value] | None:
    try:
        return {p.name: parse_value(p, assignments[p.name]) for p in space}
    except (KeyError, ValueError):
        return None


def _assignments(space: Sequence[Parameter], params: Mapping[str, Any]) -> dict[str, str]:
    return {p.name: format_value(p, params[p.name]) for p in space}


def _key(space: Sequence[Parameter], assignments: Mapping[str, str]) -> tuple[str, ...]:
    """Assignments compared as values, so "3" and "3.0" of an int, or "0.30000000000000004" and "0.3"
    of a stepped double, are one point."""
    key: list[str] = []
    for p in space:
        text = assignments.get(p.name, "")
        try:
            key.append(format_value(p, parse_value(p, text)))
        except ValueError:
            key.append(text)
    return tuple(key)


_quiet_lock = threading.RLock()


@contextmanager
def _quiet() -> Iterator[None]:
    """Optuna logs every study and trial at INFO and warns that some samplers are experimental; a
    controller asks many times a minute. Silenced for the call only, the logger level restored."""
    logger = logging.getLogger("optuna")
    with _quiet_lock, warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        level = logger.level
        logger.setLevel(logging.WARNING)
        try:
            yield
        finally:
            logger.setLevel(level)
