"""The TrainingJob CRD: every field of seed 004's API reference, typed, bounded and defaulted.

The seed's constraints are schema rules here (``numWorkers`` 1..100, ``framework`` one of
pytorch/tensorflow/jax, the optimizer and backend enums), so the API server refuses a bad value
with its field path before admission, and its defaults (``gpusPerWorker`` 1, ``framework``
pytorch) apply on every write. The parts that are whole Kubernetes types (an env var's
``valueFrom``, an affinity, a toleration) keep unknown fields, as a real server's schema for them
would. What a schema cannot say (cross-field rules, immutability) is ``webhook``'s.
"""

from __future__ import annotations

from typing import Any

from trainyard.api.meta import Obj
from trainyard.api.trainingjob import (
    BACKENDS,
    FRAMEWORKS,
    GROUP,
    KIND,
    MAX_WORKERS,
    OPTIMIZERS,
    PLURAL,
    PYTORCH,
    RESTART_POLICIES,
    SHORT_NAMES,
    SINGULAR,
    STATES,
    STORAGE_TYPES,
    VERSION,
)

_STRING: Obj = {"type": "string"}
_STRINGS: Obj = {"type": "array", "items": _STRING}
_STRING_MAP: Obj = {"type": "object", "additionalProperties": _STRING}
_OPEN: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_BOOL: Obj = {"type": "boolean"}
_NUMBER: Obj = {"type": "number"}
_NUMBER_MAP: Obj = {"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": True}}


def _obj(properties: Obj, **extra: Any) -> Obj:
    return {"type": "object", "properties": properties, **extra}


def _int(**extra: Any) -> Obj:
    return {"type": "integer", "format": "int32", **extra}


def _str(**extra: Any) -> Obj:
    return {"type": "string", **extra}


def _spec() -> Obj:
    env_var = _obj({"name": _STRING, "value": _STRING, "valueFrom": _OPEN}, required=["name"])
    hyperparameters = _obj(
        {
            "learningRate": _NUMBER,
            "batchSize": _int(minimum=1),
            "epochs": _int(minimum=1),
            "optimizer": _str(enum=list(OPTIMIZERS)),
            "warmupSteps": _int(minimum=0),
            "gradientAccumulationSteps": _int(minimum=1),
            "mixedPrecision": _BOOL,
            "additionalParams": _STRING_MAP,
        }
    )
    storage = _obj(
        {
            "type": _str(enum=list(STORAGE_TYPES)),
            "s3Bucket": _STRING,
            "gcsBucket": _STRING,
            "pvcName": _STRING,
            "nfsServer": _STRING,
            "path": _STRING,
        }
    )
    checkpoint = _obj(
        {
            "enabled": _BOOL,
            "frequency": _int(minimum=1),
            "storage": storage,
            "resumeFrom": _STRING,
            "retention": _int(minimum=1),
        }
    )
    return _obj(
        {
            "model": _str(minLength=1),
            "dataset": _str(minLength=1),
            "numWorkers": _int(minimum=1, maximum=MAX_WORKERS),
            "gpusPerWorker": _int(minimum=0, default=1),
            "framework": _str(enum=list(FRAMEWORKS), default=PYTORCH),
            "image": _STRING,
            "command": _STRINGS,
            "args": _STRINGS,
            "env": {"type": "array", "items": env_var},
            "resources": _obj({"limits": _NUMBER_MAP, "requests": _NUMBER_MAP}),
            "hyperparameters": hyperparameters,
            "checkpoint": checkpoint,
            "scheduling": _obj(
                {
                    "priority": _STRING,
                    "nodeSelector": _STRING_MAP,
                    "affinity": _OPEN,
                    "tolerations": {"type": "array", "items": _OPEN},
                }
            ),
            "monitoring": _obj(
                {
                    "enabled": _BOOL,
                    "metricsPort": _int(minimum=1, maximum=65535),
                    "tensorboardEnabled": _BOOL,
                    "mlflowTrackingUri": _STRING,
                    "wandbProject": _STRING,
                }
            ),
            "networking": _obj(
                {
                    "backend": _str(enum=list(BACKENDS)),
                    "masterPort": _int(minimum=1, maximum=65535),
                    "rdmaEnabled": _BOOL,
                }
            ),
            "failurePolicy": _obj(
                {
                    "restartPolicy": _str(enum=list(RESTART_POLICIES)),
                    "backoffLimit": _int(minimum=0),
                    "activeDeadlineSeconds": {"type": "integer", "format": "int64", "minimum": 1},
                }
            ),
            "successPolicy": _obj(
                {
                    "targetAccuracy": {"type": "number", "minimum": 0, "maximum": 1},
                    "earlyStoppingPatience": _int(minimum=1),
                }
            ),
            # trainyard's: the seed's "Suspended (manually suspended by user)" state.
            "suspend": {"type": "boolean", "default": False},
        },
        required=["model", "dataset", "numWorkers"],
    )


def _status() -> Obj:
    counts = {key: _int(minimum=0) for key in ("active", "succeeded", "failed")}
    condition = _obj(
        {
            "type": _STRING,
            "status": _str(enum=["True", "False", "Unknown"]),
            "reason": _STRING,
            "message": _STRING,
            "lastTransitionTime": _str(format="date-time"),
        },
        required=["type", "status"],
    )
    return _obj(
        {
            "state": _str(enum=list(STATES)),
            "conditions": {"type": "array", "items": condition},
            "progress": _STRING,
            "currentEpoch": _int(minimum=0),
            "totalEpochs": _int(minimum=0),
            "metrics": _OPEN,
            "workers": _obj(counts),
            "checkpoint": _obj({"path": _STRING, "epoch": _int(minimum=0), "time": _STRING}),
            "resources": _obj({"workers": _int(minimum=0), "gpusPerWorker": _int(minimum=0), "gpus": _int(minimum=0)}),
            "job": _obj({"apiVersion": _STRING, "kind": _STRING, "name": _STRING}),
            "startTime": _str(format="date-time"),
            "completionTime": _str(format="date-time"),
            "duration": _STRING,
            "failureReason": _STRING,
            "restartCount": _int(minimum=0),
        }
    )


PRINTER_COLUMNS: list[Obj] = [
    {"name": "State", "type": "string", "jsonPath": ".status.state"},
    {"name": "Progress", "type": "string", "jsonPath": ".status.progress"},
    {"name": "Epoch", "type": "integer", "jsonPath": ".status.currentEpoch"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    {"name": "Framework", "type": "string", "jsonPath": ".spec.framework", "priority": 1},
    {"name": "Workers", "type": "integer", "jsonPath": ".spec.numWorkers", "priority": 1},
    {"name": "Loss", "type": "string", "jsonPath": ".status.metrics.loss", "priority": 1},
    {"name": "Accuracy", "type": "string", "jsonPath": ".status.metrics.accuracy", "priority": 1},
]
"""``kubectl get trainingjobs``: the seed's ``NAME STATE PROGRESS EPOCH AGE``; ``-o wide`` adds the rest."""


def schema() -> Obj:
    """``TrainingJob``'s openAPIV3Schema."""
    return _obj(
        {
            "apiVersion": _STRING,
            "kind": _STRING,
            "metadata": {"type": "object"},
            "spec": _spec(),
            "status": _status(),
        },
        required=["spec"],
    )


def crd() -> Obj:
    version: Obj = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema()},
        "subresources": {"status": {}},
        "additionalPrinterColumns": PRINTER_COLUMNS,
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": SINGULAR,
                "shortNames": list(SHORT_NAMES),
            },
            "scope": "Namespaced",
            "versions": [version],
        },
    }
