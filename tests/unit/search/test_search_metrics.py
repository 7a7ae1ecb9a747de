"""Katib's metric formats (StdOut/File TEXT with its default regex, File JSON) and the observation."""

from __future__ import annotations

import pytest

from trainyard.api.katib import DEFAULT_FILTER
from trainyard.controller.search import Direction, MetricValue
from trainyard.controller.search.metrics import (
    best,
    check_filters,
    objective_value,
    observation,
    parse_json,
    parse_text,
)


def test_katibs_default_format_in_a_training_log() -> None:
    lines = [
        "epoch 1: loss=0.35 accuracy=0.9",
        "2026-01-01T00:00:00Z loss=1e-3",
        "2026-01-01T00:00:01.123456789+02:00 loss = -7.53E+05 val-accuracy=.98",
        "loss=nan accuracy=",
        "progress 3/10 lr=0.1",
        "no metrics here",
    ]
    got = parse_text(lines, ["loss", "accuracy", "val-accuracy"])
    assert got == [
        MetricValue("loss", 0.35),
        MetricValue("accuracy", 0.9),
        MetricValue("loss", 1e-3, "2026-01-01T00:00:00Z"),
        MetricValue("loss", -7.53e5, "2026-01-01T00:00:01.123456789+02:00"),
        MetricValue("val-accuracy", 0.98, "2026-01-01T00:00:01.123456789+02:00"),
    ]


def test_a_first_word_that_is_not_rfc3339_is_no_timestamp() -> None:
    assert parse_text(["2026-01-01 loss=1"], ["loss"]) == [MetricValue("loss", 1.0)]
    assert parse_text(["2026-01-01T00:00:00Z"], ["loss"]) == []


def test_custom_filters_are_katibs_metrics_format() -> None:
    lines = ["{metricName: accuracy, metricValue: 0.8}", "accuracy=0.1"]
    got = parse_text(lines, ["accuracy"], [r"{metricName: ([\w|-]+), metricValue: ((-?\d+)(\.\d+)?)}"])
    assert got == [MetricValue("accuracy", 0.8)]
    assert parse_text(["accuracy=0.1"], ["accuracy"], []) == [MetricValue("accuracy", 0.1)]


def test_check_filters() -> None:
    assert check_filters([DEFAULT_FILTER]) == []
    assert check_filters(["(unclosed", r"(\w+)=\d+"]) == [
        ("[0]", "'(unclosed' is not a regular expression: missing ), unterminated subpattern at position 0"),
        ("[1]", "'(\\\\w+)=\\\\d+' must have two groups: the metric's name, then its value"),
    ]


def test_the_json_format() -> None:
    lines = [
        '{"loss": "0.5", "accuracy": "0.7", "timestamp": "2026-01-01T00:00:00Z"}',
        '{"loss": 0.25, "timestamp": 1767225601.5}',
        "",
        "a print from the script",
        '{"loss": true, "other": "1"}',
    ]
    assert parse_json(lines, ["loss", "accuracy"]) == [
        MetricValue("loss", 0.5, "2026-01-01T00:00:00Z"),
        MetricValue("accuracy", 0.7, "2026-01-01T00:00:00Z"),
        MetricValue("loss", 0.25, "2026-01-01T00:00:01.5Z"),
    ]


def test_observation_as_katibs_trial_controller_writes_it() -> None:
    values = [
        MetricValue("loss", 0.5),
        MetricValue("loss", 0.2),
        MetricValue("loss", 0.3),
        MetricValue("accuracy", 3.0),
        MetricValue("ignored", 1.0),
    ]
    assert observation(values, ["loss", "accuracy", "f1"]) == {
        "metrics": [
            {"name": "loss", "min": "0.2", "max": "0.5", "latest": "0.3"},
            {"name": "accuracy", "min": "3", "max": "3", "latest": "3"},
            {"name": "f1", "min": "unavailable", "max": "unavailable", "latest": "unavailable"},
        ]
    }


def test_latest_is_the_newest_timestamp() -> None:
    values = [
        MetricValue("loss", 0.1, "2026-01-01T00:00:05Z"),
        MetricValue("loss", 0.2, "2026-01-01T00:00:01Z"),
        MetricValue("loss", 0.3),
    ]
    assert observation(values, ["loss"])["metrics"][0]["latest"] == "0.1"


def test_objective_value_by_strategy() -> None:
    obs = observation([MetricValue("loss", 0.5), MetricValue("loss", 0.2), MetricValue("loss", 0.3)], ["loss", "acc"])
    assert objective_value(obs, "loss", "min") == 0.2
    assert objective_value(obs, "loss", "max") == 0.5
    assert objective_value(obs, "loss", "latest") == 0.3
    assert objective_value(obs, "acc", "latest") is None
    assert objective_value(obs, "f1", "latest") is None
    assert objective_value({}, "loss") is None
    with pytest.raises(ValueError, match="metric strategy 'avg'"):
        objective_value(obs, "loss", "avg")


def test_best_is_the_first_of_the_best() -> None:
    trials = [("a", 0.5), ("b", None), ("c", 0.9), ("d", 0.9), ("e", 0.1)]
    assert best(trials, Direction.MAXIMIZE) == 2
    assert best(trials, Direction.MINIMIZE) == 4
    assert best([("a", None)], Direction.MINIMIZE) is None
    assert best([], Direction.MINIMIZE) is None
