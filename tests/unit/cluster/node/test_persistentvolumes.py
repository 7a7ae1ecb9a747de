"""The volume controller's pure decisions: which user volume a claim binds, what gets provisioned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.clients.node import persistentvolumes


def claim(**spec: Any) -> dict[str, Any]:
    base = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "manual",
        "volumeMode": "Filesystem",
    }
    return {"metadata": {"name": "data", "namespace": "ml", "uid": "c-1", "resourceVersion": "7"}, "spec": base | spec}


def volume(labels: dict[str, str] | None = None, phase: str = "Available", **spec: Any) -> dict[str, Any]:
    base = {
        "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
        "capacity": {"storage": "5Gi"},
        "storageClassName": "manual",
        "hostPath": {"path": "/srv/data"},
    }
    return {"metadata": {"name": "pv", "labels": labels or {}}, "spec": base | spec, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("pv", "wanted", "fits"),
    [
        (volume(), claim(), True),
        (volume(capacity={"storage": "1Gi"}), claim(), False),
        (volume(storageClassName="fast"), claim(), False),
        (volume(accessModes=["ReadOnlyMany"]), claim(), False),
        (volume(volumeMode="Block"), claim(), False),
        (volume(claimRef={"name": "other"}), claim(), False),
        (volume(phase="Released"), claim(), False),
        (volume({"tier": "ssd"}), claim(selector={"matchLabels": {"tier": "ssd"}}), True),
        (volume({"tier": "hdd"}), claim(selector={"matchLabels": {"tier": "ssd"}}), False),
        (volume({"tier": "ssd"}), claim(selector={"matchExpressions": [{"key": "tier", "operator": "Exists"}]}), False),
        (volume(storageClassName=""), claim(storageClassName=""), True),
    ],
)
def test_static_binding(pv: dict[str, Any], wanted: dict[str, Any], fits: bool) -> None:
    assert persistentvolumes.matches(wanted, pv) is fits


def test_the_provisioned_volume_is_a_pinned_host_directory_bound_to_its_claim(tmp_path: Path) -> None:
    sc = persistentvolumes.local_path_class()
    pv = persistentvolumes.provisioned_volume(claim(storageClassName="local-path"), sc, "node-1", tmp_path / "pvc-c-1")
    assert pv["metadata"]["name"] == "pvc-c-1"
    assert pv["metadata"]["annotations"][persistentvolumes.PROVISIONED_BY] == "rancher.io/local-path"
    assert pv["metadata"]["finalizers"] == ["kubernetes.io/pv-protection"]
    spec = pv["spec"]
    assert spec["hostPath"] == {"path": str(tmp_path / "pvc-c-1"), "type": "DirectoryOrCreate"}
    assert spec["capacity"] == {"storage": "2Gi"} and spec["accessModes"] == ["ReadWriteOnce"]
    assert spec["persistentVolumeReclaimPolicy"] == "Delete" and spec["storageClassName"] == "local-path"
    assert spec["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ml",
        "name": "data",
        "uid": "c-1",
        "resourceVersion": "7",
    }
    terms = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]}]}]


def test_the_default_class_is_local_path_waiting_for_a_consumer() -> None:
    sc = persistentvolumes.local_path_class()
    assert sc["metadata"]["annotations"] == {"storageclass.kubernetes.io/is-default-class": "true"}
    assert (sc["provisioner"], sc["volumeBindingMode"], sc["reclaimPolicy"]) == (
        "rancher.io/local-path",
        "WaitForFirstConsumer",
        "Delete",
    )


def test_pods_hold_their_claims_until_they_finish() -> None:
    def pod(phase: str, *claims: str) -> dict[str, Any]:
        volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
        return {"spec": {"volumes": [*volumes, {"name": "tmp", "emptyDir": {}}]}, "status": {"phase": phase}}

    assert persistentvolumes.claim_names(pod("Running", "a", "b", "a")) == ["a", "b"]
    assert persistentvolumes.uses(pod("Running", "a"), "a") and persistentvolumes.uses(pod("Pending", "a"), "a")
    assert not persistentvolumes.uses(pod("Succeeded", "a"), "a")
    assert not persistentvolumes.uses(pod("Running", "b"), "a")
