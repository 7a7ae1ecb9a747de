"""Search spaces from Katib's and OptimizationJob's specs: Optuna's distributions, the grid, the strings."""

from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from trainyard.controller.search import Parameter, ParameterKind
from trainyard.controller.search.space import (
    SpaceError,
    distributions,
    format_value,
    from_katib,
    from_optimizationjob,
    grid,
    parse_value,
)


def katib(name: str, kind: str, **space: object) -> dict[str, object]:
    return {"name": name, "parameterType": kind, "feasibleSpace": space}


def test_katib_kinds_become_parameters_and_optunas_distributions() -> None:
    space = from_katib(
        [
            katib("lr", "double", min="0.001", max="0.1", distribution="logUniform"),
            katib("momentum", "double", min="0.5", max="0.9", step="0.1"),
            katib("layers", "int", min="1", max="8", step="2"),
            katib("batch", "int", min="16", max="256", distribution="logUniform"),
            katib("optimizer", "categorical", list=["sgd", "adam"]),
            katib("dropout", "discrete", list=["0.1", "0.3"]),
        ]
    )
    assert space[0] == Parameter("lr", ParameterKind.DOUBLE, low=0.001, high=0.1, log=True)
    assert space[2] == Parameter("layers", ParameterKind.INT, low=1, high=8, step=2)
    got = distributions(space)
    assert got["lr"] == FloatDistribution(0.001, 0.1, log=True)
    assert got["momentum"] == FloatDistribution(0.5, 0.9, step=0.1)
    # Optuna needs high on the step grid: 1, 3, 5, 7.
    assert got["layers"] == IntDistribution(1, 7, step=2)
    assert got["batch"] == IntDistribution(16, 256, log=True)
    assert got["optimizer"] == CategoricalDistribution(["sgd", "adam"])
    assert got["dropout"] == CategoricalDistribution(["0.1", "0.3"])


def test_log_bounds_are_clamped_as_katibs_optuna_service_clamps_them() -> None:
    space = from_katib(
        [
            katib("lr", "double", min="0", max="1", distribution="logUniform"),
            katib("n", "int", min="0", max="10", distribution="logUniform"),
        ]
    )
    got = distributions(space)
    assert got["lr"] == FloatDistribution(1e-10, 1.0, log=True)
    assert got["n"] == IntDistribution(1, 10, log=True)


def test_bad_katib_parameters_are_field_errors_with_paths() -> None:
    with pytest.raises(SpaceError) as caught:
        from_katib(
            [
                katib("a", "double", min="x", max="1"),
                katib("b", "float", min="0", max="1"),
                katib("c", "double", min="2", max="1"),
                katib("d", "categorical", list=[]),
                katib("e", "double", min="0", max="1", distribution="normal"),
                katib("a", "int", min="0.5", max="3"),
                katib("g", "discrete", list=["1", "two"]),
            ]
        )
    fields = {e.field: e.message for e in caught.value.errors}
    assert fields["spec.parameters[0].feasibleSpace.min"] == 'Invalid value: "x": not a number'
    assert fields["spec.parameters[1].parameterType"].startswith('Unsupported value: "float"')
    assert "must not be less than min" in fields["spec.parameters[2].feasibleSpace.max"]
    assert fields["spec.parameters[3].feasibleSpace.list"].startswith("Required value")
    assert '"uniform" and "logUniform"' in fields["spec.parameters[4].feasibleSpace.distribution"]
    assert fields["spec.parameters[5].name"] == 'Duplicate value: "a"'
    assert "whole numbers" in fields["spec.parameters[5].feasibleSpace.min"]
    assert "discrete values are numbers" in fields["spec.parameters[6].feasibleSpace.list[1]"]
    assert "spec.parameters[0].feasibleSpace.min" in str(caught.value)


def test_an_empty_space_is_refused() -> None:
    with pytest.raises(SpaceError, match=r"spec.parameters: Required value"):
        from_katib([])


def test_optimizationjob_spaces() -> None:
    space = from_optimizationjob(
        [
            {"name": "lr", "searchSpace": {"logUniform": {"min": "1e-4", "max": "1e-1"}}},
            {"name": "units", "searchSpace": {"uniform": {"min": "8", "max": "64", "type": "Int"}}},
            {"name": "wd", "searchSpace": {"uniform": {"min": "0", "max": "0.1"}}},
            {"name": "opt", "searchSpace": {"categorical": {"choices": ["sgd", "adam"]}}},
        ]
    )
    assert space == (
        Parameter("lr", ParameterKind.DOUBLE, low=1e-4, high=0.1, log=True),
        Parameter("units", ParameterKind.INT, low=8, high=64),
        Parameter("wd", ParameterKind.DOUBLE, low=0, high=0.1),
        Parameter("opt", ParameterKind.CATEGORICAL, choices=("sgd", "adam")),
    )


def test_bad_optimizationjob_spaces_are_field_errors() -> None:
    with pytest.raises(SpaceError) as caught:
        from_optimizationjob(
            [
                {"name": "a", "searchSpace": {"uniform": {"min": "1", "max": "1"}}},
                {"name": "b", "searchSpace": {"logUniform": {"min": "0", "max": "1"}}},
                {"name": "c", "searchSpace": {"uniform": {"min": "0", "max": "1"}, "categorical": {"choices": ["x"]}}},
                {"name": "d"},
                {"name": "e", "searchSpace": {"uniform": {"min": "0", "max": "1", "type": "Double"}}},
            ]
        )
    fields = {e.field: e.message for e in caught.value.errors}
    assert fields["spec.parameters[0].searchSpace.uniform"] == "Invalid value: min must be strictly less than max"
    assert fields["spec.parameters[1].searchSpace.logUniform.min"].endswith("min must be strictly greater than 0")
    assert "exactly one of" in fields["spec.parameters[2].searchSpace"]
    assert fields["spec.parameters[3].searchSpace"].startswith("Required value")
    assert fields["spec.parameters[4].searchSpace.uniform.type"].startswith('Unsupported value: "Double"')


def test_the_grid_of_each_kind() -> None:
    assert grid(Parameter("x", ParameterKind.DOUBLE, low=0.1, high=0.55, step=0.1)) == (0.1, 0.2, 0.3, 0.4, 0.5)
    assert grid(Parameter("n", ParameterKind.INT, low=1, high=8, step=3)) == (1, 4, 7)
    assert grid(Parameter("n", ParameterKind.INT, low=1, high=3)) == (1, 2, 3)
    assert grid(Parameter("c", ParameterKind.CATEGORICAL, choices=("a", "b"))) == ("a", "b")
    with pytest.raises(ValueError, match=r"needs feasibleSpace\.step"):
        grid(Parameter("x", ParameterKind.DOUBLE, low=0, high=1))


def test_values_are_written_as_katib_writes_them_and_read_back() -> None:
    integer = Parameter("n", ParameterKind.INT, low=1, high=8)
    double = Parameter("x", ParameterKind.DOUBLE, low=0, high=1)
    stepped = Parameter("x", ParameterKind.DOUBLE, low=0.1, high=0.9, step=0.1)
    category = Parameter("c", ParameterKind.CATEGORICAL, choices=("sgd", "adam"))
    assert format_value(integer, 3) == "3"
    assert format_value(integer, 3.0) == "3"
    assert format_value(double, 0.125) == "0.125"
    assert format_value(double, 1e-05) == "1e-05"
    assert format_value(stepped, 0.1 + 2 * 0.1) == "0.3"
    assert format_value(category, "adam") == "adam"
    assert parse_value(integer, "3") == 3
    assert parse_value(double, "1e-05") == 1e-05
    assert parse_value(category, "sgd") == "sgd"
    with pytest.raises(ValueError, match="not one of"):
        parse_value(category, "rmsprop")
    with pytest.raises(ValueError, match="whole number"):
        parse_value(integer, "2.5")
