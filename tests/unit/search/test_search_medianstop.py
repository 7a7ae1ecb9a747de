"""Katib's medianstop: the rule from succeeded trials, and the collector's check of a running trial."""

from __future__ import annotations

import pytest

from trainyard.controller.search import Direction, EarlyStoppingRule
from trainyard.controller.search.medianstop import breaks, check, rule

# Three succeeded trials; their first four (start_step) accuracies average 0.5, 0.6 and 0.7.
COMPLETED = [
    [0.2, 0.4, 0.6, 0.8, 0.95],
    [0.3, 0.5, 0.7, 0.9],
    [0.4, 0.6, 0.8, 1.0, 1.0, 1.0],
]


def test_the_rule_is_the_mean_of_the_first_start_step_averages() -> None:
    got = rule("accuracy", Direction.MAXIMIZE, COMPLETED, {})
    assert got is not None
    assert got.name == "accuracy"
    assert got.value == pytest.approx((0.5 + 0.6 + 0.7) / 3)
    assert got.comparison == "less"
    assert got.start_step == 4


def test_minimize_stops_above_and_settings_change_the_window() -> None:
    got = rule("loss", Direction.MINIMIZE, COMPLETED, {"start_step": "2", "min_trials_required": "2"})
    mean = pytest.approx((0.3 + 0.4 + 0.5) / 3)
    assert got == EarlyStoppingRule(name="loss", value=mean, comparison="greater", start_step=2)


def test_no_rule_before_min_trials_required_succeeded() -> None:
    assert rule("accuracy", Direction.MAXIMIZE, COMPLETED[:2], {}) is None
    assert rule("accuracy", Direction.MAXIMIZE, [*COMPLETED[:2], []], {}) is None
    assert rule("accuracy", Direction.MAXIMIZE, COMPLETED[:2], {"min_trials_required": "2"}) is not None


def test_a_trial_breaks_the_rule_when_its_best_after_start_step_reports_is_worse() -> None:
    median = EarlyStoppingRule(name="accuracy", value=0.6, comparison="less", start_step=4)
    assert not breaks(median, [0.1, 0.2, 0.3])  # too early to judge
    assert breaks(median, [0.1, 0.2, 0.3, 0.4])
    assert breaks(median, [0.1, 0.2, 0.3, 0.4, 0.9])  # judged at report 4: stopped there
    # Its best so far counts, not its last value: 0.7 at report 2 keeps it going.
    assert not breaks(median, [0.1, 0.7, 0.3, 0.2])
    assert not breaks(median, [0.5, 0.55, 0.6, 0.6, 0.1])


def test_a_minimized_objective_breaks_above() -> None:
    median = EarlyStoppingRule(name="loss", value=1.0, comparison="greater", start_step=2)
    assert breaks(median, [3.0, 2.0])
    assert not breaks(median, [3.0, 0.5])
    assert not breaks(median, [0.9, 5.0, 5.0])


def test_without_start_step_every_report_is_judged() -> None:
    rule_ = EarlyStoppingRule(name="loss", value=1.0, comparison="greater")
    assert breaks(rule_, [2.0])
    assert not breaks(rule_, [])
    equal = EarlyStoppingRule(name="epoch", value=3.0, comparison="equal")
    assert breaks(equal, [1.0, 2.0, 3.0])
    assert not breaks(equal, [1.0, 2.0])


def test_check_refuses_what_katibs_service_refuses() -> None:
    assert check({"min_trials_required": "2", "start_step": "1"}) == []
    known = "known: min_trials_required, start_step"
    assert check({"min_trials_required": "0", "start_step": "0", "window": "3", "x": "y"}) == [
        ("algorithmSettings[0].value", "min_trials_required must be greater than zero (>0)"),
        ("algorithmSettings[1].value", "start_step must be greater or equal than one (>=1)"),
        ("algorithmSettings[2].name", f"unknown setting 'window' for algorithm medianstop; {known}"),
        ("algorithmSettings[3].name", f"unknown setting 'x' for algorithm medianstop; {known}"),
    ]
    assert check({"start_step": "two"}) == [("algorithmSettings[0].value", "start_step='two': must be a whole number")]
