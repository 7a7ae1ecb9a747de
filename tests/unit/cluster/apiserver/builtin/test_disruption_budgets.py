"""PodDisruptionBudgets served as kube-apiserver v1.32 does, and the eviction subresource honouring
them; the DefaultTolerationSeconds admission plugin. Real SQLite store, no HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from served_objects import objects_in, rt
from trainyard.cluster.server.apiserver import errors, subresources
from trainyard.cluster.server.apiserver.builtin import disruptionbudgets
from trainyard.cluster.server.apiserver.objects import Objects


@pytest.fixture
def objects(tmp_path: Path) -> Objects:
    return objects_in(tmp_path)


def running_pod(objects: Objects, name: str, ready: bool = True) -> dict:
    pods = rt(objects, "", "pods")
    body = {"metadata": {"name": name, "labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    objects.create(pods, "ns", body)
    status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    current = objects.get(pods, "ns", name)
    return objects.update(pods, "ns", name, {**current, "status": status}, subresource="status")


def budget(objects: Objects, allowed: int, **spec: object) -> dict:
    pdbs = rt(objects, "policy", "poddisruptionbudgets")
    body = {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"app": "a"}}, "minAvailable": 1, **spec}}
    created = objects.create(pdbs, "ns", body)
    status = {
        "observedGeneration": 1,
        "disruptionsAllowed": allowed,
        "currentHealthy": 1,
        "desiredHealthy": 1,
        "expectedPods": 1,
    }
    return objects.update(pdbs, "ns", "b", {**created, "status": status}, subresource="status")


def test_validation_in_kube_words() -> None:
    causes = disruptionbudgets.validate({"spec": {"minAvailable": "150%", "maxUnavailable": -1}})
    assert causes[0][1] == "spec" and causes[0][2].endswith("minAvailable and maxUnavailable cannot be both set")
    assert [(c[1], c[2]) for c in causes[1:]] == [
        ("spec.minAvailable", 'Invalid value: "150%": must not be greater than 100%'),
        ("spec.maxUnavailable", "Invalid value: -1: must be greater than or equal to 0"),
    ]
    bad = disruptionbudgets.validate({"spec": {"minAvailable": "x", "unhealthyPodEvictionPolicy": "Never"}})
    assert bad[0][2] == "Invalid value: \"x\": must be an integer or percentage (e.g '5%')"
    assert bad[1][1] == "spec.unhealthyPodEvictionPolicy"


def test_an_eviction_the_budget_allows_takes_one_disruption_and_records_the_pod(objects: Objects) -> None:
    pod = running_pod(objects, "p")
    budget(objects, 1)
    subresources._budget(objects, pod, dry_run=False)
    status = objects.get(rt(objects, "policy", "poddisruptionbudgets"), "ns", "b")["status"]
    assert status["disruptionsAllowed"] == 0 and list(status["disruptedPods"]) == ["p"]
    assert status["conditions"][-1]["reason"] == "InsufficientPods"


def test_an_eviction_the_budget_refuses_is_429_with_the_disruption_budget_cause(objects: Objects) -> None:
    pod = running_pod(objects, "p")
    budget(objects, 0)
    with pytest.raises(errors.ApiError) as refused:
        subresources._budget(objects, pod, dry_run=False)
    status = refused.value.status()
    assert (status["code"], status["reason"]) == (429, "TooManyRequests")
    assert status["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert status["details"]["causes"] == [
        {"reason": "DisruptionBudget", "message": "The disruption budget b needs 1 healthy pods and has 1 currently"}
    ]


def test_pending_and_unready_pods_of_a_healthy_budget_may_go(objects: Objects) -> None:
    budget(objects, 0)
    pending = objects.create(
        rt(objects, "", "pods"),
        "ns",
        {"metadata": {"name": "q", "labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}},
    )
    subresources._budget(objects, pending, dry_run=False)
    subresources._budget(objects, running_pod(objects, "u", ready=False), dry_run=False)


def test_a_new_budget_not_yet_observed_is_still_being_processed(objects: Objects) -> None:
    pod = running_pod(objects, "p")
    objects.create(
        rt(objects, "policy", "poddisruptionbudgets"),
        "ns",
        {"metadata": {"name": "b"}, "spec": {"selector": {"matchLabels": {"app": "a"}}}},
    )
    with pytest.raises(errors.ApiError) as refused:
        subresources._budget(objects, pod, dry_run=False)
    assert (
        refused.value.details["causes"][0]["message"]
        == "The disruption budget b is still being processed by the server."
    )


def test_default_toleration_seconds_are_added_unless_the_pod_tolerates(objects: Objects) -> None:
    created = running_pod(objects, "p")
    assert created["spec"]["tolerations"] == [
        {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    ]
    body = {
        "metadata": {"name": "own"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"operator": "Exists"}]},
    }
    assert objects.create(rt(objects, "", "pods"), "ns", body)["spec"]["tolerations"] == [{"operator": "Exists"}]
    # a replace from the manifest (without them) gets them again before the pod update rules judge it
    manifest = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    replaced = objects.update(rt(objects, "", "pods"), "ns", "p", manifest)
    assert replaced["spec"]["tolerations"] == created["spec"]["tolerations"]


def test_kubectl_columns() -> None:
    cells = [
        c[3]({"spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}}, None)
        for c in disruptionbudgets.columns(lambda o, _: "b", lambda o, _: "1m")
    ]
    assert cells == ["b", "2", "N/A", 1, "1m"]
