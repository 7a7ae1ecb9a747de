"""The CRDs of the two gang schedulers' PodGroups (scheduler-plugins' ``scheduling.x-k8s.io`` and
Volcano's ``scheduling.volcano.sh``) and Volcano's Queue, with Volcano's ``default`` queue: what a
cluster serves for them, and the embedded plane installs (the scheduler decides over them)."""

from __future__ import annotations

from trainyard.api.meta import Obj

X_K8S = "scheduling.x-k8s.io"


VOLCANO = "scheduling.volcano.sh"


DEFAULT_QUEUE = "default"


_QUANTITY: Obj = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$",
    "x-kubernetes-int-or-string": True,
}


_RESOURCES: Obj = {"type": "object", "additionalProperties": _QUANTITY}


_INT32: Obj = {"type": "integer", "format": "int32"}


_TIME: Obj = {"type": "string", "format": "date-time"}


def _crd(
    group: str,
    kind: str,
    plural: str,
    short: list[str],
    schema: Obj,
    columns: list[Obj],
    *,
    version: str,
    scope: str = "Namespaced",
) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
            },
            "scope": scope,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


def _root(spec: Obj, status: Obj) -> Obj:
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", **spec},
            "status": {"type": "object", **status},
        },
    }


_CONDITION: Obj = {
    "type": "object",
    "properties": {
        "type": {"type": "string"},
        "status": {"type": "string"},
        "transitionID": {"type": "string"},
        "lastTransitionTime": _TIME,
        "reason": {"type": "string"},
        "message": {"type": "string"},
    },
}


def crds() -> list[Obj]:
    """The CRDs of both projects' PodGroups and of Volcano's Queue."""
    x_k8s = _crd(
        X_K8S,
        "PodGroup",
        "podgroups",
        ["pg", "pgs"],
        _root(
            {
                "properties": {
                    "minMember": _INT32,
                    "minResources": _RESOURCES,
                    "scheduleTimeoutSeconds": _INT32,
                }
            },
            {
                "properties": {
                    "phase": {"type": "string"},
                    "occupiedBy": {"type": "string"},
                    "scheduled": _INT32,
                    "running": _INT32,
                    "succeeded": _INT32,
                    "failed": _INT32,
                    "scheduleStartTime": _TIME,
                    "conditions": {"type": "array", "items": _CONDITION},
                }
            },
        ),
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "MinMember", "type": "integer", "jsonPath": ".spec.minMember"},
            {"name": "Running", "type": "integer", "jsonPath": ".status.running"},
            {"name": "Succeeded", "type": "integer", "jsonPath": ".status.succeeded"},
            {"name": "Failed", "type": "integer", "jsonPath": ".status.failed"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        version="v1alpha1",
    )
    volcano = _crd(
        VOLCANO,
        "PodGroup",
        "podgroups",
        ["pg", "podgroup-v1beta1"],
        _root(
            {
                "properties": {
                    "minMember": _INT32,
                    "minTaskMember": {"type": "object", "additionalProperties": _INT32},
                    "queue": {"type": "string"},
                    "priorityClassName": {"type": "string"},
                    "minResources": _RESOURCES,
                    "networkTopology": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                }
            },
            {
                "properties": {
                    "phase": {"type": "string"},
                    "conditions": {"type": "array", "items": _CONDITION},
                    "running": _INT32,
                    "succeeded": _INT32,
                    "failed": _INT32,
                }
            },
        ),
        [
            {"name": "STATUS", "type": "string", "jsonPath": ".status.phase"},
            {"name": "minMember", "type": "integer", "jsonPath": ".spec.minMember"},
            {"name": "RUNNINGS", "type": "integer", "jsonPath": ".status.running"},
            {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "QUEUE", "type": "string", "priority": 1, "jsonPath": ".spec.queue"},
        ],
        version="v1beta1",
    )
    queue = _crd(
        VOLCANO,
        "Queue",
        "queues",
        ["q", "queue-v1beta1"],
        _root(
            {
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "weight": _INT32,
                    "capability": _RESOURCES,
                    "deserved": _RESOURCES,
                    "reclaimable": {"type": "boolean"},
                    "parent": {"type": "string"},
                },
            },
            {
                "x-kubernetes-preserve-unknown-fields": True,
                "properties": {
                    "state": {"type": "string"},
                    "pending": _INT32,
                    "running": _INT32,
                    "inqueue": _INT32,
                    "completed": _INT32,
                    "unknown": _INT32,
                },
            },
        ),
        [
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "State", "type": "string", "jsonPath": ".status.state"},
            {"name": "Weight", "type": "integer", "priority": 1, "jsonPath": ".spec.weight"},
        ],
        version="v1beta1",
        scope="Cluster",
    )
    return [x_k8s, volcano, queue]


def default_queue() -> Obj:
    """Volcano's ``default`` queue, as its admission controller creates it."""
    return {"metadata": {"name": DEFAULT_QUEUE}, "spec": {"weight": 1, "reclaimable": True}}
