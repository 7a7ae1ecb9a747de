"""Katib's ``medianstop`` early stopping: the rule a new trial runs under, and whether a trial breaks it.

Katib's service (``pkg/earlystopping/v1beta1/medianstop/service.py``) averages each succeeded trial's
first ``start_step`` objective values, and once ``min_trials_required`` trials have succeeded hands
every new trial a rule: stop when the objective, after ``start_step`` reports, is worse than the
average of those averages. (Katib calls it the median; it computes the mean, and so does this
module, so an Experiment stops the trials it stopped under Katib.) Katib's metrics collector applies
the rule (``updateStopRules`` in ``cmd/metricscollector/v1beta1/file-metricscollector``); ``breaks``
is that check over a trial's series so far.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.controller.search import Direction, EarlyStoppingRule

NAME = "medianstop"
MIN_TRIALS_REQUIRED = 3
START_STEP = 4

LESS = "less"
GREATER = "greater"
EQUAL = "equal"


def check(settings: Mapping[str, str]) -> list[tuple[str, str]]:
    """What Katib's ``validate_medianstop_setting`` refuses: ``(path under spec.earlyStopping, message)``."""
    problems: list[tuple[str, str]] = []
    for i, (name, value) in enumerate(settings.items()):
        at = f"algorithmSettings[{i}]"
        if name not in ("min_trials_required", "start_step"):
            known = "min_trials_required, start_step"
            problems.append((f"{at}.name", f"unknown setting {name!r} for algorithm medianstop; known: {known}"))
            continue
        try:
            number = int(value)
        except ValueError:
            problems.append((f"{at}.value", f"{name}={value!r}: must be a whole number"))
            continue
        if name == "min_trials_required" and number <= 0:
            problems.append((f"{at}.value", "min_trials_required must be greater than zero (>0)"))
        if name == "start_step" and number < 1:
            problems.append((f"{at}.value", "start_step must be greater or equal than one (>=1)"))
    return problems


def rule(
    objective: str,
    direction: Direction,
    completed: Sequence[Sequence[float]],
    settings: Mapping[str, str],
) -> EarlyStoppingRule | None:
    """The rule for trials started now, from the objective series of the succeeded trials (each in
    report order); None until ``min_trials_required`` of them reported a value."""
    min_trials = int(settings.get("min_trials_required", MIN_TRIALS_REQUIRED))
    start_step = int(settings.get("start_step", START_STEP))
    averages = [sum(s[:start_step]) / len(s[:start_step]) for s in completed if len(s) > 0]
    if len(averages) < min_trials:
        return None
    return EarlyStoppingRule(
        name=objective,
        value=sum(averages) / len(averages),
        # A maximized objective is stopped below the rule's value, a minimized one above it.
        comparison=LESS if direction is Direction.MAXIMIZE else GREATER,
        start_step=start_step,
    )


def breaks(rule: EarlyStoppingRule, values: Sequence[float], direction: Direction | None = None) -> bool:
    """Whether a trial whose metric reported ``values`` (in order) is stopped by ``rule``.

    As Katib's collector: the objective is judged by its best value so far (``direction``; for a rule
    of medianstop's own, ``less`` means maximize and ``greater`` minimize), and a rule with a
    ``start_step`` is judged once, at that report. Pass ``direction`` for another metric's rule only
    when it is the objective; a ``equal`` rule without one compares the raw values.
    """
    if direction is None and rule.comparison == LESS:
        direction = Direction.MAXIMIZE
    elif direction is None and rule.comparison == GREATER:
        direction = Direction.MINIMIZE
    best: float | None = None
    for step, value in enumerate(values, start=1):
        if direction is None or best is None:
            best = value
        elif direction is Direction.MAXIMIZE:
            best = max(best, value)
        else:
            best = min(best, value)
        if rule.start_step and step != rule.start_step:
            continue
        if _meets(best, rule):
            return True
        if rule.start_step:
            return False
    return False


def _meets(value: float, rule: EarlyStoppingRule) -> bool:
    if rule.comparison == LESS:
        return value < rule.value
    if rule.comparison == GREATER:
        return value > rule.value
    return value == rule.value
