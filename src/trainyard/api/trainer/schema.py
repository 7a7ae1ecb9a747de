"""The three CRDs of ``trainer.kubeflow.org/v1alpha1``: structural schemas with upstream's field names.

Hand-written from the Go types of Kubeflow Trainer v2.3 (``TrainJobSpec``, ``TrainingRuntimeSpec``):
every field the API and the official SDK use is typed; the parts that are whole Kubernetes types
(a JobSet spec inside a runtime's template, a volume, an affinity) keep unknown fields, as a real
server's schema for them would accept anything Kubernetes accepts there. The ``kubebuilder``
defaults of upstream are schema defaults here too, so they apply on every write before admission.

CEL rules (``x-kubernetes-validations``) are not evaluated by the embedded plane; the webhook
(``trainyard.api.trainer.webhook``) checks the same rules in the same words instead.
"""

from __future__ import annotations

from typing import Any

from trainyard.api.meta import Obj
from trainyard.api.trainer import (
    CLUSTER_TRAINING_RUNTIME,
    CLUSTER_TRAINING_RUNTIMES,
    CONTROLLER_NAME,
    GROUP,
    STATES,
    TRAINING_RUNTIME,
    TRAINING_RUNTIMES,
    TRAINJOB,
    TRAINJOBS,
    VERSION,
)

MPI_IMPLEMENTATIONS = ("OpenMPI", "Intel", "MPICH")
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

_INT32: Obj = {"type": "integer", "format": "int32"}
_STRING: Obj = {"type": "string"}
_STRINGS: Obj = {"type": "array", "items": _STRING}
_STRING_MAP: Obj = {"type": "object", "additionalProperties": _STRING}
_OPEN: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_OPEN_LIST: Obj = {"type": "array", "items": _OPEN}
# A resource.Quantity as Kubernetes publishes it: an integer or a string, so the JSON number the
# SDK sends (``"cpu": 2.0``) passes as it would on a real cluster.
_QUANTITY: Obj = {"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN}


def _obj(properties: Obj, **extra: Any) -> Obj:
    return {"type": "object", "properties": properties, **extra}


def _int32(**extra: Any) -> Obj:
    return {**_INT32, **extra}


def _str(**extra: Any) -> Obj:
    return {"type": "string", **extra}


def _map_list(items: Obj, key: str, **extra: Any) -> Obj:
    return {
        "type": "array",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
        **extra,
    }


_ENV_VAR = _obj({"name": _STRING, "value": _STRING, "valueFrom": _OPEN}, required=["name"])
_ENV = _map_list(_ENV_VAR, "name", maxItems=128)
_RESOURCES = _obj(
    {
        "limits": {"type": "object", "additionalProperties": _QUANTITY},
        "requests": {"type": "object", "additionalProperties": _QUANTITY},
        "claims": _OPEN_LIST,
    }
)
_PATCH_META = _obj({"labels": _STRING_MAP, "annotations": _STRING_MAP})
_CONDITION = _obj(
    {
        "type": _str(maxLength=316),
        "status": _str(enum=["True", "False", "Unknown"]),
        "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
        "lastTransitionTime": _str(format="date-time"),
        "reason": _str(maxLength=1024),
        "message": _str(maxLength=32768),
    },
    required=["type", "status", "lastTransitionTime", "reason", "message"],
)


def _storage(**extra: Any) -> Obj:
    return _obj(
        {
            "storageUri": _str(maxLength=2048),
            "env": _ENV,
            "secretRef": _obj({"name": _STRING}),
        },
        **extra,
    )


def _pod_spec_patch() -> Obj:
    container = _obj(
        {
            "name": _str(minLength=1, maxLength=253),
            "env": _ENV,
            "volumeMounts": _OPEN_LIST,
            "securityContext": _OPEN,
        },
        required=["name"],
    )
    return _obj(
        {
            "serviceAccountName": _str(maxLength=253),
            "volumes": {**_OPEN_LIST, "maxItems": 128},
            "initContainers": _map_list(container, "name", maxItems=64),
            "containers": _map_list(container, "name", maxItems=64),
            "imagePullSecrets": {"type": "array", "items": _obj({"name": _STRING}), "maxItems": 64},
            "securityContext": _OPEN,
            "nodeSelector": _STRING_MAP,
            "affinity": _OPEN,
            "tolerations": {**_OPEN_LIST, "maxItems": 128},
            "schedulingGates": {"type": "array", "items": _obj({"name": _STRING}), "maxItems": 16},
            "terminationGracePeriodSeconds": {"type": "integer", "format": "int64", "minimum": 0},
        }
    )


def _runtime_patch() -> Obj:
    pod_template = _obj({"metadata": _PATCH_META, "spec": _pod_spec_patch()})
    job_template = _obj({"metadata": _PATCH_META, "spec": _obj({"template": pod_template})})
    replicated_job = _obj({"name": _str(minLength=1, maxLength=253), "template": job_template}, required=["name"])
    jobset_template = _obj(
        {"metadata": _PATCH_META, "spec": _obj({"replicatedJobs": _map_list(replicated_job, "name", maxItems=100)})}
    )
    return _obj(
        {
            "manager": _str(minLength=1, maxLength=253),
            "time": _str(format="date-time"),
            "trainingRuntimeSpec": _obj({"template": jobset_template}),
        },
        required=["manager"],
    )


def trainjob_schema() -> Obj:
    """``TrainJob``'s openAPIV3Schema."""
    spec = _obj(
        {
            "runtimeRef": _obj(
                {
                    "name": _str(minLength=1, maxLength=253),
                    "apiGroup": _str(maxLength=253, default=GROUP),
                    "kind": _str(maxLength=253, default=CLUSTER_TRAINING_RUNTIME),
                },
                required=["name"],
            ),
            "initializer": _obj({"dataset": _storage(), "model": _storage()}),
            "trainer": _obj(
                {
                    "image": _str(maxLength=500),
                    "command": {"type": "array", "items": _str(maxLength=1048576), "maxItems": 128},
                    "args": {"type": "array", "items": _str(maxLength=1048576), "maxItems": 128},
                    "env": _ENV,
                    "numNodes": _int32(minimum=1),
                    "resourcesPerNode": _RESOURCES,
                    "numProcPerNode": _INT32,
                }
            ),
            "runtimePatches": _map_list(_runtime_patch(), "manager", maxItems=16),
            "suspend": {"type": "boolean", "default": False},
            "activeDeadlineSeconds": {"type": "integer", "format": "int64", "minimum": 1},
            "managedBy": _str(maxLength=253, default=CONTROLLER_NAME),
        },
        required=["runtimeRef"],
    )
    counts = {key: _int32(minimum=0) for key in ("ready", "succeeded", "failed", "active", "suspended")}
    status = _obj(
        {
            "conditions": _map_list(_CONDITION, "type", maxItems=8),
            "jobsStatus": _map_list(
                _obj({"name": _str(minLength=1, maxLength=253), **counts}, required=["name"]), "name", maxItems=100
            ),
            "trainerStatus": _obj(
                {
                    "progressPercentage": _int32(minimum=0, maximum=100),
                    "estimatedRemainingSeconds": _int32(minimum=0),
                    "metrics": {
                        "type": "array",
                        "maxItems": 256,
                        "items": _obj(
                            {"name": _str(minLength=1, maxLength=64), "value": _str(minLength=1, maxLength=64)},
                            required=["name", "value"],
                        ),
                    },
                    "lastUpdatedTime": _str(format="date-time"),
                }
            ),
            # trainyard's own: what the STATE column shows (conditions cannot say Pending or Running
            # without hiding "Running" from the official SDK).
            "state": _str(enum=list(STATES)),
        }
    )
    return _root(spec, status)


def runtime_schema() -> Obj:
    """``TrainingRuntime``'s and ``ClusterTrainingRuntime``'s openAPIV3Schema (one spec type)."""
    ml_policy = _obj(
        {
            "numNodes": _INT32,
            "torch": _obj(
                {
                    "numProcPerNode": {"x-kubernetes-int-or-string": True},
                    "envInjection": _obj(
                        {
                            "targets": {
                                "type": "array",
                                "maxItems": 16,
                                "items": _obj(
                                    {
                                        "jobName": _str(minLength=1, maxLength=253),
                                        "containerNames": {
                                            "type": "array",
                                            "minItems": 1,
                                            "maxItems": 8,
                                            "items": _str(maxLength=63),
                                        },
                                    },
                                    required=["jobName", "containerNames"],
                                ),
                            }
                        }
                    ),
                }
            ),
            "mpi": _obj(
                {
                    "numProcPerNode": _int32(default=1),
                    "mpiImplementation": _str(enum=[*MPI_IMPLEMENTATIONS, ""], default="OpenMPI"),
                    "sshAuthMountPath": _str(maxLength=4096, default="/root/.ssh"),
                    "runLauncherAsNode": {"type": "boolean", "default": False},
                }
            ),
            "flux": _obj({"numProcPerNode": _int32(default=1)}),
            "jax": {"type": "object"},
            "xgboost": {"type": "object"},
        }
    )
    pod_group_policy = _obj(
        {
            "coscheduling": _obj({"scheduleTimeoutSeconds": _int32(default=60)}),
            "volcano": _obj({"networkTopology": _OPEN}),
        }
    )
    spec = _obj(
        {
            "mlPolicy": ml_policy,
            "podGroupPolicy": pod_group_policy,
            # A JobSet template: its spec is jobset.x-k8s.io's JobSetSpec, checked when the JobSet is made.
            "template": _obj({"metadata": _PATCH_META, "spec": _OPEN}),
        }
    )
    return _root(spec, None)


def _root(spec: Obj, status: Obj | None) -> Obj:
    properties: Obj = {"apiVersion": _STRING, "kind": _STRING, "metadata": {"type": "object"}, "spec": spec}
    if status is not None:
        properties["status"] = status
    return _obj(properties)


_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_FRAMEWORK = {"name": "Framework", "type": "string", "jsonPath": r".metadata.labels.trainer\.kubeflow\.org/framework"}


def _crd(kind: str, plural: str, scope: str, schema: Obj, columns: list[Obj], *, status: bool) -> Obj:
    version: Obj = {"name": VERSION, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}
    if status:
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = columns
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "scope": scope,
            "versions": [version],
        },
    }


def trainjob_crd() -> Obj:
    columns: list[Obj] = [
        {"name": "State", "type": "string", "jsonPath": ".status.state"},
        {"name": "Runtime", "type": "string", "jsonPath": ".spec.runtimeRef.name"},
        # trainyard's: what the trainer reported (upstream prints no column of trainerStatus)
        {"name": "Progress", "type": "integer", "jsonPath": ".status.trainerStatus.progressPercentage"},
        {
            "name": "ETA",
            "type": "integer",
            "jsonPath": ".status.trainerStatus.estimatedRemainingSeconds",
            "priority": 1,
        },
        _AGE,
    ]
    return _crd(TRAINJOB, TRAINJOBS, "Namespaced", trainjob_schema(), columns, status=True)


def crds() -> list[Obj]:
    """The three CRDs: TrainJob (with ``status``), TrainingRuntime, ClusterTrainingRuntime (cluster-scoped)."""
    runtime_columns = [_FRAMEWORK, _AGE]
    return [
        trainjob_crd(),
        _crd(TRAINING_RUNTIME, TRAINING_RUNTIMES, "Namespaced", runtime_schema(), runtime_columns, status=False),
        _crd(
            CLUSTER_TRAINING_RUNTIME,
            CLUSTER_TRAINING_RUNTIMES,
            "Cluster",
            runtime_schema(),
            runtime_columns,
            status=False,
        ),
    ]
