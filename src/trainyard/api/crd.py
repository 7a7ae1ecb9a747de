"""CustomResourceDefinitions generated from the pydantic models: the schema has one source.

The JSON schema pydantic produces is turned into a Kubernetes *structural* schema: references
inlined, ``anyOf [X, null]`` turned into ``nullable``, titles dropped, and objects that keep
unknown fields marked ``x-kubernetes-preserve-unknown-fields`` (pod templates carry every pod
field, most of which trainyard does not model). Only Kubernetes' own types are open that way:
the job types are modelled whole, so a typo in them is pruned, or with kubectl's default
``fieldValidation=Strict`` rejected, as it is by the upstream CRDs.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from trainyard.api import core, meta
from trainyard.api.kindinfo import KindInfo, PrinterColumn

_DROP = {"title", "default", "description", "examples", "discriminator"}

# Kubernetes types we model only in part (pod templates, metadata): they keep unknown fields.
_OPEN = frozenset(
    name
    for module in (core, meta)
    for name, value in vars(module).items()
    if isinstance(value, type) and issubclass(value, BaseModel)
)


def _structural(node: Any, defs: dict[str, Any], open_object: bool = False) -> dict[str, Any]:
    if not isinstance(node, dict):
        return {}
    if "$ref" in node:
        name = node["$ref"].split("/")[-1]
        return _structural(defs[name], defs, name in _OPEN)
    if "anyOf" in node:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        nullable = len(options) < len(node["anyOf"])
        if len(options) == 1:
            chosen: dict[str, Any] = _structural(options[0], defs)
        elif sorted(o.get("type", "") for o in options) == ["integer", "string"]:
            chosen = {"x-kubernetes-int-or-string": True}  # a Quantity or IntOrString, as upstream's schemas
        else:
            chosen = {"x-kubernetes-preserve-unknown-fields": True}
        if nullable:
            chosen["nullable"] = True
        chosen |= {k: v for k, v in node.items() if k.startswith("x-kubernetes-")}  # e.g. CEL rules
        return chosen
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP or key.startswith("$"):
            continue
        if key == "properties":
            out["properties"] = {name: _structural(sub, defs) for name, sub in value.items()}
        elif key == "items":
            out["items"] = _structural(value, defs)
        elif key == "additionalProperties":
            # A closed model says additionalProperties too (extra="allow" keeps what it reads), but
            # only free-form maps and Kubernetes' own types should keep unknown fields.
            if value is True and (open_object or "properties" not in node):
                out["x-kubernetes-preserve-unknown-fields"] = True
            elif isinstance(value, dict):
                out["additionalProperties"] = _structural(value, defs)
        elif key == "const":
            out["enum"] = [value]
        else:
            out[key] = value
    if open_object and out.get("type") == "object" and "properties" in out:
        out["x-kubernetes-preserve-unknown-fields"] = True
    if "enum" in out and "type" not in out:
        out["type"] = "string"
    return out


def openapi_schema(info: KindInfo) -> dict[str, Any]:
    raw = info.model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.get("$defs", {})
    props = raw.get("properties", {})
    spec = _structural(props["spec"], defs)
    run_policy = spec.get("properties", {}).get("runPolicy")
    if run_policy is not None:
        # Upstream's CRD defaults suspend to false. Defaulting runPolicy itself to {} goes further:
        # the Kubeflow SDK's models require spec.runPolicy, so a job applied without one (plain
        # kubectl YAML) would otherwise break its get_job and list_jobs.
        run_policy["default"] = {}
        run_policy.get("properties", {}).get("suspend", {})["default"] = False
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": _structural(props["status"], defs),
        },
    }


def _column(column: PrinterColumn) -> dict[str, Any]:
    out: dict[str, Any] = {"name": column.name, "type": column.type, "jsonPath": column.json_path}
    if column.priority:
        out["priority"] = column.priority
    return out


def crd_for(info: KindInfo) -> dict[str, Any]:
    """The ``apiextensions.k8s.io/v1`` CRD for one kind, as a manifest."""
    subresources: dict[str, Any] = {"status": {}}
    if info.scale is not None:
        subresources["scale"] = {
            "specReplicasPath": info.scale.spec_replicas,
            "statusReplicasPath": info.scale.status_replicas,
            "labelSelectorPath": info.scale.label_selector,
        }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": info.crd_name, "labels": {"app.kubernetes.io/part-of": "trainyard"}},
        "spec": {
            "group": info.group,
            "scope": "Namespaced",
            "names": {
                "kind": info.kind,
                "listKind": f"{info.kind}List",
                "plural": info.plural,
                "singular": info.singular,
                "shortNames": list(info.short_names),
                "categories": list(info.categories),
            },
            "versions": [
                {
                    "name": info.version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema(info)},
                    "subresources": subresources,
                    "additionalPrinterColumns": [_column(c) for c in info.printer_columns],
                }
            ],
        },
    }
