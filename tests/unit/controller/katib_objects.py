"""Katib objects as the API server would hold them after defaulting, for the controllers' unit tests."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def experiment(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "objective": {
            "type": "minimize",
            "objectiveMetricName": "loss",
            "additionalMetricNames": ["accuracy"],
            "metricStrategies": [{"name": "loss", "value": "min"}, {"name": "accuracy", "value": "max"}],
        },
        "algorithm": {"algorithmName": "random", "algorithmSettings": [{"name": "random_state", "value": "7"}]},
        "parallelTrialCount": 2,
        "maxTrialCount": 4,
        "maxFailedTrialCount": 2,
        "resumePolicy": "Never",
        "parameters": [
            {"name": "lr", "parameterType": "double", "feasibleSpace": {"min": "0.001", "max": "0.1"}},
            {"name": "units", "parameterType": "int", "feasibleSpace": {"min": "8", "max": "64"}},
        ],
        "metricsCollectorSpec": {"collector": {"kind": "StdOut"}},
        "trialTemplate": {
            "primaryContainerName": "training",
            "successCondition": 'status.conditions.#(type=="Complete")#|#(status=="True")#',
            "failureCondition": 'status.conditions.#(type=="Failed")#|#(status=="True")#',
            "trialParameters": [
                {"name": "learningRate", "reference": "lr"},
                {"name": "units", "reference": "units"},
                {"name": "trialName", "reference": "${trialSpec.Name}"},
            ],
            "trialSpec": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "training",
                                    "image": "python:3.11",
                                    "command": [
                                        "python",
                                        "train.py",
                                        "--lr=${trialParameters.learningRate}",
                                        "--units=${trialParameters.units}",
                                        "--name=${trialParameters.trialName}",
                                    ],
                                }
                            ],
                        }
                    }
                },
            },
        },
    }
    base.update(copy.deepcopy(spec))
    return {
        "apiVersion": "kubeflow.org/v1beta1",
        "kind": "Experiment",
        "metadata": {
            "name": "digits",
            "namespace": "default",
            "uid": "uid-1",
            "resourceVersion": "1",
            "creationTimestamp": "2026-12-03T11:00:00Z",
        },
        "spec": base,
    }


def finished_trial(trial: dict[str, Any], state: str, loss: float | None, created: str) -> dict[str, Any]:
    """``trial`` (as the Experiment made it) ended ``state`` with ``loss`` as its observed min."""
    out = copy.deepcopy(trial)
    out["metadata"].update(
        {"uid": f"uid-{out['metadata']['name']}", "creationTimestamp": created, "resourceVersion": "5"}
    )
    status: dict[str, Any] = {"conditions": [{"type": state, "status": "True", "reason": state}]}
    if loss is not None:
        status["observation"] = {
            "metrics": [{"name": "loss", "min": str(loss), "max": str(loss + 1), "latest": str(loss)}]
        }
    out["status"] = status
    return out
