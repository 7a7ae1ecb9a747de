"""OptimizationJob (``trainer.kubeflow.org/v1alpha1``): its CRD, its defaults and its validation, pure.

The schema is upstream's (``optimizationjob_types.go`` as its ``controller-gen`` CRD publishes it:
names, bounds, defaults, list types, the ``Double`` pattern, the CEL rules as
``x-kubernetes-validations``, which a real kube-apiserver evaluates) with ``trainJobTemplate.spec``
being this package's TrainJob spec. trainyard adds optional status fields only: ``state`` (the
STATE column: Created, Running, Complete, Failed, as the official SDK names them), ``trials`` (each
trial TrainJob with its parameters, state and objective value), the counts ``trialsRunning``,
``trialsSucceeded``, ``trialsFailed`` and ``bestValue`` (the result's objective value).

The embedded plane evaluates no CEL, so ``validate`` checks every rule of the CRD in its own
words, at its path, as kube-apiserver reports a failed rule (``spec: Invalid value: "object":
parallelTrials cannot exceed numTrials``), plus what the controller needs to inject parameters:
two parameters may not share an env name, and the template may not set one itself. The template's
TrainJob spec is checked by the TrainJob's own rules (``webhook.validate``), under its path.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.meta import Obj
from trainyard.api.trainer import (
    GROUP,
    OPT_ENV_PREFIX,
    OPTIMIZATION_STATES,
    OPTIMIZATIONJOB,
    OPTIMIZATIONJOBS,
    TRIAL_STATES,
    VERSION,
)
from trainyard.api.trainer import webhook as trainjob_webhook
from trainyard.api.trainer.schema import trainjob_schema

DOUBLE_PATTERN = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
SPACES = ("uniform", "logUniform", "categorical")
ALGORITHMS = ("random", "grid")
DIRECTIONS = ("Maximize", "Minimize")
PARAMETER_TYPES = ("Int", "Float")
IMMUTABLE = "OptimizationJobSpec is immutable and cannot be updated after creation"
PARALLEL = "parallelTrials cannot exceed numTrials"
GRID = "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported."
MIN_BELOW_MAX = "min must be strictly less than max"
MIN_POSITIVE = "min must be strictly greater than 0"
TEMPLATE_NAME = "name and namespace cannot be set in a template."
ONE_OF_SPACES = "exactly one of the fields in [uniform logUniform categorical] must be set"
ONE_OF_ALGORITHMS = "exactly one of the fields in [random grid] must be set"
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def env_name(parameter: str) -> str:
    """``KUBEFLOW_TRAINER_OPT_<NAME>``: the parameter's name upper-cased, each non-alphanumeric ``_``
    (``learning-rate`` → ``KUBEFLOW_TRAINER_OPT_LEARNING_RATE``), a valid env name whatever the name."""
    return OPT_ENV_PREFIX + _NOT_ALNUM.sub("_", parameter).upper()


# -- the schema ------------------------------------------------------------------------------------------


def _obj(properties: Obj, **extra: Any) -> Obj:
    return {"type": "object", "properties": properties, **extra}


def _str(**extra: Any) -> Obj:
    return {"type": "string", **extra}


def _int32(**extra: Any) -> Obj:
    return {"type": "integer", "format": "int32", **extra}


def _map_list(items: Obj, key: str, **extra: Any) -> Obj:
    return {
        "type": "array",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
        **extra,
    }


def _rule(rule: str, message: str) -> Obj:
    return {"rule": rule, "message": message}


_DOUBLE = _str(minLength=1, maxLength=64, pattern=DOUBLE_PATTERN)
_ASSIGNMENT = _obj(
    {"name": _str(minLength=1, maxLength=64), "value": _str(minLength=1, maxLength=64)}, required=["name", "value"]
)


def _range(*rules: Obj) -> Obj:
    return _obj(
        {"min": _DOUBLE, "max": _DOUBLE, "type": _str(enum=list(PARAMETER_TYPES), default="Float")},
        required=["max", "min"],
        **{"x-kubernetes-validations": list(rules)},
    )


def spec_schema() -> Obj:
    below = _rule("double(self.min) < double(self.max)", MIN_BELOW_MAX)
    one_space = "[has(self.uniform),has(self.logUniform),has(self.categorical)].filter(x,x==true).size() == 1"
    search_space = _obj(
        {
            "uniform": _range(below),
            "logUniform": _range(_rule("double(self.min) > 0.0", MIN_POSITIVE), below),
            "categorical": _obj(
                {
                    "choices": {
                        "type": "array",
                        "items": _str(maxLength=64),
                        "minItems": 1,
                        "maxItems": 100,
                        "x-kubernetes-list-type": "set",
                    }
                },
                required=["choices"],
            ),
        },
        **{"x-kubernetes-validations": [_rule(one_space, ONE_OF_SPACES)]},
    )
    parameter = _obj(
        {"name": _str(minLength=1, maxLength=64), "searchSpace": search_space}, required=["name", "searchSpace"]
    )
    objective = _obj(
        {"metric": _str(minLength=1, maxLength=64), "direction": _str(enum=list(DIRECTIONS), default="Minimize")},
        required=["metric"],
    )
    algorithm = _obj(
        {"random": _obj({"seed": {"type": "integer", "format": "int64"}}), "grid": {"type": "object"}},
        default={"random": {}},
        **{
            "x-kubernetes-validations": [
                _rule("[has(self.random),has(self.grid)].filter(x,x==true).size() == 1", ONE_OF_ALGORITHMS)
            ]
        },
    )
    string_map: Obj = {"type": "object", "additionalProperties": {"type": "string"}}
    template_metadata = _obj(
        {
            "annotations": string_map,
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": string_map,
            "name": _str(),
            "namespace": _str(),
        },
        **{"x-kubernetes-validations": [_rule("!has(self.name) && !has(self.namespace)", TEMPLATE_NAME)]},
    )
    template = _obj({"metadata": template_metadata, "spec": trainjob_schema()["properties"]["spec"]}, required=["spec"])
    grid_rule = "!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))"
    return _obj(
        {
            "objectives": _map_list(objective, "metric", minItems=1, maxItems=1),
            "searchAlgorithm": algorithm,
            "parameters": _map_list(parameter, "name", minItems=1, maxItems=100),
            "numTrials": _int32(default=1, minimum=1, maximum=100),
            "parallelTrials": _int32(default=1, minimum=1, maximum=100),
            "trainJobTemplate": template,
        },
        required=["objectives", "parameters", "trainJobTemplate"],
        **{
            "x-kubernetes-validations": [
                _rule("self == oldSelf", IMMUTABLE),
                _rule("self.parallelTrials <= self.numTrials", PARALLEL),
                _rule(grid_rule, GRID),
            ]
        },
    )


def status_schema() -> Obj:
    condition = _obj(
        {
            "lastTransitionTime": _str(format="date-time"),
            "message": _str(maxLength=32768),
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "reason": _str(minLength=1, maxLength=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"),
            "status": _str(enum=["True", "False", "Unknown"]),
            "type": _str(maxLength=316),
        },
        required=["lastTransitionTime", "message", "reason", "status", "type"],
    )
    assignments = _map_list(_ASSIGNMENT, "name", maxItems=100)
    trial = _obj(
        {
            "name": _str(minLength=1, maxLength=63),
            "parameters": assignments,
            "state": _str(enum=list(TRIAL_STATES)),
            "value": _str(maxLength=64),
            "message": _str(maxLength=32768),
        },
        required=["name", "state"],
    )
    count = _int32(minimum=0)
    return _obj(
        {
            "conditions": _map_list(condition, "type", maxItems=100),
            "result": _obj(
                {"trainJobName": _str(minLength=1, maxLength=63), "parameters": assignments}, required=["trainJobName"]
            ),
            # trainyard's own (optional): what the STATE, TRIALS and BEST columns read.
            "state": _str(enum=list(OPTIMIZATION_STATES)),
            "trials": _map_list(trial, "name", maxItems=100),
            "trialsRunning": count,
            "trialsSucceeded": count,
            "trialsFailed": count,
            "bestValue": _str(maxLength=64),
        }
    )


def crd() -> Obj:
    schema = _obj(
        {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec_schema(),
            "status": status_schema(),
        },
        required=["spec"],
    )
    columns = [
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": "Trials", "type": "integer", "jsonPath": ".spec.numTrials"},
        {"name": "Succeeded", "type": "integer", "jsonPath": ".status.trialsSucceeded"},
        {"name": "Running", "type": "integer", "jsonPath": ".status.trialsRunning"},
        {"name": "Failed", "type": "integer", "jsonPath": ".status.trialsFailed", "priority": 1},
        {"name": "Best", "type": "string", "jsonPath": ".status.bestValue"},
        {"name": "Best Trial", "type": "string", "jsonPath": ".status.result.trainJobName", "priority": 1},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    version: Obj = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns,
    }
    names = {
        "kind": OPTIMIZATIONJOB,
        "listKind": f"{OPTIMIZATIONJOB}List",
        "plural": OPTIMIZATIONJOBS,
        "singular": OPTIMIZATIONJOB.lower(),
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{OPTIMIZATIONJOBS}.{GROUP}"},
        "spec": {"group": GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }


# -- admission -------------------------------------------------------------------------------------------


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def default(obj: Obj, old: Obj | None = None) -> None:
    """The schema's defaults, in place (they apply on every write before admission anyway)."""
    del old
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("numTrials", 1)
    spec.setdefault("parallelTrials", 1)
    if spec.get("searchAlgorithm") is None:
        spec["searchAlgorithm"] = {"random": {}}
    for objective in _list(spec.get("objectives")):
        if isinstance(objective, dict):
            objective.setdefault("direction", "Minimize")
    for parameter in _list(spec.get("parameters")):
        space = _dict(_dict(parameter).get("searchSpace"))
        for key in ("uniform", "logUniform"):
            if isinstance(space.get(key), dict):
                space[key].setdefault("type", "Float")


def _cel(field: str, message: str, type_name: str = "object") -> FieldError:
    return FieldError(ErrorType.INVALID, field, f"{quote(type_name)}: {message}")


def _double(value: Any) -> float | None:
    if not isinstance(value, str) or not re.match(DOUBLE_PATTERN, value):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _space_problems(space: Obj, path: str) -> list[FieldError]:
    out: list[FieldError] = []
    if sum(1 for key in SPACES if key in space) != 1:
        out.append(_cel(path, ONE_OF_SPACES))
    for key in ("uniform", "logUniform"):
        if not isinstance(space.get(key), dict):
            continue
        low, high = _double(space[key].get("min")), _double(space[key].get("max"))
        if key == "logUniform" and low is not None and low <= 0:
            out.append(_cel(f"{path}.{key}", MIN_POSITIVE))
        if low is not None and high is not None and not low < high:
            out.append(_cel(f"{path}.{key}", MIN_BELOW_MAX))
    return out


def _parameter_problems(spec: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    envs: dict[str, str] = {}
    for i, parameter in enumerate(_list(spec.get("parameters"))):
        parameter = _dict(parameter)
        path = f"spec.parameters[{i}]"
        out += _space_problems(_dict(parameter.get("searchSpace")), f"{path}.searchSpace")
        name = parameter.get("name")
        if not isinstance(name, str) or not name:
            continue
        env = env_name(name)
        if env in envs and envs[env] != name:
            detail = f"{quote(name)}: its env name {env} is also parameter {quote(envs[env])}'s: rename one of them"
            out.append(FieldError(ErrorType.INVALID, f"{path}.name", detail))
        envs.setdefault(env, name)
    trainer = _dict(_dict(_dict(spec.get("trainJobTemplate")).get("spec")).get("trainer"))
    for i, var in enumerate(_list(trainer.get("env"))):
        name = _dict(var).get("name")
        if name in envs:
            field = f"spec.trainJobTemplate.spec.trainer.env[{i}].name"
            detail = (
                f"{name} is set by the OptimizationJob from parameter {quote(envs[name])}: drop it from the template"
            )
            out.append(FieldError(ErrorType.FORBIDDEN, field, detail))
    return out


def _template_problems(template: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    metadata = _dict(template.get("metadata"))
    if "name" in metadata or "namespace" in metadata:
        out.append(_cel("spec.trainJobTemplate.metadata", TEMPLATE_NAME))
    # The TrainJob's own rules on the spec every trial gets (its name is the trial's, checked there).
    trial = {"metadata": {"name": "trial"}, "spec": copy.deepcopy(_dict(template.get("spec")))}
    for problem in trainjob_webhook.validate(trial):
        if problem.field.startswith("spec."):
            out.append(FieldError(problem.type, "spec.trainJobTemplate." + problem.field, problem.detail))
    return out


def validate(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """Every problem of an OptimizationJob at once (create; with ``old``, update)."""
    spec = _dict(obj.get("spec"))
    out: list[FieldError] = []
    if old is not None and _dict(old.get("spec")) != spec:
        out.append(_cel("spec", IMMUTABLE))
    trials, parallel = spec.get("numTrials", 1), spec.get("parallelTrials", 1)
    if isinstance(trials, int) and isinstance(parallel, int) and parallel > trials:
        out.append(_cel("spec", PARALLEL))
    algorithm = _dict(spec.get("searchAlgorithm"))
    if spec.get("searchAlgorithm") is not None and sum(1 for key in ALGORITHMS if key in algorithm) != 1:
        out.append(_cel("spec.searchAlgorithm", ONE_OF_ALGORITHMS))
    if "grid" in algorithm and not all(
        "categorical" in _dict(_dict(p).get("searchSpace")) for p in _list(spec.get("parameters"))
    ):
        out.append(_cel("spec", GRID))
    out += _parameter_problems(spec)
    out += _template_problems(_dict(spec.get("trainJobTemplate")))
    return out
