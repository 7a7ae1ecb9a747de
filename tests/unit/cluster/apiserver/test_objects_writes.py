"""Write semantics of ``Objects`` that kubectl exposed: no-op detection, write-time defaults, pod
update rules and the Status of a patch that does not apply. Real SQLite store, no HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from served_objects import objects_in, rt
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import Registry
from trainyard.cluster.server.storage.store import Store

MERGE = "application/merge-patch+json"
SMP = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

WIDGETS = {
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
            }
        ],
    },
}


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    return objects_in(tmp_path)


def test_noop_patch_after_create_with_type_meta_keeps_the_resource_version(objects: Objects) -> None:
    objects.create(rt(objects, "apiextensions.k8s.io", "customresourcedefinitions"), "", WIDGETS)
    widgets = rt(objects, "example.com", "widgets")
    body = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}
    created = objects.create(widgets, "ns", body)
    assert (created["apiVersion"], created["kind"]) == ("example.com/v1", "Widget")
    # status is ignored on the main endpoint, so this patch changes nothing at all
    patched = objects.patch(widgets, "ns", "w", MERGE, {"status": {"replicas": 9}})
    assert patched["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert objects.store.revision == int(created["metadata"]["resourceVersion"])


def test_secret_string_data_is_folded_into_data_on_every_write(objects: Objects) -> None:
    secrets = rt(objects, "", "secrets")
    body = {"metadata": {"name": "s"}, "data": {"a": "eA=="}, "stringData": {"b": "admin"}}
    created = objects.create(secrets, "ns", body)
    assert created["data"] == {"a": "eA==", "b": "YWRtaW4="} and "stringData" not in created
    assert created["type"] == "Opaque"
    patched = objects.patch(secrets, "ns", "s", MERGE, {"stringData": {"a": "y"}})
    assert patched["data"] == {"a": "eQ==", "b": "YWRtaW4="} and "stringData" not in patched


def test_service_ports_added_by_an_update_are_defaulted(objects: Objects) -> None:
    services = rt(objects, "", "services")
    objects.create(services, "ns", {"metadata": {"name": "web"}, "spec": {"ports": [{"name": "http", "port": 80}]}})
    ports = [{"name": "http", "port": 80}, {"name": "https", "port": 443}]
    patch = {"spec": {"$setElementOrder/ports": [{"port": 80}, {"port": 443}], "ports": ports}}
    patched = objects.patch(services, "ns", "web", SMP, patch)
    assert patched["spec"]["ports"] == [
        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443},
    ]


def test_pod_spec_updates_are_limited_to_what_a_kubelet_applies_in_place(objects: Objects) -> None:
    pods = rt(objects, "", "pods")
    container = {"name": "c", "image": "a", "command": ["true"]}
    objects.create(pods, "ns", {"metadata": {"name": "p"}, "spec": {"containers": [container]}})

    image = objects.patch(pods, "ns", "p", SMP, {"spec": {"containers": [{"name": "c", "image": "b"}]}})
    assert image["spec"]["containers"][0]["image"] == "b"
    deadline = objects.patch(pods, "ns", "p", MERGE, {"spec": {"activeDeadlineSeconds": 60}})
    assert deadline["spec"]["activeDeadlineSeconds"] == 60

    for patch in (
        {"spec": {"containers": [{"name": "c", "command": ["false"]}]}},
        {"spec": {"activeDeadlineSeconds": 120}},
        {"spec": {"restartPolicy": "Never"}},
    ):
        with pytest.raises(errors.ApiError) as caught:
            objects.patch(pods, "ns", "p", SMP, patch)
        status = caught.value.status()
        assert (status["code"], status["reason"]) == (422, "Invalid")
        cause = status["details"]["causes"][0]
        assert (cause["reason"], cause["field"]) == ("FieldValueForbidden", "spec")
        assert cause["message"].startswith("Forbidden: pod updates may not change fields other than")
    # labels and the status subresource stay writable
    labelled = objects.patch(pods, "ns", "p", MERGE, {"metadata": {"labels": {"a": "b"}}})
    assert labelled["metadata"]["labels"] == {"a": "b"}


def test_a_json_patch_that_does_not_apply_gets_the_apiservers_generic_invalid(objects: Objects) -> None:
    configmaps = rt(objects, "", "configmaps")
    objects.create(configmaps, "ns", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    with pytest.raises(errors.ApiError) as caught:
        objects.patch(configmaps, "ns", "c", JSON_PATCH, [{"op": "test", "path": "/data/a", "value": "2"}])
    assert caught.value.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }
    with pytest.raises(errors.ApiError) as malformed:
        objects.patch(configmaps, "ns", "c", JSON_PATCH, {"op": "add"})
    assert malformed.value.code == 400


def test_no_finalizer_may_be_added_while_deleting(objects: Objects) -> None:
    configmaps = rt(objects, "", "configmaps")
    objects.create(configmaps, "ns", {"metadata": {"name": "c", "finalizers": ["x/y"]}})
    objects.delete(configmaps, "ns", "c")
    with pytest.raises(errors.ApiError) as caught:
        objects.patch(configmaps, "ns", "c", MERGE, {"metadata": {"finalizers": ["x/y", "a/b"]}})
    status = caught.value.status()
    assert status["message"] == (
        'ConfigMap "c" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object '
        'is being deleted, found new finalizers []string{"a/b"}'
    )
    assert status["details"]["causes"][0]["field"] == "metadata.finalizers"


def test_a_generated_name_that_is_taken_is_drawn_again_up_to_eight_times(tmp_path: Path) -> None:
    # kube-apiserver's RetryGenerateName (GA in 1.32): a collision of generated names is not the client's 409.
    draws = iter(["aaaaa"] * 8 + ["bbbbb"] + ["aaaaa"] * 8)
    objs = Objects(Store(tmp_path / "store.db"), Registry(), suffix=lambda: next(draws))
    objs.create(rt(objs, "", "namespaces"), "", {"metadata": {"name": "ns"}})
    configmaps = rt(objs, "", "configmaps")
    body = {"metadata": {"generateName": "cm-"}, "data": {"k": "v"}}
    assert objs.create(configmaps, "ns", body)["metadata"]["name"] == "cm-aaaaa"
    # taken on seven tries, free on the eighth
    assert objs.create(configmaps, "ns", body)["metadata"]["name"] == "cm-bbbbb"
    # taken on all eight tries: AlreadyExists, with the last name drawn
    with pytest.raises(errors.ApiError) as refused:
        objs.create(configmaps, "ns", body)
    assert (refused.value.code, refused.value.reason) == (409, "AlreadyExists")
    assert next(draws, None) is None
    # a name the client chose is never replaced
    with pytest.raises(errors.ApiError):
        objs.create(configmaps, "ns", {"metadata": {"name": "cm-aaaaa"}})
