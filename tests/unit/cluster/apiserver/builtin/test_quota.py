"""ResourceQuota and LimitRange: what counts, kube-apiserver's words, and the write path's bookkeeping.

The pure evaluation is checked with values; the bookkeeping through a real store and ``Objects``
(no HTTP: the e2e test goes through kubectl): a create charges ``status.used`` at once, a dry run
charges nothing, a pod that finishes or goes gives its share back.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from trainyard.api import PYTORCHJOB
from trainyard.api.crd import crd_for
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.builtin import limits, quota
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.apiserver.requests.writing import WriteOptions
from trainyard.cluster.server.storage.store import Store

SEED_001 = {
    "requests.cpu": "8",
    "requests.memory": "16Gi",
    "limits.cpu": "12",
    "limits.memory": "24Gi",
    "count/tfjobs.kubeflow.org": "3",
    "count/pytorchjobs.kubeflow.org": "3",
}


def pod(name: str, *containers: tuple[str, dict[str, str], dict[str, str]], phase: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {
            "containers": [
                {"name": n, "image": "python:3.11", "resources": {"requests": r, "limits": lim}}
                for n, r, lim in containers
            ]
        },
    }
    if phase:
        body["status"] = {"phase": phase}
    return body


# -- pure ---------------------------------------------------------------------------------------------


def test_pod_usage_sums_containers_defaults_requests_from_limits_and_counts_extended_requests() -> None:
    usage = quota.pod_usage(
        pod("p", ("a", {"cpu": "500m"}, {"memory": "1Gi", "nvidia.com/gpu": "1"}), ("b", {"cpu": "1"}, {"cpu": "2"}))
    )
    assert usage["pods"] == usage["count/pods"] == 1
    assert usage["requests.cpu"] == usage["cpu"] == Decimal("1.5")
    assert usage["requests.memory"] == usage["limits.memory"] == 2**30  # the missing request is the limit
    assert usage["limits.cpu"] == 2
    assert usage["requests.nvidia.com/gpu"] == 1 and "nvidia.com/gpu" not in usage


def test_a_terminal_pod_charges_only_its_object_count() -> None:
    assert quota.pod_usage(pod("p", ("a", {"cpu": "1"}, {}), phase="Succeeded")) == {"count/pods": 1}


def test_the_exceeded_message_is_kube_apiservers() -> None:
    q = {"metadata": {"name": "team"}, "spec": {"hard": {"requests.cpu": "2", "requests.memory": "1Gi", "pods": "9"}}}
    requested = {"requests.cpu": Decimal("1.5"), "requests.memory": Decimal(2**29), "pods": Decimal(1)}
    used = {"requests.cpu": Decimal(1), "requests.memory": Decimal(2**29 + 2**28), "pods": Decimal(1)}
    assert quota.exceeded(q, requested, used) == (
        "exceeded quota: team, requested: requests.cpu=1500m,requests.memory=512Mi, "
        "used: requests.cpu=1,requests.memory=768Mi, limited: requests.cpu=2,requests.memory=1Gi"
    )
    assert quota.exceeded(q, {"pods": Decimal(1)}, used) is None


def test_a_quota_on_cpu_and_memory_needs_every_container_to_state_them() -> None:
    p = pod("p", ("a", {}, {}), ("b", {"cpu": "1"}, {}))
    assert quota.missing(p, SEED_001) == (
        "must specify limits.cpu for: a,b; limits.memory for: a,b; requests.cpu for: a; requests.memory for: a,b"
    )
    assert quota.missing(p, {"count/pytorchjobs.kubeflow.org": "3", "requests.nvidia.com/gpu": "1"}) is None


@pytest.mark.parametrize(
    ("key", "value", "messages"),
    [
        ("count/pytorchjobs.kubeflow.org", "3", []),
        ("count/widgets.example.com", "1", []),  # not served here: accepted, as upstream, and never counts
        ("requests.nvidia.com/gpu", "2", []),
        ("gpus", "1", ["must be a standard resource type or fully qualified", "must be a standard resource for quota"]),
        ("storage", "1", ["must be a standard resource for quota"]),
        ("count/configmaps", "1.5", ["must be an integer"]),
        ("pods", "500m", ["must be an integer"]),
        ("requests.cpu", "-1", ["must be greater than or equal to 0"]),
    ],
)
def test_hard_keys_are_validated_as_kube_does(key: str, value: str, messages: list[str]) -> None:
    found = quota.validate({"spec": {"hard": {key: value}}})
    assert [c[1] for c in found] == [f"spec.hard[{key}]"] * len(messages)
    assert [c[2].rpartition(": ")[2] for c in found] == messages


def test_kubectl_columns_split_limits_from_requests() -> None:
    q = {"spec": {"hard": SEED_001}, "status": {"hard": SEED_001, "used": {"requests.cpu": "1500m"}}}
    assert quota.columns_cells(q) == (
        "count/pytorchjobs.kubeflow.org: 0/3, count/tfjobs.kubeflow.org: 0/3, requests.cpu: 1500m/8, "
        "requests.memory: 0/16Gi",
        "limits.cpu: 0/12, limits.memory: 0/24Gi",
    )


def test_limit_range_defaults_annotates_and_refuses_past_its_maximum() -> None:
    lr: dict[str, Any] = {
        "metadata": {"name": "lr"},
        "spec": {"limits": [{"type": "Container", "max": {"cpu": "1"}, "defaultRequest": {"memory": "64Mi"}}]},
    }
    limits.default(lr)
    item = lr["spec"]["limits"][0]
    assert item["default"] == {"cpu": "1"} and item["defaultRequest"] == {"memory": "64Mi", "cpu": "1"}
    bare = pod("p", ("main", {}, {}))
    assert limits.admit_pod(bare, [lr]) is None
    assert bare["spec"]["containers"][0]["resources"] == {
        "requests": {"cpu": "1", "memory": "64Mi"},
        "limits": {"cpu": "1"},
    }
    assert bare["metadata"]["annotations"][limits.ANNOTATION] == (
        "LimitRanger plugin set: cpu, memory request for container main; cpu limit for container main"
    )
    assert limits.admit_pod(pod("q", ("main", {}, {"cpu": "2"})), [lr]) == (
        "Maximum cpu usage per Container is 1, but limit is 2."
    )
    ratio = {"metadata": {"name": "r"}, "spec": {"limits": [{"type": "Pod", "maxLimitRequestRatio": {"cpu": "2"}}]}}
    assert limits.admit_pod(pod("r", ("a", {"cpu": "1"}, {"cpu": "3"})), [ratio]) == (
        "cpu max limit to request ratio per Pod is 2, but provided ratio is 3.000000."
    )


# -- the write path ---------------------------------------------------------------------------------


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    objs = Objects(Store(tmp_path / "store.db"), Registry())
    objs.create(rt(objs, "", "namespaces"), "", {"metadata": {"name": "ns"}})
    objs.create(rt(objs, "apiextensions.k8s.io", "customresourcedefinitions"), "", crd_for(PYTORCHJOB))
    return objs


def rt(objects: Objects, group: str, plural: str, version: str = "v1") -> ResourceType:
    found = objects.registry.lookup(group, version, plural)
    assert found is not None
    return found


def used(objects: Objects, name: str = "team") -> dict[str, str]:
    return objects.get(rt(objects, "", "resourcequotas"), "ns", name)["status"]["used"]


def refusal(call: Any) -> errors.ApiError:
    with pytest.raises(errors.ApiError) as caught:
        call()
    return caught.value


def test_a_create_past_the_quota_is_403_and_usage_falls_when_a_pod_finishes(objects: Objects) -> None:
    quotas, pods = rt(objects, "", "resourcequotas"), rt(objects, "", "pods")
    hard = {"requests.cpu": "2", "pods": "5", "count/pods": "5"}
    created = objects.create(quotas, "ns", {"metadata": {"name": "team"}, "spec": {"hard": hard}})
    assert created["status"] == {"hard": hard, "used": {"count/pods": "0", "pods": "0", "requests.cpu": "0"}}
    one = pod("one", ("main", {"cpu": "1500m"}, {}))
    objects.create(pods, "ns", dict(one), options=WriteOptions(dry_run=True))
    assert used(objects)["requests.cpu"] == "0"  # a dry run charges nothing
    objects.create(pods, "ns", one)
    assert used(objects) == {"count/pods": "1", "pods": "1", "requests.cpu": "1500m"}
    refused = refusal(lambda: objects.create(pods, "ns", pod("two", ("main", {"cpu": "1"}, {}))))
    assert (refused.code, refused.reason) == (403, "Forbidden")
    assert refused.status()["message"] == (
        'pods "two" is forbidden: exceeded quota: team, requested: requests.cpu=1, used: requests.cpu=1500m, '
        "limited: requests.cpu=2"
    )
    assert refused.status()["details"] == {"name": "two", "kind": "pods"}
    finished = objects.get(pods, "ns", "one")
    finished["status"]["phase"] = "Succeeded"
    objects.update(pods, "ns", "one", finished, subresource="status")
    assert used(objects) == {"count/pods": "1", "pods": "0", "requests.cpu": "0"}
    objects.create(pods, "ns", pod("two", ("main", {"cpu": "1"}, {})))
    objects.delete(pods, "ns", "one")
    assert used(objects) == {"count/pods": "1", "pods": "1", "requests.cpu": "1"}


def test_count_of_a_custom_resource_and_a_quota_edit_recounts(objects: Objects) -> None:
    quotas, jobs = rt(objects, "", "resourcequotas"), rt(objects, "kubeflow.org", "pytorchjobs")
    objects.create(quotas, "ns", {"metadata": {"name": "team"}, "spec": {"hard": dict(SEED_001)}})
    template = {"template": {"spec": {"containers": [{"name": "pytorch", "image": "python:3.11"}]}}}
    for i in range(3):
        job = {"metadata": {"name": f"j{i}"}, "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **template}}}}
        objects.create(jobs, "ns", job)
    assert used(objects)["count/pytorchjobs.kubeflow.org"] == "3"
    fourth = {"metadata": {"name": "j3"}, "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, **template}}}}
    refused = refusal(lambda: objects.create(jobs, "ns", fourth))
    assert refused.status()["message"] == (
        'pytorchjobs.kubeflow.org "j3" is forbidden: exceeded quota: team, requested: '
        "count/pytorchjobs.kubeflow.org=1, used: count/pytorchjobs.kubeflow.org=3, "
        "limited: count/pytorchjobs.kubeflow.org=3"
    )
    assert refused.status()["details"] == {"name": "j3", "kind": "pytorchjobs", "group": "kubeflow.org"}
    current = objects.get(quotas, "ns", "team")
    current["spec"]["hard"] = {"count/pytorchjobs.kubeflow.org": "4", "count/configmaps": "2"}
    updated = objects.update(quotas, "ns", "team", current)
    assert updated["status"]["hard"] == current["spec"]["hard"]
    assert updated["status"]["used"] == {"count/configmaps": "0", "count/pytorchjobs.kubeflow.org": "3"}
    objects.create(jobs, "ns", fourth)
    objects.delete(jobs, "ns", "j0")
    assert used(objects)["count/pytorchjobs.kubeflow.org"] == "3"


def test_an_invalid_quota_is_422_with_kubes_field_path(objects: Objects) -> None:
    quotas = rt(objects, "", "resourcequotas")
    refused = refusal(lambda: objects.create(quotas, "ns", {"metadata": {"name": "q"}, "spec": {"hard": {"gpu": "1"}}}))
    assert refused.code == 422
    assert [c["field"] for c in refused.status()["details"]["causes"]] == ["spec.hard[gpu]", "spec.hard[gpu]"]


def test_limit_range_defaults_come_before_the_quotas_must_specify_rule(objects: Objects) -> None:
    quotas, pods, ranges = rt(objects, "", "resourcequotas"), rt(objects, "", "pods"), rt(objects, "", "limitranges")
    objects.create(quotas, "ns", {"metadata": {"name": "team"}, "spec": {"hard": {"limits.cpu": "2"}}})
    bare = pod("bare", ("main", {}, {}))
    refused = refusal(lambda: objects.create(pods, "ns", bare))
    message = refused.status()["message"]
    assert message == 'pods "bare" is forbidden: failed quota: team: must specify limits.cpu for: main'
    lr = {"metadata": {"name": "lr"}, "spec": {"limits": [{"type": "Container", "default": {"cpu": "500m"}}]}}
    objects.create(ranges, "ns", lr)
    created = objects.create(pods, "ns", pod("bare", ("main", {}, {})))
    assert created["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "500m"}
    assert created["status"]["qosClass"] == "Burstable"
    assert used(objects) == {"limits.cpu": "500m"}
