"""The disruption controller's status of a PodDisruptionBudget: expected, desired and current healthy
pods, disruptions allowed, the DisruptionAllowed condition and the fail-safe, as upstream v1.32."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trainyard.api.meta import Obj, format_time
from trainyard.cluster.clients.disruption import decisions

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)


def pdb(**spec: object) -> Obj:
    return {
        "metadata": {"name": "b", "namespace": "ns", "generation": 2},
        "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
    }


def pod(name: str, ready: bool = True, owner: str | None = "u1") -> Obj:
    meta: Obj = {"name": name, "namespace": "ns", "labels": {"app": "a"}}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j", "uid": owner, "controller": True}
        ]
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_min_available_counts_the_selected_pods() -> None:
    plan = decisions.reconcile(pdb(minAvailable=2), [pod("a"), pod("b"), pod("c", ready=False)], {}, NOW)
    s = plan.status
    assert (s["expectedPods"], s["desiredHealthy"], s["currentHealthy"], s["disruptionsAllowed"]) == (3, 2, 2, 0)
    assert s["observedGeneration"] == 2
    condition = s["conditions"][-1]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "DisruptionAllowed",
        "False",
        "InsufficientPods",
    )
    more = decisions.reconcile(pdb(minAvailable=1), [pod("a"), pod("b")], {}, NOW).status
    assert more["disruptionsAllowed"] == 1 and more["conditions"][-1]["reason"] == "SufficientPods"


def test_percentages_and_max_unavailable_read_the_controllers_scale_rounding_up() -> None:
    pods = [pod("a"), pod("b"), pod("c")]
    assert decisions.reconcile(pdb(maxUnavailable=1), pods, {"u1": 4}, NOW).status["desiredHealthy"] == 3
    assert decisions.reconcile(pdb(maxUnavailable="50%"), pods, {"u1": 3}, NOW).status["desiredHealthy"] == 1
    assert decisions.reconcile(pdb(minAvailable="50%"), pods, {"u1": 3}, NOW).status["desiredHealthy"] == 2


def test_no_scale_fails_safe_with_sync_failed() -> None:
    plan = decisions.reconcile(pdb(maxUnavailable=1), [pod("a", owner=None)], {}, NOW)
    assert plan.status["disruptionsAllowed"] == 0
    assert plan.status["conditions"][-1]["reason"] == "SyncFailed"
    assert plan.status["conditions"][-1]["message"] == 'found no controller ref for pod "a"'
    assert [e.reason for e in plan.events] == ["CalculateExpectedPodCountFailed"]
    batch = decisions.reconcile(pdb(maxUnavailable=1), [pod("a")], {"u1": None}, NOW)
    assert batch.status["conditions"][-1]["message"] == 'found no controllers for pod "a"'


def test_no_pods_is_told_and_allows_nothing() -> None:
    plan = decisions.reconcile(pdb(minAvailable=0), [], {}, NOW)
    assert plan.status["disruptionsAllowed"] == 0
    assert [(e.reason, e.message) for e in plan.events] == [("NoPods", "No matching pods found")]


def test_disrupted_pods_are_not_healthy_until_they_expire() -> None:
    budget = pdb(minAvailable=1)
    budget["status"] = {"disruptedPods": {"a": format_time(NOW - timedelta(seconds=30)), "gone": format_time(NOW)}}
    plan = decisions.reconcile(budget, [pod("a"), pod("b")], {}, NOW)
    assert plan.status["currentHealthy"] == 1 and plan.status["disruptedPods"] == {
        "a": budget["status"]["disruptedPods"]["a"]
    }
    assert plan.requeue_after is not None and 89 < plan.requeue_after < 91
    expired = decisions.reconcile(budget, [pod("a"), pod("b")], {}, NOW + timedelta(minutes=2))
    assert expired.status["currentHealthy"] == 2 and "disruptedPods" not in expired.status
