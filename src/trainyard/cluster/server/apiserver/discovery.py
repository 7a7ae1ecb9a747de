"""Discovery documents and the minimal OpenAPI v3 that lets plain ``kubectl apply`` validate.

kubectl asks ``/openapi/v3/<gv>`` whether each kind's PATCH accepts ``fieldValidation``; when it
does, kubectl leaves validation to the server (reference §2). The documents are rebuilt from the
registry on every request, and their hash changes whenever a group-version's kinds change, so
kubectl's URL-keyed cache never serves a stale document.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

from trainyard.cluster.server.apiserver.aggregation import AggregatedApi
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.apiserver.requests import protobuf

KUBE_VERSION = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-trainyard",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry, aggregated: Iterable[AggregatedApi] = ()) -> dict[str, Any]:
    groups = [_group(g, vs) for g, vs in registry.group_versions().items() if g]
    groups += [_group(api.group, [api.version]) for api in aggregated]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def aggregated_group(api: AggregatedApi) -> dict[str, Any]:
    """The ``APIGroup`` of a group another component serves (``aggregation``)."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(api.group, [api.version])}


def aggregated_resources(api: AggregatedApi) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{api.group}/{api.version}",
        "resources": list(api.resources()),
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not versions or not group:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(group, versions)}


def _entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(rt.verbs),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    out = [main]
    for sub, (kind, verbs) in sorted(CONNECT.get(rt.key, {}).items()):
        out.append(
            {
                "name": f"{rt.plural}/{sub}",
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": kind,
                "verbs": verbs,
            }
        )
    for sub in sorted(rt.subresources):
        entry: dict[str, Any] = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
        }
        if sub == "status":
            entry |= {"kind": rt.kind, "verbs": ["get", "patch", "update"]}
        elif sub == "scale":
            entry |= {
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }
        elif sub == "log":
            entry |= {"kind": "Pod", "verbs": ["get"]}
        elif sub == "binding":
            entry |= {"kind": "Binding", "verbs": ["create"]}
        elif sub == "eviction":
            entry |= {"group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]}
        elif sub == "token":
            entry |= {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest", "verbs": ["create"]}
        out.append(entry)
    return out


_PROXY_VERBS = ["create", "delete", "get", "patch", "update"]
CONNECT: dict[str, dict[str, tuple[str, list[str]]]] = {
    "core/pods": {
        "attach": ("PodAttachOptions", ["create", "get"]),
        "exec": ("PodExecOptions", ["create", "get"]),
        "portforward": ("PodPortForwardOptions", ["create", "get"]),
        "proxy": ("PodProxyOptions", _PROXY_VERBS),
    },
    "core/services": {"proxy": ("ServiceProxyOptions", _PROXY_VERBS)},
}
"""The connect subresources served (``connect``, ``remotecommand``, ``tunnels``), listed as upstream lists them."""


def resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = [rt for rt in registry if rt.group == group and rt.version == version]
    if not types:
        return None
    gv = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": [e for rt in types for e in _entries(rt)],
    }


_PATCH_PARAMS = [
    {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
    for name in ("dryRun", "fieldManager", "fieldValidation", "force")
]


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_gv(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = [rt for rt in registry if rt.group == group and rt.version == version]
    if not types:
        return None
    paths: dict[str, Any] = {}
    for rt in types:
        gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
        base = f"/{_gv_path(group, version)}" + ("/namespaces/{namespace}" if rt.namespaced else "")
        paths[f"{base}/{rt.plural}/{{name}}"] = {
            "get": {"x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": {}},
            "put": {
                "x-kubernetes-action": "put",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": _PATCH_PARAMS,
                "responses": {},
            },
            "patch": {
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": _PATCH_PARAMS,
                "responses": {},
            },
        }
        paths[f"{base}/{rt.plural}"] = {
            "post": {
                "x-kubernetes-action": "post",
                "x-kubernetes-group-version-kind": gvk,
                "parameters": _PATCH_PARAMS,
                "responses": {},
            },
        }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "components": {"schemas": {}},
        "paths": paths,
    }


def _hash(doc: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def openapi_root(registry: Registry) -> dict[str, Any]:
    paths = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            doc = openapi_gv(registry, group, version)
            if doc is not None:
                path = _gv_path(group, version)
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={_hash(doc)}"}
    return {"paths": paths}


# kubectl asks with the ``@`` form; kube-apiserver answers with ``.`` because Go's mime parser rejects ``@``.
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
OPENAPI_V2_PROTOBUF_REPLY = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def openapi_v2() -> dict[str, Any]:
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
        "paths": {},
        "definitions": {},
    }


def openapi_v2_protobuf(doc: dict[str, Any]) -> bytes:
    """``doc``'s swagger and info as gnostic's ``openapi_v2.Document`` (fields 1 and 2) in protobuf."""
    info = protobuf.length_delimited(1, doc["info"]["title"].encode()) + protobuf.length_delimited(
        2, doc["info"]["version"].encode()
    )
    return protobuf.length_delimited(1, doc["swagger"].encode()) + protobuf.length_delimited(2, info)
