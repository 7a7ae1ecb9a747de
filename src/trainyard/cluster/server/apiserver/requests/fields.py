"""Which fields of which kind a ``fieldSelector`` reads, and whether an object is selected.

``selectors`` owns the grammar; this module owns what a key means per kind: the keys a kind
registers (pods, events, secrets, namespaces, nodes and services have their own, reference §3.2;
others take ``metadata.name`` and ``metadata.namespace``, custom resources also their CRD's
``selectableFields``), the value each key reads in an object (Go's ``FormatBool`` for booleans,
the first pod IP, the event's source component), and the 400 for a key a kind cannot filter on.

Callers: ``objects`` (lists), ``server`` (the selectors of a request), ``streams`` (watches).
Pure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.requests.selectors import FieldSelector, LabelSelector
from trainyard.cluster.server.storage import codec

# fieldSelector keys of the kinds that register their own (reference §3.2, core/v1 conversion.go);
# an unknown key is 400 "field label not supported: X". Other kinds take metadata.name and
# metadata.namespace (CRs also their CRD's selectableFields) and word the refusal differently.
FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "core/pods": (
        "metadata.name",
        "metadata.namespace",
        "spec.nodeName",
        "spec.host",  # what old clients send for spec.nodeName
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    ),
    "core/events": (
        "metadata.name",
        "metadata.namespace",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "core/secrets": ("metadata.name", "metadata.namespace", "type"),
    "core/namespaces": ("metadata.name", "status.phase"),
    "core/nodes": ("metadata.name", "spec.unschedulable"),
    "core/services": ("metadata.name", "metadata.namespace", "spec.clusterIP", "spec.type"),
}
_FIELD_ALIASES = {"spec.host": "spec.nodeName"}
_BOOLEAN_FIELDS = ("spec.hostNetwork", "spec.unschedulable")  # Go's FormatBool: unset reads "false"


def field_keys(rt: ResourceType) -> tuple[str, ...]:
    return FIELD_KEYS.get(rt.key) or ("metadata.name", "metadata.namespace", *rt.selectable_fields)


def check_fields(rt: ResourceType, fields: FieldSelector) -> None:
    """400 for a fieldSelector key the resource cannot filter on, in the API server's words."""
    supported = field_keys(rt)
    for term in fields.terms:
        if term.key not in supported:
            if rt.key in FIELD_KEYS or rt.custom:
                raise errors.bad_request(f"field label not supported: {term.key}")
            raise errors.bad_request(
                f'"{term.key}" is not a known field selector: only "metadata.name", "metadata.namespace"'
            )


def field_values(rt: ResourceType, obj: Obj) -> dict[str, str]:
    out = {}
    for key in field_keys(rt):
        node: Any = obj
        for part in _FIELD_ALIASES.get(key, key).split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if key == "source" and isinstance(node, dict):
            node = node.get("component")
        if key == "status.podIPs" and isinstance(node, list):
            node = (node[0] or {}).get("ip") if node and isinstance(node[0], dict) else None
        if key in _BOOLEAN_FIELDS and node is None:
            node = False
        if isinstance(node, bool):
            node = "true" if node else "false"
        out[key] = "" if node is None or isinstance(node, (dict, list)) else str(node)
    return out


def matches(rt: ResourceType, obj: Obj, labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(obj.get("metadata", {}).get("labels") or {}):
        return False
    return fields is None or fields.matches(field_values(rt, obj))


def selection(
    rt: ResourceType, labels: LabelSelector | None, fields: FieldSelector | None
) -> Callable[[bytes], bool] | None:
    """``matches`` for an encoded object, decoding only what the selectors read; None: all."""
    if fields is not None:
        return lambda body: matches(rt, codec.loads(body), labels, fields)
    if labels is not None:
        return lambda body: labels.matches(codec.labels(body))
    return None
