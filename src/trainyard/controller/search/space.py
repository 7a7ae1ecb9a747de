"""Search spaces: Katib's and OptimizationJob's parameter specs as ``Parameter`` values, and back.

``from_katib`` reads an Experiment's ``spec.parameters`` (values are strings, as Katib's API carries
them), ``from_optimizationjob`` an OptimizationJob's; both raise ``SpaceError`` with one field error per
problem, paths from ``spec.parameters``. ``distributions`` gives Optuna the same distributions Katib's
optuna suggestion service builds (``base_service._get_optuna_search_space``); ``grid`` the points of
Katib's grid (``search_space.convert_to_combinations``). ``format_value``/``parse_value`` turn a
value into the string a trial receives and back.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.controller.search import Parameter, ParameterKind

# Katib's optuna service clamps log-scale lower bounds to these (a log of 0 is undefined).
_LOG_FLOAT_FLOOR = 1e-10
_LOG_INT_FLOOR = 1
# A grid larger than this is refused instead of enumerated (GridSampler lists every point).
MAX_GRID_POINTS = 100_000

Value = int | float | str


class SpaceError(ValueError):
    """A search space that cannot be searched: the field errors, as admission reports them."""

    def __init__(self, errors: Sequence[FieldError]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(str(e) for e in self.errors))


def from_katib(parameters: Sequence[Mapping[str, Any]], path: str = "spec.parameters") -> tuple[Parameter, ...]:
    """An Experiment's ``spec.parameters[]`` as Parameters; ``SpaceError`` names every bad field."""
    return _translate(parameters, path, _katib_parameter)


def from_optimizationjob(
    parameters: Sequence[Mapping[str, Any]], path: str = "spec.parameters"
) -> tuple[Parameter, ...]:
    """An OptimizationJob's ``spec.parameters[]`` (``searchSpace``: exactly one of uniform, logUniform,
    categorical) as Parameters. Int ranges keep the whole numbers inside ``[min, max]``."""
    return _translate(parameters, path, _optimizationjob_parameter)


_One = Callable[[Mapping[str, Any], str, set[str], list[FieldError]], Parameter | None]


def _translate(parameters: Sequence[Mapping[str, Any]], path: str, one: _One) -> tuple[Parameter, ...]:
    if not parameters:
        raise SpaceError([FieldError(ErrorType.REQUIRED, path, "at least one parameter must be searched")])
    errors: list[FieldError] = []
    names: set[str] = set()
    out = [one(spec, f"{path}[{i}]", names, errors) for i, spec in enumerate(parameters)]
    if errors:
        raise SpaceError(errors)
    return tuple(p for p in out if p is not None)


def _katib_parameter(spec: Mapping[str, Any], here: str, names: set[str], errors: list[FieldError]) -> Parameter | None:
    before = len(errors)
    name = _name(spec.get("name"), f"{here}.name", names, errors)
    kind_text = spec.get("parameterType") or ""
    space = spec.get("feasibleSpace") or {}
    sp = f"{here}.feasibleSpace"
    if kind_text not in {k.value for k in ParameterKind}:
        errors.append(
            FieldError(
                ErrorType.NOT_SUPPORTED,
                f"{here}.parameterType",
                f"{quote(kind_text)}: supported values: {', '.join(quote(k.value) for k in ParameterKind)}",
            )
        )
        return None
    kind = ParameterKind(kind_text)
    distribution = space.get("distribution") or "uniform"
    if kind in (ParameterKind.CATEGORICAL, ParameterKind.DISCRETE):
        choices = _choices(space.get("list"), f"{sp}.list", kind, errors)
        for key in ("min", "max", "step"):
            if space.get(key) not in (None, ""):
                errors.append(FieldError(ErrorType.FORBIDDEN, f"{sp}.{key}", f"not supported for parameterType {kind}"))
        if len(errors) == before:
            return Parameter(name=name, kind=kind, choices=choices)
        return None
    if space.get("list"):
        errors.append(FieldError(ErrorType.FORBIDDEN, f"{sp}.list", f"not supported for parameterType {kind}"))
    if distribution not in ("uniform", "logUniform"):
        detail = (
            "the optuna suggestion service (random, grid, tpe, multivariate-tpe, cmaes) supports only "
            '"uniform" and "logUniform"; write one of them'
            if distribution in ("normal", "logNormal")
            else 'supported values: "uniform", "logUniform"'
        )
        errors.append(FieldError(ErrorType.NOT_SUPPORTED, f"{sp}.distribution", f"{quote(distribution)}: {detail}"))
        return None
    log = distribution == "logUniform"
    low = _number(space.get("min"), f"{sp}.min", kind, errors)
    high = _number(space.get("max"), f"{sp}.max", kind, errors)
    step: float | None = None
    if space.get("step") not in (None, ""):
        step = _number(space.get("step"), f"{sp}.step", kind, errors)
        if step is not None and step <= 0:
            errors.append(FieldError(ErrorType.INVALID, f"{sp}.step", f"{quote(space['step'])}: must be positive"))
    if low is not None and high is not None:
        _bounds(low, high, log, kind, sp, errors)
    if len(errors) == before and low is not None and high is not None:
        return Parameter(name=name, kind=kind, low=low, high=high, step=step, log=log)
    return None


def _optimizationjob_parameter(
    spec: Mapping[str, Any], here: str, names: set[str], errors: list[FieldError]
) -> Parameter | None:
    before = len(errors)
    name = _name(spec.get("name"), f"{here}.name", names, errors)
    space = spec.get("searchSpace")
    sp = f"{here}.searchSpace"
    if not isinstance(space, Mapping):
        errors.append(FieldError(ErrorType.REQUIRED, sp, "one of uniform, logUniform or categorical"))
        return None
    given = [k for k in ("uniform", "logUniform", "categorical") if space.get(k)]
    if len(given) != 1:
        errors.append(
            FieldError(
                ErrorType.INVALID,
                sp,
                f"exactly one of uniform, logUniform or categorical must be set, not {len(given)}",
            )
        )
        return None
    which = given[0]
    body = space[which]
    if which == "categorical":
        choices = _choices(body.get("choices"), f"{sp}.categorical.choices", ParameterKind.CATEGORICAL, errors)
        if len(errors) == before:
            return Parameter(name=name, kind=ParameterKind.CATEGORICAL, choices=choices)
        return None
    type_text = body.get("type") or "Float"
    if type_text not in ("Int", "Float"):
        detail = f'{quote(type_text)}: supported values: "Int", "Float"'
        errors.append(FieldError(ErrorType.NOT_SUPPORTED, f"{sp}.{which}.type", detail))
        return None
    log = which == "logUniform"
    low = _number(body.get("min"), f"{sp}.{which}.min", ParameterKind.DOUBLE, errors)
    high = _number(body.get("max"), f"{sp}.{which}.max", ParameterKind.DOUBLE, errors)
    if low is None or high is None:
        return None
    if low >= high:
        errors.append(FieldError(ErrorType.INVALID, f"{sp}.{which}", "min must be strictly less than max"))
        return None
    if log and low <= 0:
        errors.append(FieldError(ErrorType.INVALID, f"{sp}.{which}.min", "min must be strictly greater than 0"))
        return None
    kind = ParameterKind.INT if type_text == "Int" else ParameterKind.DOUBLE
    if kind is ParameterKind.INT:
        low, high = float(math.ceil(low)), float(math.floor(high))
        if low > high:
            detail = "no whole number lies between min and max"
            errors.append(FieldError(ErrorType.INVALID, f"{sp}.{which}", detail))
            return None
    if len(errors) == before:
        return Parameter(name=name, kind=kind, low=low, high=high, log=log)
    return None


def distributions(space: Sequence[Parameter]) -> dict[str, BaseDistribution]:
    """Optuna's distribution of each parameter, as Katib's optuna service builds them."""
    return {p.name: distribution(p) for p in space}


def distribution(p: Parameter) -> BaseDistribution:
    if p.kind in (ParameterKind.CATEGORICAL, ParameterKind.DISCRETE):
        return CategoricalDistribution(list(p.choices))
    low, high = _range(p)
    if p.kind is ParameterKind.INT:
        if p.log:
            return IntDistribution(low=max(_LOG_INT_FLOOR, int(low)), high=int(high), log=True)
        step = int(p.step or 1)
        # Optuna would move ``high`` onto the step grid with a warning; say it here instead.
        top = int(low) + (int(high) - int(low)) // step * step
        return IntDistribution(low=int(low), high=top, step=step)
    if p.log:
        return FloatDistribution(low=max(_LOG_FLOAT_FLOOR, low), high=high, log=True)
    if p.step:
        return FloatDistribution(low=low, high=_on_step(p, _steps(p)), step=p.step)
    return FloatDistribution(low=low, high=high)


def grid(p: Parameter) -> tuple[Value, ...]:
    """The points Katib's grid visits for one parameter: the list, or ``min`` to ``max`` by ``step``.

    Raises ``ValueError`` for a double without a step (Katib's grid requires one).
    """
    if p.kind in (ParameterKind.CATEGORICAL, ParameterKind.DISCRETE):
        return tuple(p.choices)
    low, high = _range(p)
    if p.kind is ParameterKind.INT:
        return tuple(range(int(low), int(high) + 1, int(p.step or 1)))
    if not p.step:
        raise ValueError(f"parameter {p.name!r}: grid needs feasibleSpace.step for a double parameter")
    count = _steps(p) + 1
    if count > MAX_GRID_POINTS:
        raise ValueError(f"parameter {p.name!r}: {count} grid points; at most {MAX_GRID_POINTS}")
    return tuple(_on_step(p, i) for i in range(count))


def format_value(p: Parameter, raw: object) -> str:
    """The string a trial receives: ints as ``3``, floats as Python (and so Katib's service) writes them."""
    if p.kind in (ParameterKind.CATEGORICAL, ParameterKind.DISCRETE):
        return str(raw)
    if p.kind is ParameterKind.INT:
        return str(int(float(raw)))  # type: ignore[arg-type]
    number = float(raw)  # type: ignore[arg-type]
    if p.step and not p.log and p.low is not None:
        # A sampled 0.1 + 2 * 0.1 is the grid point 0.3: written as the user wrote min and step.
        number = _on_step(p, round((number - p.low) / p.step))
    return repr(number)


def parse_value(p: Parameter, text: str) -> Value:
    """A trial's assignment back as Optuna holds it; ``ValueError`` when it is outside the space."""
    if p.kind in (ParameterKind.CATEGORICAL, ParameterKind.DISCRETE):
        if text not in p.choices:
            raise ValueError(f"parameter {p.name!r}: {text!r} is not one of {list(p.choices)}")
        return text
    number = float(text)
    if p.kind is ParameterKind.INT:
        if not number.is_integer():
            raise ValueError(f"parameter {p.name!r}: {text!r} is not a whole number")
        return int(number)
    return number


def _range(p: Parameter) -> tuple[float, float]:
    if p.low is None or p.high is None:
        raise ValueError(f"parameter {p.name!r}: {p.kind} needs min and max")
    return p.low, p.high


def _steps(p: Parameter) -> int:
    """How many steps from min fit below max; in decimal, as the user wrote the numbers."""
    low, high = _range(p)
    return int((Decimal(repr(high)) - Decimal(repr(low))) // Decimal(repr(p.step)))


def _on_step(p: Parameter, i: int) -> float:
    """The i-th point of a stepped range, computed in decimal so 0.1 + 2 * 0.1 is 0.3 exactly."""
    low, _ = _range(p)
    return float(Decimal(repr(low)) + i * Decimal(repr(p.step))) + 0.0  # + 0.0: never "-0.0"


def _name(value: object, path: str, seen: set[str], errors: list[FieldError]) -> str:
    if not isinstance(value, str) or not value:
        errors.append(FieldError(ErrorType.REQUIRED, path, "every parameter needs a name"))
        return ""
    if value in seen:
        errors.append(FieldError(ErrorType.DUPLICATE, path, quote(value)))
    seen.add(value)
    return value


def _choices(value: object, path: str, kind: ParameterKind, errors: list[FieldError]) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        errors.append(FieldError(ErrorType.REQUIRED, path, f"the values of a {kind} parameter"))
        return ()
    choices = tuple(str(v) for v in value)
    if len(set(choices)) != len(choices):
        errors.append(FieldError(ErrorType.DUPLICATE, path, "every value must be listed once"))
    if kind is ParameterKind.DISCRETE:
        for j, c in enumerate(choices):
            try:
                float(c)
            except ValueError:
                errors.append(FieldError(ErrorType.INVALID, f"{path}[{j}]", f"{quote(c)}: discrete values are numbers"))
    return choices


def _number(value: object, path: str, kind: ParameterKind, errors: list[FieldError]) -> float | None:
    if value is None or value == "":
        errors.append(FieldError(ErrorType.REQUIRED, path, f"a {kind} parameter needs min and max"))
        return None
    try:
        number = float(str(value))
    except ValueError:
        errors.append(FieldError(ErrorType.INVALID, path, f"{quote(value)}: not a number"))
        return None
    if not math.isfinite(number):
        errors.append(FieldError(ErrorType.INVALID, path, f"{quote(value)}: must be finite"))
        return None
    if kind is ParameterKind.INT and not number.is_integer():
        errors.append(FieldError(ErrorType.INVALID, path, f"{quote(value)}: an int parameter takes whole numbers"))
        return None
    return number


def _bounds(low: float, high: float, log: bool, kind: ParameterKind, sp: str, errors: list[FieldError]) -> None:
    if low > high:
        errors.append(FieldError(ErrorType.INVALID, f"{sp}.max", f"{high:g}: must not be less than min ({low:g})"))
    elif log and high <= 0:
        errors.append(FieldError(ErrorType.INVALID, f"{sp}.max", f"{high:g}: logUniform needs a positive max"))
    elif log and kind is ParameterKind.INT and high < _LOG_INT_FLOOR:
        errors.append(FieldError(ErrorType.INVALID, f"{sp}.max", f"{high:g}: a logUniform int needs max >= 1"))
