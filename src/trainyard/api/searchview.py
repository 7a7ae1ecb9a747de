"""How a search job's trials read: the ``SearchView`` a family of hyperparameter searches carries.

A search job (Katib's Experiment, Trainer's OptimizationJob) is a job of jobs: its page shows its
trials (their parameters, states and objective values, the best one), and each trial's curve of
the objective metric. Each such family's ``JobView.search`` says how to read them, so the
dashboard names no kind: which objects the trials are, when they are objects of their own that the
search job owns (Katib's Trials), and a pure reading of the job and those objects into ``Trials``.
A trial's curve comes from its own object when that holds the values reported (a Trial's
``status.observationLog``), else from its job's recorded training points (``TrialRow.job``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from trainyard.api.meta import Obj

MINIMIZE = "minimize"
MAXIMIZE = "maximize"


@dataclass(frozen=True)
class TrialJob:
    """The job a trial runs, by kind and name (in the search job's namespace)."""

    kind: str
    name: str


@dataclass(frozen=True)
class TrialRow:
    name: str
    state: str
    parameters: Mapping[str, str] = field(default_factory=dict)
    value: float | None = None
    """The objective's value as the search counts it (the metric strategy's), None before it is known."""
    message: str = ""
    job: TrialJob | None = None
    curve: tuple[float, ...] | None = None
    """The objective's values in report order, when the trial's object holds them; None: its job's
    recorded training points are its curve."""


@dataclass(frozen=True)
class Trials:
    metric: str
    """The objective metric's name."""
    goal: str
    """``MINIMIZE`` or ``MAXIMIZE``."""
    parameters: tuple[str, ...]
    """The parameters' names, in the spec's order."""
    best: str | None
    """The best trial's name, as the search's status names it."""
    rows: tuple[TrialRow, ...]
    """In the order the trials were made."""


@dataclass(frozen=True)
class TrialKind:
    """The objects a search's trials are, owned (as controller) by the search job."""

    group: str
    version: str
    kind: str
    plural: str


@dataclass(frozen=True)
class SearchView:
    read: Callable[[Obj, Sequence[Obj]], Trials]
    """The search job and the ``trial_kind`` objects it owns (none without one) → its trials."""
    best: Callable[[Obj], Mapping[str, float]]
    """The best objective value so far, by metric name, from the job alone (the jobs list's cell)."""
    trial_kind: TrialKind | None = None
    """None: the trials are read from the search job's status alone."""


def number(value: object) -> float | None:
    """A value as a chart draws it: a finite number, or a string that reads as one; else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None
