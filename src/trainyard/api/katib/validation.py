"""An Experiment's admission checks: Katib v0.19's validator (``webhook/v1beta1/experiment/validator``).

``validate_experiment(obj, old)`` returns every problem as a field error, in Katib's words where
Katib has a rule, so ``kubectl apply`` of a bad Experiment is a 422 ``Invalid`` with field paths
(Katib answers a 400 with the same messages joined). It checks, on an Experiment already
defaulted (``defaults.default_experiment``):

* the name (at most 40 characters, a DNS label); the trial counts (``maxTrialCount`` and
  ``parallelTrialCount`` > 0, ``maxFailedTrialCount`` >= 0, neither above ``maxTrialCount``);
* on update, Katib's restart rules: only the three counts may change, a finished Experiment only
  if it may be restarted (``ExperimentMaxTrialsReached`` with a ``LongRunning`` or ``FromVolume``
  resume policy), and a new ``maxTrialCount`` must exceed ``status.trials``;
* the objective (type, metric name, additional names, metric strategies' values); the algorithm
  and early-stopping names; the resume policy;
* the parameters: known types, a feasible space that fits the type (numbers for double and int
  with ``min < max`` and a positive ``step``, a non-empty ``list`` for categorical and discrete);
* the trial template: an inline ``trialSpec`` with ``apiVersion`` and ``kind`` and no name or
  namespace, ``primaryContainerName`` (one of the template's containers where it lists any),
  success and failure conditions in the GJSON subset trainyard evaluates (``conditions``), every
  trial parameter named, referenced, used in the template and every placeholder declared;
* the metrics collector: ``StdOut``, ``File`` (an absolute ``File`` path, ``TEXT`` or ``JSON``),
  ``Push`` or ``None``, and filters with two groups.

What Katib runs and trainyard does not (NAS, ConfigMap trial templates, other algorithms and
collectors, normal distributions) is refused here with what to use instead, never accepted and
left to fail. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.katib import (
    ALGORITHMS,
    DISTRIBUTIONS,
    EARLY_STOPPING_ALGORITHMS,
    FAILED,
    FROM_VOLUME,
    LONG_RUNNING,
    MAX_TRIALS_REACHED,
    METRIC_STRATEGIES,
    PARAMETER_TYPES,
    RESUME_POLICIES,
    SUCCEEDED,
)
from trainyard.api.katib.trialchecks import NOT_SUPPORTED, collector_problems, template_problems
from trainyard.api.meta import Obj

EDITABLE = ("parallelTrialCount", "maxTrialCount", "maxFailedTrialCount")
NAME_MESSAGE = (
    "name must consist of lower case alphanumeric characters or '-', start with an alphabetic character, "
    "and end with an alphanumeric character (e.g. 'my-name', or 'abc-123', regex used for validation is "
    "'^[a-z]([-a-z0-9]*[a-z0-9])?)') and may not be longer than 40 characters. "
)
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# Katib's algorithms that trainyard's Optuna search does not run, and the collectors it does not inject.
KATIB_ONLY_ALGORITHMS = ("bayesianoptimization", "hyperband", "sobol", "pbt", "enas", "darts")

SPEC = "spec"
OBJECTIVE = "spec.objective"


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, path, f"{quote(value)}: {detail}")


def _required(path: str, detail: str) -> FieldError:
    return FieldError(ErrorType.REQUIRED, path, detail)


def _unsupported(path: str, value: Any, supported: tuple[str, ...], advice: str = "") -> FieldError:
    choices = ", ".join(quote(s) for s in supported)
    return FieldError(ErrorType.NOT_SUPPORTED, path, f"{quote(value)}: {NOT_SUPPORTED}: use one of {choices}{advice}")


def _number(text: Any) -> float | None:
    try:
        return float(text) if isinstance(text, str) and text.strip() else None
    except ValueError:
        return None


# -- counts, name, update ----------------------------------------------------------------------------


def _counts(spec: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    most, parallel, failed = (spec.get(k) for k in ("maxTrialCount", "parallelTrialCount", "maxFailedTrialCount"))
    if isinstance(failed, int) and failed < 0:
        out.append(_invalid("spec.maxFailedTrialCount", failed, "should not be less than 0"))
    if isinstance(most, int) and most <= 0:
        out.append(_invalid("spec.maxTrialCount", most, "must be greater than 0"))
    if isinstance(parallel, int) and parallel <= 0:
        out.append(_invalid("spec.parallelTrialCount", parallel, "must be greater than 0"))
    if isinstance(failed, int) and isinstance(most, int) and failed > most:
        out.append(_invalid("spec.maxFailedTrialCount", failed, "should be less than or equal to spec.maxTrialCount"))
    if isinstance(parallel, int) and isinstance(most, int) and parallel > most:
        out.append(_invalid("spec.parallelTrialCount", parallel, "should be less than or equal to spec.maxTrialCount"))
    return out


def _true(obj: Obj, ctype: str) -> Obj | None:
    found = (_dict(obj.get("status")).get("conditions")) or []
    return next((c for c in found if isinstance(c, dict) and (c.get("type"), c.get("status")) == (ctype, "True")), None)


def restartable(old: Obj) -> bool:
    """Katib's ``IsCompletedExperimentRestartable``: it succeeded by reaching its trial budget, and its
    resume policy keeps the search able to go on."""
    succeeded = _true(old, SUCCEEDED)
    policy = _dict(old.get("spec")).get("resumePolicy")
    by_budget = succeeded is not None and succeeded.get("reason") == MAX_TRIALS_REACHED
    return by_budget and policy in (LONG_RUNNING, FROM_VOLUME)


def _update(new: Obj, old: Obj) -> list[FieldError]:
    new_spec, old_spec = _dict(new.get("spec")), _dict(old.get("spec"))
    if new_spec == old_spec:
        return []
    out: list[FieldError] = []
    completed = _true(old, SUCCEEDED) is not None or _true(old, FAILED) is not None
    if completed and not restartable(old):
        detail = (
            f"Experiment can be restarted if it is in succeeded state by reaching max trials and spec.resumePolicy = "
            f"{LONG_RUNNING} or spec.resumePolicy = {FROM_VOLUME}, when experiment is completed"
        )
        out.append(_invalid("spec.resumePolicy", new_spec.get("resumePolicy"), detail))
    trials = _dict(old.get("status")).get("trials") or 0
    most = new_spec.get("maxTrialCount")
    if isinstance(most, int) and most <= trials:
        out.append(_invalid("spec.maxTrialCount", most, "must be greater than status.trials count"))
    rest = {k: v for k, v in new_spec.items() if k not in EDITABLE}
    if rest != {k: v for k, v in old_spec.items() if k not in EDITABLE}:
        detail = "only spec.parallelTrialCount, spec.maxTrialCount and spec.maxFailedTrialCount are editable"
        out.append(FieldError(ErrorType.FORBIDDEN, SPEC, detail))
    return out


# -- objective, algorithms, resume policy -------------------------------------------------------------


def _objective(spec: Obj) -> list[FieldError]:
    if not isinstance(spec.get("objective"), dict):
        return [_required(OBJECTIVE, "must be specified")]
    objective = spec["objective"]
    out: list[FieldError] = []
    if objective.get("type") not in ("minimize", "maximize"):
        out.append(_invalid(f"{OBJECTIVE}.type", objective.get("type"), "must be minimize or maximize"))
    metric = objective.get("objectiveMetricName")
    if not metric:
        out.append(_required(f"{OBJECTIVE}.objectiveMetricName", "must be specified"))
    additional = objective.get("additionalMetricNames") or []
    if metric and metric in additional:
        detail = "should not contain spec.objective.objectiveMetricName"
        out.append(_invalid(f"{OBJECTIVE}.additionalMetricNames", ", ".join(additional), detail))
    for i, strategy in enumerate(objective.get("metricStrategies") or []):
        value = _dict(strategy).get("value")
        if value not in METRIC_STRATEGIES:
            out.append(
                FieldError(
                    ErrorType.NOT_SUPPORTED,
                    f"{OBJECTIVE}.metricStrategies[{i}].value",
                    f"{quote(value)}: supported values: {', '.join(quote(s) for s in METRIC_STRATEGIES)}",
                )
            )
    return out


def _algorithms(spec: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    algorithm = spec.get("algorithm")
    if not isinstance(algorithm, dict):
        out.append(_required("spec.algorithm", "must be specified"))
    elif not algorithm.get("algorithmName"):
        out.append(_required("spec.algorithm.algorithmName", "must be specified"))
    elif algorithm["algorithmName"] not in ALGORITHMS:
        name = algorithm["algorithmName"]
        advice = " (Katib's own suggestion services are not run)" if name in KATIB_ONLY_ALGORITHMS else ""
        out.append(_unsupported("spec.algorithm.algorithmName", name, ALGORITHMS, advice))
    early = spec.get("earlyStopping")
    if isinstance(early, dict):
        if not early.get("algorithmName"):
            out.append(_required("spec.earlyStopping.algorithmName", "must be specified"))
        elif early["algorithmName"] not in EARLY_STOPPING_ALGORITHMS:
            name = early["algorithmName"]
            out.append(_unsupported("spec.earlyStopping.algorithmName", name, EARLY_STOPPING_ALGORITHMS))
    policy = spec.get("resumePolicy")
    if policy not in (None, "", *RESUME_POLICIES):
        out.append(_invalid("spec.resumePolicy", policy, "invalid ResumePolicyType"))
    return out


# -- parameters ---------------------------------------------------------------------------------------


def _numeric_space(path: str, kind: str, space: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    if space.get("list"):
        detail = f"feasibleSpace.list is not supported for parameterType: {kind}"
        out.append(_invalid(f"{path}.list", ", ".join(map(str, space["list"])), detail))
    if not space.get("max") or not space.get("min"):
        detail = f"feasibleSpace.max or feasibleSpace.min must be specified for parameterType: {kind}"
        return [*out, _required(f"{path}.max", detail)]
    low, high = _number(space["min"]), _number(space["max"])
    for key, value in (("min", low), ("max", high)):
        if value is None or (kind == "int" and not value.is_integer()):
            what = "an integer" if kind == "int" else "a number"
            out.append(_invalid(f"{path}.{key}", space[key], f"must be {what}"))
    if low is not None and high is not None:
        if low >= high:
            out.append(_invalid(f"{path}.max", space["max"], "must be greater than feasibleSpace.min"))
        if space.get("distribution") == "logUniform" and low <= 0:
            out.append(_invalid(f"{path}.min", space["min"], "must be greater than 0 for distribution: logUniform"))
    if space.get("step"):
        step = _number(space["step"])
        if step is None or step <= 0 or (kind == "int" and not step.is_integer()):
            what = "a positive integer" if kind == "int" else "a positive number"
            out.append(_invalid(f"{path}.step", space["step"], f"must be {what}"))
    return out


def _list_space(path: str, kind: str, space: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    if any(space.get(k) for k in ("max", "min", "step")):
        detail = f"feasibleSpace .max, .min and .step is not supported for parameterType: {kind}"
        out.append(_invalid(path, "...", detail))
    values = space.get("list") or []
    if not values:
        out.append(_required(f"{path}.list", f"feasibleSpace.list must be specified for parameterType: {kind}"))
    if kind == "discrete":
        for j, value in enumerate(values):
            if _number(value) is None:
                out.append(_invalid(f"{path}.list[{j}]", value, "must be a number for parameterType: discrete"))
    return out


def _parameters(spec: Obj) -> list[FieldError]:
    if spec.get("nasConfig") is not None:
        detail = f"{NOT_SUPPORTED}: neural architecture search (ENAS, DARTS) needs Katib; use spec.parameters"
        return [FieldError(ErrorType.FORBIDDEN, "spec.nasConfig", detail)]
    parameters = spec.get("parameters") or []
    if not parameters:
        return [_required(SPEC, "spec.parameters or spec.nasConfig must be specified")]
    out: list[FieldError] = []
    seen: set[Any] = set()
    for i, parameter in enumerate(parameters):
        parameter = _dict(parameter)
        path = f"spec.parameters[{i}]"
        if parameter.get("name") in seen:
            out.append(FieldError(ErrorType.DUPLICATE, f"{path}.name", quote(parameter.get("name"))))
        seen.add(parameter.get("name"))
        kind = parameter.get("parameterType")
        if kind not in PARAMETER_TYPES:
            out.append(_invalid(f"{path}.parameterType", kind, f"parameterType: {kind} is not supported"))
        space = parameter.get("feasibleSpace")
        if not isinstance(space, dict) or not any(space.get(k) for k in ("max", "min", "list", "step")):
            out.append(_required(f"{path}.feasibleSpace", "feasibleSpace must be specified"))
            continue
        distribution = space.get("distribution")
        if distribution not in (None, "", *DISTRIBUTIONS):
            advice = " (Optuna's samplers draw from uniform and log-uniform spaces)"
            out.append(_unsupported(f"{path}.feasibleSpace.distribution", distribution, DISTRIBUTIONS, advice))
        if kind in ("double", "int"):
            out += _numeric_space(f"{path}.feasibleSpace", kind, space)
        elif kind in ("categorical", "discrete"):
            out += _list_space(f"{path}.feasibleSpace", kind, space)
    return out


# -- algorithm settings (Katib checks them in its Optuna suggestion service) ---------------------------


# setting -> (what it must be, check); Katib's ``OptimizerConfiguration._validate_*_setting``.
def _non_negative(value: str, *, integer: bool) -> bool:
    number = _number(value)
    return number is not None and number >= 0 and (number.is_integer() or not integer)


_NON_NEGATIVE_INT = ("an integer >= 0", lambda v: _non_negative(v, integer=True))
_SETTINGS: dict[str, dict[str, tuple[str, Any]]] = {
    "random": {"random_state": _NON_NEGATIVE_INT},
    "grid": {"random_state": _NON_NEGATIVE_INT},
    "tpe": {k: _NON_NEGATIVE_INT for k in ("n_startup_trials", "n_ei_candidates", "random_state")},
    "cmaes": {
        "restart_strategy": ("ipop, None or none", lambda v: v in ("ipop", "None", "none")),
        "sigma": ("a number >= 0", lambda v: _non_negative(v, integer=False)),
        "random_state": _NON_NEGATIVE_INT,
    },
}
_SETTINGS["multivariate-tpe"] = _SETTINGS["tpe"]


def _grid_size(parameters: list[Any]) -> int | None:
    """How many points a grid search has; None when a double parameter has no step (no grid)."""
    size = 1
    for parameter in parameters:
        space = _dict(_dict(parameter).get("feasibleSpace"))
        kind = _dict(parameter).get("parameterType")
        if kind in ("categorical", "discrete"):
            size *= max(len(space.get("list") or []), 1)
            continue
        low, high = _number(space.get("min")), _number(space.get("max"))
        step = _number(space.get("step")) or (1.0 if kind == "int" else None)
        if low is None or high is None or step is None or step <= 0:
            return None
        size *= int((high - low) / step + 1e-9) + 1
    return size


def _settings(spec: Obj) -> list[FieldError]:
    algorithm = _dict(spec.get("algorithm"))
    name = algorithm.get("algorithmName")
    known = _SETTINGS.get(str(name))
    if known is None:
        return []
    out: list[FieldError] = []
    for i, setting in enumerate(algorithm.get("algorithmSettings") or []):
        key, value = str(_dict(setting).get("name")), str(_dict(setting).get("value"))
        path = f"spec.algorithm.algorithmSettings[{i}]"
        if key not in known:
            detail = f"unknown setting {key} for algorithm {name}: known are {', '.join(known)}"
            out.append(FieldError(ErrorType.NOT_SUPPORTED, f"{path}.name", f"{quote(key)}: {detail}"))
        elif not known[key][1](value):
            out.append(_invalid(f"{path}.value", value, f"{key} must be {known[key][0]}"))
    parameters = spec.get("parameters") or []
    if name == "cmaes" and sum(1 for p in parameters if _dict(p).get("parameterType") in ("double", "int")) < 2:
        detail = "cmaes only supports two or more dimensional continuous search space."
        out.append(_invalid("spec.algorithm.algorithmName", name, detail))
    if name == "grid" and parameters:
        size = _grid_size(parameters)
        most = spec.get("maxTrialCount")
        if size is None:
            detail = "a grid needs feasibleSpace.step on every double parameter"
            out.append(_invalid("spec.algorithm.algorithmName", name, detail))
        elif isinstance(most, int) and most > size:
            detail = f"Max Trial Count: {most} > all possible search combinations: {size}"
            out.append(_invalid("spec.maxTrialCount", most, detail))
    return out


def validate_experiment(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """Every problem of an Experiment at once (create; with ``old``, an update of it)."""
    out: list[FieldError] = []
    name = str(_dict(obj.get("metadata")).get("name") or "")
    if not _NAME.match(name) or len(name) > 40:
        out.append(_invalid("metadata.name", name, NAME_MESSAGE))
    spec = _dict(obj.get("spec"))
    out += _counts(spec)
    if old is not None:
        out += _update(obj, old)
    out += _objective(spec)
    out += _algorithms(spec)
    out += template_problems(spec)
    out += _parameters(spec)
    out += collector_problems(spec)
    if not out:
        out += _settings(spec)  # a search space it can read
    return out
