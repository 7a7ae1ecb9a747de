"""The JSON shape of what the plane reads in an object, checked before anything reads it.

kube-apiserver decodes every body into Go structs, so a field of the wrong JSON type is a 400
(``... cannot be handled as a Pod: json: cannot unmarshal ...``) and a ``null`` is the zero value.
The embedded plane stores dicts; ``check`` gives it the same boundary for the fields that its own
code (admission, defaults, tables, selectors, the garbage collector, the node agent) reads, and
leaves every other field free, as a schemaless store would. ``admission_causes`` adds the
validation that keeps stored objects usable: names, ownerReferences, CRD definitions (422).
"""

from __future__ import annotations

import re
from typing import Any

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.builtin import autoscaling, disruptionbudgets, jobs, leases, limits, quota
from trainyard.cluster.server.apiserver.registry import ResourceType

# A shape is one of the scalar names below, a dict of field shapes (a struct; "*" makes it a
# map with those values), or a one-element list (a list of that shape).
STR, INT, BOOL, OBJ, QUANTITY, INT_OR_STR = "string", "integer", "boolean", "object", "quantity", "int-or-string"
Shape = str | dict[str, Any] | list[Any]

STRINGS: Shape = {"*": STR}
OWNER_REFERENCE: Shape = {
    "apiVersion": STR,
    "kind": STR,
    "name": STR,
    "uid": STR,
    "controller": BOOL,
    "blockOwnerDeletion": BOOL,
}
OBJECT_META: Shape = {
    "name": STR,
    "generateName": STR,
    "namespace": STR,
    "selfLink": STR,
    "uid": STR,
    "resourceVersion": STR,
    "generation": INT,
    "creationTimestamp": STR,
    "deletionTimestamp": STR,
    "deletionGracePeriodSeconds": INT,
    "labels": STRINGS,
    "annotations": STRINGS,
    "ownerReferences": [OWNER_REFERENCE],
    "finalizers": [STR],
    "managedFields": [OBJ],
}
CONTAINER: Shape = {
    "name": STR,
    "image": STR,
    "command": [STR],
    "args": [STR],
    "workingDir": STR,
    "env": [{"name": STR, "value": STR, "valueFrom": OBJ}],
    "envFrom": [OBJ],
    "ports": [{"name": STR, "containerPort": INT, "hostPort": INT, "protocol": STR, "hostIP": STR}],
    "resources": {"limits": {"*": QUANTITY}, "requests": {"*": QUANTITY}},
    "volumeMounts": [{"name": STR, "mountPath": STR, "readOnly": BOOL, "subPath": STR}],
}
STATE: Shape = {
    "waiting": {"reason": STR, "message": STR},
    "running": {"startedAt": STR},
    "terminated": {
        "exitCode": INT,
        "signal": INT,
        "reason": STR,
        "message": STR,
        "startedAt": STR,
        "finishedAt": STR,
        "containerID": STR,
    },
}
CONTAINER_STATUS: Shape = {
    "name": STR,
    "ready": BOOL,
    "started": BOOL,
    "restartCount": INT,
    "image": STR,
    "imageID": STR,
    "containerID": STR,
    "state": STATE,
    "lastState": STATE,
}
CONDITION: Shape = {
    "type": STR,
    "status": STR,
    "reason": STR,
    "message": STR,
    "lastTransitionTime": STR,
    "lastProbeTime": STR,
    "lastHeartbeatTime": STR,
}
POD: dict[str, Any] = {
    "spec": {
        "containers": [CONTAINER],
        "initContainers": [CONTAINER],
        "nodeName": STR,
        "restartPolicy": STR,
        "schedulerName": STR,
        "serviceAccountName": STR,
        "hostNetwork": BOOL,
        "dnsPolicy": STR,
        "terminationGracePeriodSeconds": INT,
        "activeDeadlineSeconds": INT,
        "priority": INT,
        "priorityClassName": STR,
        "volumes": [{"name": STR}],
        "nodeSelector": STRINGS,
    },
    "status": {
        "phase": STR,
        "reason": STR,
        "message": STR,
        "podIP": STR,
        "hostIP": STR,
        "nominatedNodeName": STR,
        "startTime": STR,
        "qosClass": STR,
        "conditions": [CONDITION],
        "containerStatuses": [CONTAINER_STATUS],
        "initContainerStatuses": [CONTAINER_STATUS],
    },
}
SHAPES: dict[str, dict[str, Any]] = {
    "core/namespaces": {"spec": {"finalizers": [STR]}, "status": {"phase": STR, "conditions": [CONDITION]}},
    "core/pods": POD,
    "core/services": {
        "spec": {
            "type": STR,
            "clusterIP": STR,
            "clusterIPs": [STR],
            "selector": STRINGS,
            "sessionAffinity": STR,
            "ports": [{"name": STR, "protocol": STR, "port": INT, "targetPort": INT_OR_STR, "nodePort": INT}],
        },
        "status": {"loadBalancer": OBJ, "conditions": [OBJ]},
    },
    "core/events": {
        "involvedObject": {
            "kind": STR,
            "namespace": STR,
            "name": STR,
            "uid": STR,
            "apiVersion": STR,
            "resourceVersion": STR,
            "fieldPath": STR,
        },
        "reason": STR,
        "message": STR,
        "type": STR,
        "count": INT,
        "source": {"component": STR, "host": STR},
        "firstTimestamp": STR,
        "lastTimestamp": STR,
        "eventTime": STR,
        "reportingComponent": STR,
        "reportingInstance": STR,
    },
    "core/configmaps": {"data": STRINGS, "binaryData": STRINGS, "immutable": BOOL},
    "core/secrets": {"data": STRINGS, "stringData": STRINGS, "type": STR, "immutable": BOOL},
    "core/serviceaccounts": {
        "secrets": [{"kind": STR, "namespace": STR, "name": STR, "uid": STR, "apiVersion": STR}],
        "imagePullSecrets": [{"name": STR}],
        "automountServiceAccountToken": BOOL,
    },
    "core/nodes": {
        "spec": {"unschedulable": BOOL, "taints": [OBJ], "podCIDR": STR},
        "status": {
            "conditions": [CONDITION],
            "nodeInfo": STRINGS,
            "capacity": {"*": QUANTITY},
            "allocatable": {"*": QUANTITY},
            "addresses": [{"type": STR, "address": STR}],
        },
    },
    autoscaling.KEY: autoscaling.SHAPE,
    jobs.KEY: {
        "spec": {
            **jobs.SPEC_SCALARS,
            "template": {"metadata": {"labels": STRINGS, "annotations": STRINGS}, "spec": POD["spec"]},
        },
        "status": jobs.SHAPE_STATUS,
    },
    "scheduling.k8s.io/priorityclasses": {
        "value": INT,
        "globalDefault": BOOL,
        "description": STR,
        "preemptionPolicy": STR,
    },
    leases.KEY: leases.SHAPE,
    disruptionbudgets.KEY: disruptionbudgets.SHAPE,
    quota.KEY: quota.SHAPE,
    limits.KEY: limits.SHAPE,
    "apiextensions.k8s.io/customresourcedefinitions": {
        "spec": {
            "group": STR,
            "scope": STR,
            "names": {
                "plural": STR,
                "singular": STR,
                "kind": STR,
                "listKind": STR,
                "shortNames": [STR],
                "categories": [STR],
            },
            "versions": [
                {
                    "name": STR,
                    "served": BOOL,
                    "storage": BOOL,
                    "schema": OBJ,
                    "subresources": {
                        "status": OBJ,
                        "scale": {"specReplicasPath": STR, "statusReplicasPath": STR, "labelSelectorPath": STR},
                    },
                    "additionalPrinterColumns": [
                        {
                            "name": STR,
                            "type": STR,
                            "format": STR,
                            "description": STR,
                            "priority": INT,
                            "jsonPath": STR,
                        }
                    ],
                }
            ],
        },
    },
}
_JSON_NAMES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}


class ShapeError(ValueError):
    """A field of the wrong JSON type; its path is put together on the way out (``within``), so a
    write that fits pays nothing for paths it never reports."""

    def __init__(self, expected: str, value: Any) -> None:
        super().__init__(expected)
        self.expected = expected
        self.got = _JSON_NAMES.get(type(value), type(value).__name__)
        self.segments: list[str] = []

    def within(self, segment: str) -> ShapeError:
        self.segments.append(segment)
        return self

    def __str__(self) -> str:
        path = "".join(reversed(self.segments)).removeprefix(".")
        return f"{path}: expected {self.expected}, got {self.got}"


def _fits(shape: str, value: Any) -> bool:
    if shape == STR:
        return isinstance(value, str)
    if shape == INT:
        # Go decodes 3.0 into an int too; a fraction it refuses.
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if shape == BOOL:
        return isinstance(value, bool)
    if shape == OBJ:
        return isinstance(value, dict)
    if shape == QUANTITY:
        return isinstance(value, str | int | float) and not isinstance(value, bool)
    return isinstance(value, str | int) and not isinstance(value, bool)  # INT_OR_STR


_ZERO = {STR: "", BOOL: False, INT: 0, QUANTITY: "0", INT_OR_STR: 0}


def _normalise(shape: Shape, value: Any) -> Any:
    """``value`` checked against ``shape``, with nulls read as Go reads them (the zero value)."""
    if isinstance(shape, str):
        if value is None:
            return {} if shape == OBJ else _ZERO[shape]
        if not _fits(shape, value):
            raise ShapeError(shape, value)
        return int(value) if shape == INT else value
    if isinstance(shape, list):
        if value is None:
            return []
        if not isinstance(value, list):
            raise ShapeError("array", value)
        items = []
        for i, v in enumerate(value):
            try:
                items.append(_normalise(shape[0], v))
            except ShapeError as exc:
                raise exc.within(f"[{i}]") from None
        return items
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ShapeError("object", value)
    out = {}
    each = shape.get("*")
    for key, v in value.items():
        field = each if each is not None else shape.get(key)
        if field is None:
            out[key] = v  # not in the shape (a map's own keys are all in it)
        elif v is not None or each is not None:  # a null field: what Go's omitempty would write
            try:
                out[key] = _normalise(field, v)
            except ShapeError as exc:
                raise exc.within(f"[{key}]" if each is not None else f".{key}") from None
    return out


def check(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with its nulls normalised; 400 ``BadRequest`` when a field has the wrong JSON type."""
    shape = {"apiVersion": STR, "kind": STR, "metadata": OBJECT_META, **SHAPES.get(rt.key, {})}
    try:
        return dict(_normalise(shape, obj))
    except ShapeError as exc:
        raise errors.bad_request(
            f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {exc}'
        ) from exc


# -- admission ------------------------------------------------------------------------------------

DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
Cause = tuple[str, str, str]


def _name_causes(rt: ResourceType, name: str) -> list[Cause]:
    if rt.key == "core/nodes":
        # The node agent names its node after the host, which may not be a DNS name; only what
        # would break a URL path is refused, as for any path segment.
        if name in (".", "..") or "/" in name or "%" in name:
            return [("FieldValueInvalid", "metadata.name", f"Invalid value: {name!r}: may not contain '/' or '%'")]
        return []
    if rt.key == "core/namespaces":
        pattern, limit, what = DNS1123_LABEL, 63, "a lowercase RFC 1123 label"
    elif rt.key == "core/services":
        pattern, limit, what = DNS1035_LABEL, 63, "a DNS-1035 label"
    else:
        pattern, limit, what = DNS1123_SUBDOMAIN, 253, "a lowercase RFC 1123 subdomain"
    if pattern.fullmatch(name) and len(name) <= limit:
        return []
    rule = (
        f"{what} must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
        f"with an alphanumeric character, at most {limit} characters"
    )
    return [("FieldValueInvalid", "metadata.name", f"Invalid value: {name!r}: {rule}")]


def _owner_causes(meta: dict[str, Any]) -> list[Cause]:
    causes = []
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                causes.append(("FieldValueRequired", f"metadata.ownerReferences[{i}].{key}", "Required value"))
    return causes


def _crd_causes(crd: dict[str, Any]) -> list[Cause]:
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group", ""), names.get("plural", ""), names.get("kind", "")
    versions = spec.get("versions") or []
    checks = [
        (DNS1123_SUBDOMAIN.fullmatch(group) and "." in group, "spec.group", group, "a domain with at least one dot"),
        (DNS1123_LABEL.fullmatch(plural), "spec.names.plural", plural, "a lowercase RFC 1123 label"),
        (
            DNS1123_LABEL.fullmatch(names.get("singular") or "x"),
            "spec.names.singular",
            names.get("singular"),
            "a lowercase RFC 1123 label",
        ),
        (re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", kind), "spec.names.kind", kind, "a CamelCase kind"),
        (spec.get("scope") in ("Namespaced", "Cluster"), "spec.scope", spec.get("scope"), "Cluster or Namespaced"),
        (
            sum(bool(v.get("storage")) for v in versions) == 1,
            "spec.versions",
            len(versions),
            "must have exactly one version marked as storage version",
        ),
    ]
    checks += [
        (DNS1035_LABEL.fullmatch(v.get("name", "")), f"spec.versions[{i}].name", v.get("name"), "a DNS-1035 label")
        for i, v in enumerate(versions)
    ]
    name = (crd.get("metadata") or {}).get("name")
    checks.append((name == f"{plural}.{group}", "metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    return [("FieldValueInvalid", at, f"Invalid value: {value!r}: {rule}") for ok, at, value, rule in checks if not ok]


def admission_causes(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    """The 422 causes every kind shares (names, ownerReferences) plus a CRD's own rules."""
    meta = obj.get("metadata") or {}
    causes = _name_causes(rt, meta.get("name", "")) + _owner_causes(meta)
    if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
        causes += _crd_causes(obj)
    return causes
