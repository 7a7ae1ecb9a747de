"""Hyperparameter search, pure: parameters, suggestions, early-stopping rules and metric reading.

Shared by the two APIs that ask for a search, Katib's Experiment (``kubeflow.org/v1beta1``) and
Kubeflow Trainer's OptimizationJob (``trainer.kubeflow.org/v1alpha1``): each controller translates its
spec into these values, and its trials' history into ``PastTrial`` rows, and asks the functions of the
submodules. Nothing here reads the clock, the API or a file; the search itself is Optuna's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class ParameterKind(StrEnum):
    """Katib's ``parameterType`` values; OptimizationJob's spaces map onto them (uniform Int is int)."""

    DOUBLE = "double"
    INT = "int"
    CATEGORICAL = "categorical"
    DISCRETE = "discrete"


@dataclass(frozen=True)
class Parameter:
    """One searched parameter. Values travel as strings, as both APIs carry them."""

    name: str
    kind: ParameterKind
    low: float | None = None
    high: float | None = None
    step: float | None = None
    """Katib's ``feasibleSpace.step``: the grid's spacing for double/int, Optuna's ``step``."""
    choices: tuple[str, ...] = ()
    """categorical and discrete: the values, as written (discrete ones are numbers)."""
    log: bool = False
    """``distribution: logUniform`` (Katib) or ``logUniform`` (OptimizationJob)."""


class Direction(StrEnum):
    MINIMIZE = "minimize"
    MAXIMIZE = "maximize"


@dataclass(frozen=True)
class Algorithm:
    name: str
    """random, grid, tpe, multivariate-tpe, cmaes (Katib's ``algorithmName``)."""
    settings: Mapping[str, str] = field(default_factory=dict)
    """Katib's ``algorithmSettings`` (``random_state``, ``n_startup_trials``, ``sigma``...)."""
    seed: int | None = None
    """Makes a search repeatable; None: the suggestion index alone seeds each draw."""


class TrialState(StrEnum):
    RUNNING = "running"
    """Suggested and not finished: its parameters count as taken."""
    COMPLETE = "complete"
    FAILED = "failed"
    PRUNED = "pruned"
    """Stopped early (medianstop): its last value is known, it never finished."""


@dataclass(frozen=True)
class PastTrial:
    """One trial already suggested, in suggestion order (its index is its place in the history)."""

    assignments: Mapping[str, str]
    state: TrialState
    value: float | None = None
    """The objective's value (by its metric strategy) once complete or pruned."""


@dataclass(frozen=True)
class Suggested:
    assignments: tuple[Mapping[str, str], ...]
    """New parameter sets, as many as asked unless the space ran out."""
    exhausted: bool = False
    """The algorithm has nothing more to suggest (a grid fully taken)."""


@dataclass(frozen=True)
class EarlyStoppingRule:
    """Katib's ``EarlyStoppingRule``: stop a trial whose metric ``comparison`` ``value`` after ``start_step``."""

    name: str
    value: float
    comparison: str
    """``less``, ``greater`` or ``equal``, as Katib writes it."""
    start_step: int = 0


@dataclass(frozen=True)
class MetricValue:
    """One reported value of one metric, in report order."""

    name: str
    value: float
    timestamp: str | None = None
