"""The three CRDs of ``kubeflow.org/v1beta1``: Experiment, Suggestion and Trial, structural schemas.

Katib v0.19 ships these CRDs with a schema that keeps every field (``x-kubernetes-preserve-unknown-
fields`` at the root) and checks nothing until its webhook decodes the object into its Go types.
Here the schemas are written from those Go types (``pkg/apis/controller/*/v1beta1``), with their
JSON names, so a misspelt field is pruned (or, with kubectl's ``fieldValidation=Strict``, rejected)
instead of silently ignored. The parts that are free-form in Katib stay open: the trial template
(``trialSpec``, a Trial's ``runSpec``: any kind of job), a custom collector's container, an HTTP
probe, NAS's config. Printer columns, names and categories are Katib's manifests'.
"""

from __future__ import annotations

import json
from typing import Any

from trainyard.api.katib import EXPERIMENT, EXPERIMENTS, GROUP, SUGGESTION, SUGGESTIONS, TRIAL, TRIALS, VERSION
from trainyard.api.meta import Obj

CATEGORIES = ("all", "kubeflow", "katib")

_STRING: Obj = {"type": "string"}
_INT32: Obj = {"type": "integer", "format": "int32"}
_TIME: Obj = {"type": "string", "format": "date-time"}
_STRING_MAP: Obj = {"type": "object", "additionalProperties": _STRING}
_OPEN: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_SET: Obj = {"type": "array", "items": _STRING, "x-kubernetes-list-type": "set"}


def _obj(properties: Obj, **extra: Any) -> Obj:
    return {"type": "object", "properties": properties, **extra}


def _map_list(properties: Obj, key: str = "name") -> Obj:
    """A ``+listType=map`` list: one element per key (Kubernetes rejects a duplicate key)."""
    return {
        "type": "array",
        "items": _obj(properties, required=[key]),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
    }


_NAME_VALUE = {"name": _STRING, "value": _STRING}
_ALGORITHM = _obj({"algorithmName": _STRING, "algorithmSettings": _map_list(_NAME_VALUE)})
_OBJECTIVE = _obj(
    {
        "type": _STRING,
        "goal": {"type": "number"},
        "objectiveMetricName": _STRING,
        "additionalMetricNames": _SET,
        "metricStrategies": _map_list(_NAME_VALUE),
    }
)
_ASSIGNMENTS = _map_list(_NAME_VALUE)
_EARLY_STOPPING_RULES = _map_list(
    {"name": _STRING, "value": _STRING, "comparison": _STRING, "startStep": {"type": "integer"}}
)
_OBSERVATION = _obj({"metrics": _map_list({"name": _STRING, "min": _STRING, "max": _STRING, "latest": _STRING})})
# trainyard's addition: every value collected, in Katib's ObservationLog shape (its db-manager's
# GetObservationLog answer), so kubectl and the dashboard see a trial's curves without the store.
_OBSERVATION_LOG = _obj(
    {
        "metricLogs": {
            "type": "array",
            "items": _obj({"timeStamp": _STRING, "metric": _obj({"name": _STRING, "value": _STRING})}),
        }
    }
)
_METRICS_COLLECTOR = _obj(
    {
        "source": _obj(
            {
                "httpGet": _OPEN,
                "fileSystemPath": _obj({"path": _STRING, "kind": _STRING, "format": _STRING}),
                "filter": _obj({"metricsFormat": _SET}),
            }
        ),
        "collector": _obj({"kind": _STRING, "customCollector": _OPEN}),
    }
)
_CONDITIONS = _map_list(
    {
        "type": _STRING,
        "status": _STRING,
        "reason": _STRING,
        "message": _STRING,
        "lastUpdateTime": _TIME,
        "lastTransitionTime": _TIME,
    },
    key="type",
)
_CONDITIONS["items"]["required"] = ["type", "status"]
_TIMES = {"startTime": _TIME, "completionTime": _TIME, "lastReconcileTime": _TIME}


def _root(spec: Obj, status: Obj) -> Obj:
    return _obj(
        {"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": spec, "status": status}
    )


def experiment_schema() -> Obj:
    """``Experiment``'s openAPIV3Schema (``ExperimentSpec``, ``ExperimentStatus``)."""
    feasible_space = _obj({"max": _STRING, "min": _STRING, "list": _SET, "step": _STRING, "distribution": _STRING})
    trial_template = _obj(
        {
            "retain": {"type": "boolean"},
            "trialSpec": _OPEN,
            "configMap": _obj({"configMapName": _STRING, "configMapNamespace": _STRING, "templatePath": _STRING}),
            "trialParameters": _map_list({"name": _STRING, "description": _STRING, "reference": _STRING}),
            "primaryPodLabels": _STRING_MAP,
            "primaryContainerName": _STRING,
            "successCondition": _STRING,
            "failureCondition": _STRING,
        }
    )
    spec = _obj(
        {
            "parameters": _map_list({"name": _STRING, "parameterType": _STRING, "feasibleSpace": feasible_space}),
            "objective": _OBJECTIVE,
            "algorithm": _ALGORITHM,
            "earlyStopping": _ALGORITHM,
            "trialTemplate": trial_template,
            "parallelTrialCount": _INT32,
            "maxTrialCount": _INT32,
            "maxFailedTrialCount": _INT32,
            "metricsCollectorSpec": _METRICS_COLLECTOR,
            "nasConfig": _OPEN,  # Katib's NAS (ENAS, DARTS): not run by trainyard, refused by the webhook
            "resumePolicy": _STRING,
        }
    )
    lists = {
        f"{state}TrialList": _SET
        for state in ("running", "pending", "failed", "succeeded", "killed", "earlyStopped", "metricsUnavailable")
    }
    counts = {
        key: _INT32
        for key in (
            "trials",
            "trialsSucceeded",
            "trialsFailed",
            "trialsKilled",
            "trialsPending",
            "trialsRunning",
            "trialsEarlyStopped",
            "trialMetricsUnavailable",
        )
    }
    status = _obj(
        {
            **_TIMES,
            "conditions": _CONDITIONS,
            "currentOptimalTrial": _obj(
                {"bestTrialName": _STRING, "parameterAssignments": _ASSIGNMENTS, "observation": _OBSERVATION}
            ),
            **lists,
            **counts,
        }
    )
    return _root(spec, status)


def suggestion_schema() -> Obj:
    """``Suggestion``'s openAPIV3Schema (``SuggestionSpec``, ``SuggestionStatus``)."""
    spec = _obj({"algorithm": _ALGORITHM, "earlyStopping": _ALGORITHM, "requests": _INT32, "resumePolicy": _STRING})
    assignment = _map_list(
        {
            "name": _STRING,
            "parameterAssignments": _ASSIGNMENTS,
            "earlyStoppingRules": _EARLY_STOPPING_RULES,
            "labels": _STRING_MAP,
        }
    )
    status = _obj(
        {
            "algorithmSettings": _map_list(_NAME_VALUE),
            "suggestionCount": _INT32,
            "suggestions": assignment,
            **_TIMES,
            "conditions": _CONDITIONS,
        }
    )
    return _root(spec, status)


def trial_schema() -> Obj:
    """``Trial``'s openAPIV3Schema (``TrialSpec``, ``TrialStatus``)."""
    spec = _obj(
        {
            "objective": _OBJECTIVE,
            "parameterAssignments": _ASSIGNMENTS,
            "earlyStoppingRules": _EARLY_STOPPING_RULES,
            "runSpec": _OPEN,
            "retainRun": {"type": "boolean"},
            "metricsCollector": _METRICS_COLLECTOR,
            "primaryPodLabels": _STRING_MAP,
            "primaryContainerName": _STRING,
            "successCondition": _STRING,
            "failureCondition": _STRING,
            "labels": _STRING_MAP,
        }
    )
    status = _obj(
        {**_TIMES, "conditions": _CONDITIONS, "observation": _OBSERVATION, "observationLog": _OBSERVATION_LOG}
    )
    return _root(spec, status)


# Katib's manifests' columns: the last condition's type and status (its controllers append them).
_TYPE = {"name": "Type", "type": "string", "jsonPath": ".status.conditions[-1:].type"}
_STATUS = {"name": "Status", "type": "string", "jsonPath": ".status.conditions[-1:].status"}
_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}


def _crd(kind: str, plural: str, schema: Obj, columns: list[Obj]) -> Obj:
    version: Obj = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "subresources": {"status": {}},
        "additionalPrinterColumns": columns,
    }
    names = {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "categories": list(CATEGORIES),
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {"group": GROUP, "names": names, "scope": "Namespaced", "versions": [version]},
    }
    # A fresh tree: the shared pieces above are neither aliased in deploy/'s YAML nor changed by a reader.
    copied: Obj = json.loads(json.dumps(crd))
    return copied


def crds() -> list[Obj]:
    """Experiment, Suggestion and Trial, each with ``status``; Katib names no short names."""
    requested = {"name": "Requested", "type": "string", "jsonPath": ".spec.requests"}
    assigned = {"name": "Assigned", "type": "string", "jsonPath": ".status.suggestionCount"}
    return [
        _crd(EXPERIMENT, EXPERIMENTS, experiment_schema(), [_TYPE, _STATUS, _AGE]),
        _crd(SUGGESTION, SUGGESTIONS, suggestion_schema(), [_TYPE, _STATUS, requested, assigned, _AGE]),
        _crd(TRIAL, TRIALS, trial_schema(), [_TYPE, _STATUS, _AGE]),
    ]
