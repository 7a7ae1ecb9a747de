"""Pod conditions derived from container statuses, as the kubelet words them."""

from __future__ import annotations

from typing import Any

from trainyard.cluster.clients.node.conditions import pod_conditions


def by_type(conditions: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in conditions}


def running(name: str, ready: bool) -> dict[str, Any]:
    return {"name": name, "ready": ready, "state": {"running": {}}}


def done(name: str, code: int) -> dict[str, Any]:
    return {"name": name, "ready": code == 0, "state": {"terminated": {"exitCode": code}}}


def test_ready_waits_for_every_container() -> None:
    conditions = by_type(pod_conditions("Running", [], [running("a", True), running("b", False)]))
    assert conditions["Initialized"] == {"type": "Initialized", "status": "True"}
    assert conditions["Ready"] == {
        "type": "Ready",
        "status": "False",
        "reason": "ContainersNotReady",
        "message": "containers with unready status: [b]",
    }
    assert conditions["ContainersReady"]["message"] == "containers with unready status: [b]"
    ready = by_type(pod_conditions("Running", [], [running("a", True), running("b", True)]))
    assert ready["Ready"] == {"type": "Ready", "status": "True"} and ready["ContainersReady"]["status"] == "True"


def test_initialized_names_the_init_containers_not_yet_done() -> None:
    waiting = {"name": "second", "state": {"waiting": {"reason": "PodInitializing"}}}
    conditions = by_type(pod_conditions("Pending", [done("first", 0), waiting], [running("main", False)]))
    assert conditions["Initialized"] == {
        "type": "Initialized",
        "status": "False",
        "reason": "ContainersNotInitialized",
        "message": "containers with incomplete status: [second]",
    }


def test_a_finished_pod_is_not_ready_because_it_completed() -> None:
    conditions = by_type(pod_conditions("Succeeded", [], [done("main", 0)]))
    assert conditions["Ready"] == {"type": "Ready", "status": "False", "reason": "PodCompleted"}
