"""The PATCH algorithms: RFC 7386 merge patch, RFC 6902 JSON patch, strategic merge patch."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from trainyard.cluster.server.apiserver.writes.patching import (
    PatchError,
    json_patch,
    merge_patch,
    strategic_merge_patch,
    supports_strategic_merge,
)

# --------------------------------------------------------------------------------------------
# merge patch
# --------------------------------------------------------------------------------------------

MERGE_CASES = [
    ("add-key", {"a": 1}, {"b": 2}, {"a": 1, "b": 2}),
    ("replace-scalar", {"a": 1}, {"a": 2}, {"a": 2}),
    ("null-deletes", {"a": 1, "b": 2}, {"a": None}, {"b": 2}),
    ("null-for-missing-key", {"a": 1}, {"z": None}, {"a": 1}),
    ("nested-merge", {"m": {"x": 1, "y": 2}}, {"m": {"y": 3, "z": 4}}, {"m": {"x": 1, "y": 3, "z": 4}}),
    ("nested-null", {"m": {"x": 1, "y": 2}}, {"m": {"x": None}}, {"m": {"y": 2}}),
    ("list-replaced", {"l": [1, 2, 3]}, {"l": [4]}, {"l": [4]}),
    ("dict-over-scalar", {"a": "s"}, {"a": {"b": 1, "c": None}}, {"a": {"b": 1}}),
    ("scalar-patch-replaces", {"a": 1}, "text", "text"),
    ("list-patch-replaces", {"a": 1}, [1, 2], [1, 2]),
    ("null-patch", {"a": 1}, None, None),
    ("non-dict-target", ["x"], {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),
    ("empty-patch", {"a": 1}, {}, {"a": 1}),
    (
        "kopf-status",
        {"metadata": {"name": "x"}, "status": {"phase": "Running", "kopf": {"progress": {"h": 1}}}},
        {"status": {"kopf": {"progress": None}}},
        {"metadata": {"name": "x"}, "status": {"phase": "Running", "kopf": {}}},
    ),
]


@pytest.mark.parametrize(("target", "patch", "expected"), [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES])
def test_merge_patch(target: object, patch: object, expected: object) -> None:
    target_before, patch_before = copy.deepcopy(target), copy.deepcopy(patch)
    assert merge_patch(target, patch) == expected
    assert target == target_before
    assert patch == patch_before


def test_merge_patch_result_shares_nothing() -> None:
    target = {"a": {"keep": [1]}}
    patch = {"b": {"new": [2]}}
    result = merge_patch(target, patch)
    assert isinstance(result, dict)
    result["a"]["keep"].append(9)
    result["b"]["new"].append(9)
    assert target == {"a": {"keep": [1]}}
    assert patch == {"b": {"new": [2]}}


# --------------------------------------------------------------------------------------------
# JSON patch
# --------------------------------------------------------------------------------------------

OBJ: dict[str, Any] = {
    "metadata": {"name": "x", "resourceVersion": "7", "finalizers": ["a", "b"]},
    "spec": {"n": 1},
}

JSON_PATCH_CASES = [
    ("add-key", [{"op": "add", "path": "/spec/m", "value": 2}], {**OBJ, "spec": {"n": 1, "m": 2}}),
    (
        "kopf-finalizer-add",
        [
            {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
            {"op": "add", "path": "/metadata/finalizers/-", "value": "kopf"},
        ],
        {**OBJ, "metadata": {**OBJ["metadata"], "finalizers": ["a", "b", "kopf"]}},
    ),
    (
        "remove-element",
        [{"op": "remove", "path": "/metadata/finalizers/0"}],
        {**OBJ, "metadata": {**OBJ["metadata"], "finalizers": ["b"]}},
    ),
    ("replace", [{"op": "replace", "path": "/spec/n", "value": 5}], {**OBJ, "spec": {"n": 5}}),
    ("move", [{"op": "move", "from": "/spec/n", "path": "/spec/k"}], {**OBJ, "spec": {"k": 1}}),
    ("copy", [{"op": "copy", "from": "/spec/n", "path": "/spec/k"}], {**OBJ, "spec": {"n": 1, "k": 1}}),
    ("empty", [], OBJ),
    ("replace-root", [{"op": "replace", "path": "", "value": {"a": 1}}], {"a": 1}),
]


@pytest.mark.parametrize(("ops", "expected"), [c[1:] for c in JSON_PATCH_CASES], ids=[c[0] for c in JSON_PATCH_CASES])
def test_json_patch(ops: list[dict[str, Any]], expected: object) -> None:
    target = copy.deepcopy(OBJ)
    ops_before = copy.deepcopy(ops)
    assert json_patch(target, ops) == expected
    assert target == OBJ
    assert ops == ops_before


JSON_PATCH_ERROR_CASES = [
    # Malformed patch documents: 400.
    ("dict-body", {"op": "add", "path": "/a", "value": 1}, 400),
    ("string-body", "[]", 400),
    ("null-body", None, 400),
    ("list-of-strings", ["add"], 400),
    ("missing-op", [{"path": "/a", "value": 1}], 400),
    ("unknown-op", [{"op": "append", "path": "/a", "value": "x"}], 400),
    ("missing-path", [{"op": "remove"}], 400),
    ("missing-value", [{"op": "add", "path": "/a"}], 400),
    ("missing-from", [{"op": "move", "path": "/a"}], 400),
    ("path-not-pointer", [{"op": "add", "path": "spec/n", "value": 1}], 400),
    ("path-not-string", [{"op": "add", "path": 3, "value": 1}], 400),
    ("bad-escape", [{"op": "add", "path": "/a~2b", "value": 1}], 400),
    ("bad-from", [{"op": "copy", "from": "nope", "path": "/a"}], 400),
    # Well-formed patches that do not apply: 422.
    ("test-fails", [{"op": "test", "path": "/metadata/resourceVersion", "value": "6"}], 422),
    ("test-type-mismatch", [{"op": "test", "path": "/spec/n", "value": True}], 422),
    ("test-missing", [{"op": "test", "path": "/metadata/uid", "value": "u"}], 422),
    ("remove-missing", [{"op": "remove", "path": "/spec/missing"}], 422),
    ("replace-missing", [{"op": "replace", "path": "/spec/missing", "value": 1}], 422),
    ("add-missing-parent", [{"op": "add", "path": "/status/phase", "value": "x"}], 422),
    ("index-out-of-range", [{"op": "add", "path": "/metadata/finalizers/9", "value": "x"}], 422),
    ("bad-index", [{"op": "remove", "path": "/metadata/finalizers/x"}], 422),
    ("into-scalar", [{"op": "add", "path": "/spec/n/deeper", "value": 1}], 422),
    ("move-missing", [{"op": "move", "from": "/spec/gone", "path": "/spec/k"}], 422),
]


@pytest.mark.parametrize(
    ("ops", "code"), [c[1:] for c in JSON_PATCH_ERROR_CASES], ids=[c[0] for c in JSON_PATCH_ERROR_CASES]
)
def test_json_patch_errors(ops: object, code: int) -> None:
    target = copy.deepcopy(OBJ)
    with pytest.raises(PatchError) as info:
        json_patch(target, ops)
    assert info.value.code == code
    assert str(info.value)
    assert target == OBJ


def test_failed_json_patch_leaves_target_untouched() -> None:
    target = copy.deepcopy(OBJ)
    ops = [
        {"op": "add", "path": "/spec/m", "value": 1},
        {"op": "test", "path": "/metadata/resourceVersion", "value": "stale"},
    ]
    with pytest.raises(PatchError):
        json_patch(target, ops)
    assert target == OBJ


# --------------------------------------------------------------------------------------------
# strategic merge patch
# --------------------------------------------------------------------------------------------


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx:1.27",
                            "args": ["--a", "--b"],
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        },
                        {"name": "sidecar", "image": "busybox:1"},
                    ],
                    "volumes": [{"name": "data", "emptyDir": {}}],
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                },
            },
        },
        "status": {"conditions": [{"type": "Available", "status": "True"}]},
    }


def containers(obj: object) -> list[dict[str, Any]]:
    assert isinstance(obj, dict)
    result: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["containers"]
    return result


def no_directives(value: object) -> bool:
    text = json.dumps(value)
    return all(d not in text for d in ("$patch", "$setElementOrder", "$retainKeys", "$deleteFromPrimitiveList"))


def test_kubectl_apply_payload_updates_only_the_image() -> None:
    """The observed `kubectl apply` body for an image change (reference §3.4)."""
    last_applied = json.dumps({"kind": "Deployment", "spec": {"template": {"spec": {"containers": []}}}})
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last_applied}},
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "nginx"}, {"name": "sidecar"}],
                    "containers": [{"image": "nginx:1.28", "name": "nginx"}],
                }
            }
        },
    }
    live = deployment()
    result = strategic_merge_patch(live, patch, kind="Deployment")

    expected = deployment()
    expected["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": last_applied}
    containers(expected)[0]["image"] = "nginx:1.28"
    assert result == expected
    assert live == deployment()
    assert no_directives(result)


def test_kubectl_apply_payload_verbatim_from_reference() -> None:
    patch = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "…"}},
        "spec": {
            "template": {
                "spec": {
                    "$setElementOrder/containers": [{"name": "nginx"}],
                    "containers": [{"image": "nginx:1.28", "name": "nginx"}],
                }
            }
        },
    }
    live = deployment()
    live["spec"]["template"]["spec"]["containers"] = live["spec"]["template"]["spec"]["containers"][:1]
    result = strategic_merge_patch(live, patch, kind="Deployment")
    [nginx] = containers(result)
    assert nginx["image"] == "nginx:1.28"
    assert nginx["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert nginx["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert no_directives(result)


def test_rollout_restart_payload() -> None:
    patch = {"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "now"}}}}}
    result = strategic_merge_patch(deployment(), patch, kind="Deployment")
    assert isinstance(result, dict)
    assert result["spec"]["template"]["metadata"] == {
        "labels": {"app": "web"},
        "annotations": {"kubectl.kubernetes.io/restartedAt": "now"},
    }
    assert containers(result) == containers(deployment())


def pod_spec_patch(spec_patch: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec_patch}}}


# (id, patch of spec.template.spec, expected containers)
CONTAINER_CASES = [
    (
        # Like the real API server: an element new to the list goes before the live ones
        # unless $setElementOrder says otherwise (the kubectl patch docs show the same).
        "new-container-goes-first",
        {"containers": [{"name": "logger", "image": "fluent"}]},
        ["logger", "nginx", "sidecar"],
    ),
    (
        "set-element-order-inserts-in-place",
        {
            "$setElementOrder/containers": [{"name": "nginx"}, {"name": "logger"}, {"name": "sidecar"}],
            "containers": [{"name": "logger", "image": "fluent"}],
        },
        ["nginx", "logger", "sidecar"],
    ),
    (
        "set-element-order-alone-reorders",
        {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "nginx"}]},
        ["sidecar", "nginx"],
    ),
    (
        "delete-directive",
        {"containers": [{"$patch": "delete", "name": "sidecar"}]},
        ["nginx"],
    ),
    (
        "kubectl-apply-removal",
        {
            "$setElementOrder/containers": [{"name": "nginx"}],
            "containers": [{"$patch": "delete", "name": "sidecar"}],
        },
        ["nginx"],
    ),
    (
        "new-before-existing-in-patch-order",
        {"containers": [{"name": "init", "image": "x"}, {"name": "nginx", "image": "nginx:2"}]},
        ["init", "nginx", "sidecar"],
    ),
    (
        "replace-directive",
        {"containers": [{"name": "solo", "image": "x"}, {"$patch": "replace"}]},
        ["solo"],
    ),
]


@pytest.mark.parametrize(("spec_patch", "names"), [c[1:] for c in CONTAINER_CASES], ids=[c[0] for c in CONTAINER_CASES])
def test_container_list_merges_by_name(spec_patch: dict[str, Any], names: list[str]) -> None:
    patch = pod_spec_patch(spec_patch)
    patch_before = copy.deepcopy(patch)
    result = strategic_merge_patch(deployment(), patch, kind="Deployment")
    assert [c["name"] for c in containers(result)] == names
    assert no_directives(result)
    assert patch == patch_before


def test_replace_directive_drops_fields_of_existing_elements() -> None:
    patch = pod_spec_patch({"containers": [{"name": "nginx", "image": "nginx:2"}, {"$patch": "replace"}]})
    result = strategic_merge_patch(deployment(), patch, kind="Deployment")
    assert containers(result) == [{"name": "nginx", "image": "nginx:2"}]


def nginx_after(container_patch: dict[str, Any]) -> dict[str, Any]:
    patch = pod_spec_patch({"containers": [{"name": "nginx", **container_patch}]})
    result = strategic_merge_patch(deployment(), patch, kind="Deployment")
    return containers(result)[0]


# (id, patch of the nginx container, field, expected value of that field)
CONTAINER_FIELD_CASES = [
    (
        "env-merges-by-name",
        {"env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}]},
        "env",
        [{"name": "A", "value": "1"}, {"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
    ),
    ("env-delete", {"env": [{"name": "A", "$patch": "delete"}]}, "env", [{"name": "B", "value": "2"}]),
    (
        "env-null-field",
        {"env": [{"name": "B", "value": None, "valueFrom": {"fieldRef": {"fieldPath": "x"}}}]},
        "env",
        [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
    ),
    (
        "ports-merge-by-containerPort",
        {"ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 9090}]},
        "ports",
        [{"containerPort": 80, "protocol": "TCP", "name": "http"}, {"containerPort": 9090}],
    ),
    (
        "volumeMounts-by-mountPath",
        {"volumeMounts": [{"name": "other", "mountPath": "/data", "readOnly": True}]},
        "volumeMounts",
        [{"name": "other", "mountPath": "/data", "readOnly": True}],
    ),
    ("args-are-atomic", {"args": ["--c"]}, "args", ["--c"]),
    ("null-deletes-field", {"args": None}, "args", None),
    ("directive-merge-is-plain-merge", {"$patch": "merge", "image": "nginx:3"}, "image", "nginx:3"),
]


@pytest.mark.parametrize(
    ("container_patch", "field", "expected"),
    [c[1:] for c in CONTAINER_FIELD_CASES],
    ids=[c[0] for c in CONTAINER_FIELD_CASES],
)
def test_container_fields(container_patch: dict[str, Any], field: str, expected: object) -> None:
    nginx = nginx_after(container_patch)
    assert nginx.get(field) == expected
    assert nginx["image"] in ("nginx:1.27", "nginx:3")
    assert no_directives(nginx)


def test_replace_directive_on_an_element_with_content_replaces_the_list_and_keeps_it() -> None:
    patch = pod_spec_patch({"containers": [{"name": "nginx", "$patch": "replace", "image": "nginx:9"}]})
    result = strategic_merge_patch(deployment(), patch, kind="Deployment")
    assert containers(result) == [{"name": "nginx", "image": "nginx:9"}]


def test_replace_directive_on_a_nested_map() -> None:
    patch = pod_spec_patch(
        {"containers": [{"name": "nginx", "resources": {"$patch": "replace", "limits": {"cpu": "1"}}}]}
    )
    live = deployment()
    containers(live)[0]["resources"] = {"requests": {"cpu": "2"}, "limits": {"memory": "1Gi"}}
    result = strategic_merge_patch(live, patch, kind="Deployment")
    assert containers(result)[0]["resources"] == {"limits": {"cpu": "1"}}


# (id, live list, patch list, expected list): the order rule of the API server. Patch order
# wins for the elements the patch names; live-only elements keep their live order and go
# back in front of the first patched element that followed them in the live list.
ORDER_CASES = [
    ("untouched-order-kept", ["a", "b", "c"], [{"name": "b", "x": 1}], ["a", "b", "c"]),
    ("patch-reorders-its-own", ["a", "b", "c"], [{"name": "c"}, {"name": "a"}], ["b", "c", "a"]),
    ("new-first", ["a", "b"], [{"name": "n"}], ["n", "a", "b"]),
    ("new-after-named-live", ["a", "b", "c"], [{"name": "b"}, {"name": "n"}], ["a", "b", "n", "c"]),
]


@pytest.mark.parametrize(("live", "patch", "expected"), [c[1:] for c in ORDER_CASES], ids=[c[0] for c in ORDER_CASES])
def test_merged_list_order(live: list[str], patch: list[dict[str, Any]], expected: list[str]) -> None:
    pod = {"spec": {"containers": [{"name": name} for name in live]}}
    result = strategic_merge_patch(pod, {"spec": {"containers": patch}}, kind="Pod")
    assert isinstance(result, dict)
    assert [c["name"] for c in result["spec"]["containers"]] == expected


# (id, kind, live object, patch, expected object)
KIND_CASES = [
    (
        "service-ports-by-port",
        "Service",
        {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}},
        {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
        {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https", "targetPort": 8443}]}},
    ),
    (
        "pod-spec-at-spec",
        "Pod",
        {"spec": {"containers": [{"name": "a", "image": "1", "ports": [{"containerPort": 80}]}]}},
        {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 81}]}]}},
        {
            "spec": {
                "containers": [{"name": "a", "image": "1", "ports": [{"containerPort": 81}, {"containerPort": 80}]}]
            }
        },
    ),
    (
        "pod-status-conditions-by-type",
        "Pod",
        {"status": {"conditions": [{"type": "Ready", "status": "False"}, {"type": "Scheduled", "status": "True"}]}},
        {"status": {"conditions": [{"type": "Ready", "status": "True"}]}},
        {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "Scheduled", "status": "True"}]}},
    ),
    (
        "pod-volumes-and-pull-secrets-by-name",
        "Pod",
        {"spec": {"volumes": [{"name": "a", "emptyDir": {}}], "imagePullSecrets": [{"name": "r1"}]}},
        {"spec": {"volumes": [{"name": "b", "emptyDir": {}}], "imagePullSecrets": [{"name": "r2"}]}},
        {
            "spec": {
                "volumes": [{"name": "b", "emptyDir": {}}, {"name": "a", "emptyDir": {}}],
                "imagePullSecrets": [{"name": "r2"}, {"name": "r1"}],
            }
        },
    ),
    (
        "pod-tolerations-atomic",
        "Pod",
        {"spec": {"tolerations": [{"key": "a"}], "hostAliases": [{"ip": "1.1.1.1", "hostnames": ["a"]}]}},
        {"spec": {"tolerations": [{"key": "b"}], "hostAliases": [{"ip": "2.2.2.2", "hostnames": ["b"]}]}},
        {
            "spec": {
                "tolerations": [{"key": "b"}],
                "hostAliases": [{"ip": "2.2.2.2", "hostnames": ["b"]}, {"ip": "1.1.1.1", "hostnames": ["a"]}],
            }
        },
    ),
    (
        "owner-references-by-uid",
        "ConfigMap",
        {"metadata": {"ownerReferences": [{"uid": "1", "name": "a"}]}, "data": {"k": "v"}},
        {"metadata": {"ownerReferences": [{"uid": "2", "name": "b"}]}, "data": {"k": None, "j": "w"}},
        {
            "metadata": {"ownerReferences": [{"uid": "2", "name": "b"}, {"uid": "1", "name": "a"}]},
            "data": {"j": "w"},
        },
    ),
    (
        "finalizers-union",
        "Secret",
        {"metadata": {"finalizers": ["a", "b"]}},
        {"metadata": {"finalizers": ["b", "c"]}},
        {"metadata": {"finalizers": ["a", "b", "c"]}},
    ),
    (
        "finalizers-delete-from-primitive-list",
        "Namespace",
        {"metadata": {"finalizers": ["a", "b", "c"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"], "finalizers": ["d"]}},
        {"metadata": {"finalizers": ["d", "a", "c"]}},
    ),
    (
        "finalizers-set-element-order",
        "Pod",
        {"metadata": {"finalizers": ["a", "b", "c"]}},
        {"metadata": {"$setElementOrder/finalizers": ["c", "a", "b"]}},
        {"metadata": {"finalizers": ["c", "a", "b"]}},
    ),
    (
        "serviceaccount-secrets-by-name",
        "ServiceAccount",
        {"secrets": [{"name": "t1"}], "imagePullSecrets": [{"name": "p1"}]},
        {"secrets": [{"name": "t2"}], "imagePullSecrets": [{"name": "p2"}]},
        {"secrets": [{"name": "t2"}, {"name": "t1"}], "imagePullSecrets": [{"name": "p2"}]},
    ),
    (
        "node-conditions-and-addresses",
        "Node",
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "False"}],
                "addresses": [{"type": "Hostname", "address": "a"}],
            }
        },
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "1"}],
            }
        },
        {
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "addresses": [{"type": "InternalIP", "address": "1"}, {"type": "Hostname", "address": "a"}],
            }
        },
    ),
    (
        "replicaset-template-like-deployment",
        "ReplicaSet",
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "a", "image": "1", "env": [{"name": "X", "value": "1"}]}]}
                }
            }
        },
        {"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "2"}]}}}},
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "a", "image": "2", "env": [{"name": "X", "value": "1"}]}]}
                }
            }
        },
    ),
    (
        "event-is-plain-merge",
        "Event",
        {"involvedObject": {"kind": "Pod", "name": "p"}, "count": 1, "series": [1]},
        {"count": 2, "series": [2]},
        {"involvedObject": {"kind": "Pod", "name": "p"}, "count": 2, "series": [2]},
    ),
    (
        "retain-keys",
        "Deployment",
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
        {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
        {"spec": {"strategy": {"type": "Recreate"}}},
    ),
    (
        "delete-directive-on-map",
        "Deployment",
        {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}},
        {"spec": {"strategy": {"rollingUpdate": {"$patch": "delete"}}}},
        {"spec": {"strategy": {"type": "RollingUpdate"}}},
    ),
    (
        "replace-directive-on-map",
        "Deployment",
        {"spec": {"selector": {"matchLabels": {"a": "1", "b": "2"}}}},
        {"spec": {"selector": {"matchLabels": {"$patch": "replace", "c": "3"}}}},
        {"spec": {"selector": {"matchLabels": {"c": "3"}}}},
    ),
    (
        "directives-in-new-subtree-are-applied-not-stored",
        "Deployment",
        {"spec": {"replicas": 1}},
        {
            "spec": {
                "template": {
                    "spec": {
                        "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                        "containers": [{"name": "b"}, {"name": "a"}, {"name": "gone", "$patch": "delete"}],
                        "dnsConfig": {"$patch": "delete"},
                        "securityContext": {"runAsUser": None, "fsGroup": 2},
                    }
                }
            }
        },
        {
            "spec": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "b"}, {"name": "a"}], "securityContext": {"fsGroup": 2}}},
            }
        },
    ),
    (
        "type-mismatch-replaces",
        "Pod",
        {"spec": {"nodeSelector": "bogus", "containers": {"not": "a list"}}},
        {"spec": {"nodeSelector": {"gpu": "1"}, "containers": [{"name": "a"}]}},
        {"spec": {"nodeSelector": {"gpu": "1"}, "containers": [{"name": "a"}]}},
    ),
    (
        "dollar-keys-that-are-not-directives-are-data",
        "CustomResourceDefinition",
        {"spec": {"schema": {"$ref": "#/a"}}},
        {"spec": {"schema": {"$schema": "draft-4"}}},
        {"spec": {"schema": {"$ref": "#/a", "$schema": "draft-4"}}},
    ),
    (
        "root-replace",
        "ConfigMap",
        {"metadata": {"name": "a"}, "data": {"k": "v"}},
        {"$patch": "replace", "metadata": {"name": "a"}},
        {"metadata": {"name": "a"}},
    ),
]


@pytest.mark.parametrize(
    ("kind", "live", "patch", "expected"), [c[1:] for c in KIND_CASES], ids=[c[0] for c in KIND_CASES]
)
def test_strategic_merge_by_kind(kind: str, live: dict[str, Any], patch: dict[str, Any], expected: object) -> None:
    live_before, patch_before = copy.deepcopy(live), copy.deepcopy(patch)
    assert strategic_merge_patch(live, patch, kind=kind) == expected
    assert live == live_before
    assert patch == patch_before


# (id, kind, live, patch, expected): kinds without a table behave like merge patch, but the
# directives are still honoured and never stored.
UNKNOWN_KIND_CASES = [
    (
        "lists-replaced",
        {"spec": {"containers": [{"name": "a", "image": "1"}], "m": {"x": 1}}},
        {"spec": {"containers": [{"name": "a", "image": "2"}], "m": {"y": 2}}},
        {"spec": {"containers": [{"name": "a", "image": "2"}], "m": {"x": 1, "y": 2}}},
    ),
    (
        "finalizers-replaced",
        {"metadata": {"finalizers": ["a"]}},
        {"metadata": {"finalizers": ["b"]}},
        {"metadata": {"finalizers": ["b"]}},
    ),
    (
        "directives-stripped",
        {"spec": {"items": [{"name": "a"}], "m": {"x": 1}}},
        {
            "spec": {
                "$setElementOrder/items": [{"name": "b"}],
                "items": [{"name": "b", "$patch": "merge"}, {"name": "c", "$patch": "delete"}],
                "m": {"$patch": "replace", "y": 2},
            }
        },
        {"spec": {"items": [{"name": "b"}], "m": {"y": 2}}},
    ),
    (
        "delete-from-primitive-list-still-applies",
        {"spec": {"tags": ["a", "b"]}},
        {"spec": {"$deleteFromPrimitiveList/tags": ["a"]}},
        {"spec": {"tags": ["b"]}},
    ),
]


@pytest.mark.parametrize(
    ("live", "patch", "expected"), [c[1:] for c in UNKNOWN_KIND_CASES], ids=[c[0] for c in UNKNOWN_KIND_CASES]
)
def test_strategic_merge_unknown_kind(live: dict[str, Any], patch: dict[str, Any], expected: object) -> None:
    result = strategic_merge_patch(live, patch, kind="PyTorchJob")
    assert result == expected
    assert no_directives(result)


@pytest.mark.parametrize(
    ("kind", "supported"),
    [("Pod", True), ("Deployment", True), ("ReplicaSet", True), ("ConfigMap", True), ("PyTorchJob", False)],
    ids=lambda value: str(value),
)
def test_supports_strategic_merge(kind: str, supported: bool) -> None:
    assert supports_strategic_merge(kind) is supported


def test_same_field_name_differs_by_place() -> None:
    """`ports` merges by containerPort in a container and by port in a Service spec."""
    pod = {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "x"}]}]}}
    patched_pod = strategic_merge_patch(
        pod,
        {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "port": 1}]}]}},
        kind="Pod",
    )
    assert patched_pod == {
        "spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "name": "x", "port": 1}]}]}
    }
    service = {"spec": {"ports": [{"port": 80, "containerPort": 1}]}}
    patched_service = strategic_merge_patch(
        service, {"spec": {"ports": [{"port": 80, "name": "http"}]}}, kind="Service"
    )
    assert patched_service == {"spec": {"ports": [{"port": 80, "containerPort": 1, "name": "http"}]}}
    # A Pod has no top-level `ports`, so there it is just an atomic list.
    atomic = strategic_merge_patch({"ports": [{"port": 1}]}, {"ports": [{"port": 2}]}, kind="Pod")
    assert atomic == {"ports": [{"port": 2}]}


def test_empty_set_element_order_is_not_checked_against_the_patch() -> None:
    pod = {"spec": {"containers": [{"name": "a"}]}}
    patch = {"spec": {"$setElementOrder/containers": [], "containers": [{"name": "b"}]}}
    result = strategic_merge_patch(pod, patch, kind="Pod")
    assert result == {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}


def test_strategic_merge_result_shares_nothing() -> None:
    live = deployment()
    patch = pod_spec_patch({"containers": [{"name": "logger", "env": [{"name": "X", "value": "1"}]}]})
    result = strategic_merge_patch(live, patch, kind="Deployment")
    for container in containers(result):
        container.setdefault("env", []).append({"name": "MUTATED"})
    assert live == deployment()
    assert patch == pod_spec_patch({"containers": [{"name": "logger", "env": [{"name": "X", "value": "1"}]}]})


# (id, kind, patch, expected code)
SMP_ERROR_CASES = [
    ("not-an-object", "Pod", [{"op": "add"}], 400),
    ("unknown-map-directive", "Pod", {"spec": {"$patch": "explode"}}, 400),
    ("unknown-list-directive", "Pod", {"spec": {"containers": [{"name": "a", "$patch": "explode"}]}}, 400),
    ("delete-without-merge-key", "Pod", {"spec": {"containers": [{"$patch": "delete"}]}}, 400),
    ("element-without-merge-key", "Pod", {"spec": {"containers": [{"image": "x"}]}}, 400),
    ("element-not-an-object", "Pod", {"spec": {"containers": ["a"]}}, 400),
    ("retain-keys-not-a-list", "Deployment", {"spec": {"strategy": {"$retainKeys": "type"}}}, 400),
    (
        "retain-keys-mismatch",
        "Deployment",
        {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}},
        400,
    ),
    ("set-order-not-a-list", "Pod", {"spec": {"$setElementOrder/containers": {"name": "a"}}}, 400),
    (
        "set-order-without-key",
        "Pod",
        {"spec": {"$setElementOrder/containers": ["a"], "containers": [{"name": "a"}]}},
        400,
    ),
    (
        "set-order-contradicts-patch",
        "Pod",
        {"spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": [{"name": "b"}]}},
        400,
    ),
    ("delete-from-not-a-list", "Pod", {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}, 400),
    ("objects-in-primitive-list", "Pod", {"metadata": {"finalizers": [{"a": 1}]}}, 400),
    ("unknown-directive-in-atomic-list", "Pod", {"spec": {"tolerations": [{"$patch": "explode"}]}}, 400),
]


@pytest.mark.parametrize(
    ("kind", "patch", "code"), [c[1:] for c in SMP_ERROR_CASES], ids=[c[0] for c in SMP_ERROR_CASES]
)
def test_strategic_merge_errors(kind: str, patch: object, code: int) -> None:
    live = {
        "metadata": {"finalizers": ["x"]},
        "spec": {"containers": [{"name": "a"}], "strategy": {"type": "A"}},
    }
    live_before = copy.deepcopy(live)
    with pytest.raises(PatchError) as info:
        strategic_merge_patch(live, patch, kind=kind)
    assert info.value.code == code
    assert live == live_before


def test_patch_error_carries_code() -> None:
    error = PatchError("boom", 422)
    assert isinstance(error, ValueError)
    assert (str(error), error.code) == ("boom", 422)
    assert PatchError("bad").code == 400
