"""Job admission in the embedded API server: the webhook rules on create, update and patch.

A real store and the PyTorchJob CRD generated from the models; no HTTP (the e2e tests go through
kubectl). What is checked here is the wiring: warnings reach the caller and updates are checked
against the stored object.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from trainyard.api import PYTORCHJOB
from trainyard.api.crd import crd_for
from trainyard.api.kinds import KINDS
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.apiserver.requests.writing import WriteOptions
from trainyard.cluster.server.storage.store import Store

MERGE = "application/merge-patch+json"
DEPRECATED = "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"


def replica(n: int | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "pytorch", "image": "python:3.11"}]}}}
    if n is not None:
        spec["replicas"] = n
    return spec


JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "mnist"},
    "spec": {
        "runPolicy": {"managedBy": "kubeflow.org/training-operator"},
        "pytorchReplicaSpecs": {"Master": replica(1), "Worker": replica(2)},
    },
}


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    objs = Objects(Store(tmp_path / "store.db"), Registry())
    objs.create(lookup(objs, "", "v1", "namespaces"), "", {"metadata": {"name": "ns"}})
    objs.create(lookup(objs, "apiextensions.k8s.io", "v1", "customresourcedefinitions"), "", crd_for(PYTORCHJOB))
    return objs


def lookup(objects: Objects, group: str, version: str, plural: str) -> ResourceType:
    found = objects.registry.lookup(group, version, plural)
    assert found is not None
    return found


def jobs(objects: Objects) -> ResourceType:
    return lookup(objects, "kubeflow.org", "v1", "pytorchjobs")


def causes(exc: errors.ApiError) -> list[tuple[str, str]]:
    assert exc.details is not None
    return [(c["reason"], c["field"]) for c in exc.details["causes"]]


def test_create_with_the_deprecated_field_warns(objects: Objects) -> None:
    body = copy.deepcopy(JOB)
    body["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    warnings: list[str] = []

    objects.create(jobs(objects), "ns", body, options=WriteOptions(warnings=warnings))

    assert warnings == [DEPRECATED]


def test_create_without_it_does_not(objects: Objects) -> None:
    warnings: list[str] = []

    objects.create(jobs(objects), "ns", copy.deepcopy(JOB), options=WriteOptions(warnings=warnings))

    assert warnings == []


def test_patch_that_changes_managed_by_is_refused_with_its_field(objects: Objects) -> None:
    objects.create(jobs(objects), "ns", copy.deepcopy(JOB))

    with pytest.raises(errors.ApiError) as caught:
        objects.patch(jobs(objects), "ns", "mnist", MERGE, {"spec": {"runPolicy": {"managedBy": None}}})

    assert caught.value.code == 422 and caught.value.reason == "Invalid"
    assert causes(caught.value) == [("FieldValueInvalid", "spec.runPolicy.managedBy")]
    assert 'spec.runPolicy.managedBy: Invalid value: "null": field is immutable' in caught.value.message
    stored = objects.get(jobs(objects), "ns", "mnist")
    assert stored["spec"]["runPolicy"]["managedBy"] == "kubeflow.org/training-operator"


def test_update_that_keeps_managed_by_is_accepted_and_warns(objects: Objects) -> None:
    created = objects.create(jobs(objects), "ns", copy.deepcopy(JOB))
    body = copy.deepcopy(created)
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    body["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    warnings: list[str] = []

    updated = objects.update(jobs(objects), "ns", "mnist", body, options=WriteOptions(warnings=warnings))

    assert updated["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 4
    assert warnings == [DEPRECATED]


def test_update_is_validated_whole(objects: Objects) -> None:
    objects.create(jobs(objects), "ns", copy.deepcopy(JOB))

    with pytest.raises(errors.ApiError) as caught:
        objects.patch(
            jobs(objects), "ns", "mnist", MERGE, {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}}
        )

    assert causes(caught.value) == [("FieldValueForbidden", "spec.pytorchReplicaSpecs.Master.replicas")]


def test_the_webhook_runs_for_a_registered_kind_by_its_group_and_kind(
    objects: Objects, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same kind registered under another group, as Trainer v2's kinds are (trainer.kubeflow.org).
    other = dataclasses.replace(PYTORCHJOB, group="trainer.example.dev")
    monkeypatch.setitem(KINDS, other.kind, other)
    objects.create(lookup(objects, "apiextensions.k8s.io", "v1", "customresourcedefinitions"), "", crd_for(other))
    body = copy.deepcopy(JOB)
    body["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    in_other, in_kubeflow = copy.deepcopy(body), copy.deepcopy(body)
    in_other["apiVersion"] = other.api_version
    warned_other: list[str] = []
    warned_kubeflow: list[str] = []

    objects.create(
        lookup(objects, other.group, other.version, other.plural),
        "ns",
        in_other,
        options=WriteOptions(warnings=warned_other),
    )
    objects.create(jobs(objects), "ns", in_kubeflow, options=WriteOptions(warnings=warned_kubeflow))

    assert warned_other == [DEPRECATED]
    assert warned_kubeflow == []  # kubeflow.org's PyTorchJob is no longer a registered kind here
