"""PodGroup status as scheduler-plugins and Volcano write it, from the group's member pods."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from trainyard.api import podgroupcrds
from trainyard.cluster.clients.scheduler import podgroups
from trainyard.cluster.clients.scheduler.snapshot import PodInfo

NOW = "2026-01-01T00:00:10Z"


def members(*states: tuple[str, str]) -> list[PodInfo]:
    """(node, phase) per member."""
    return [
        PodInfo(f"u{i}", "ns", f"p{i}", {}, node_name=node, phase=phase, owners=("job",))
        for i, (node, phase) in enumerate(states)
    ]


def group(minimum: int, status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    meta = {"name": "g", "namespace": "ns"}
    return {"metadata": meta, "spec": {"minMember": minimum, **spec}, "status": status or {}}


PENDING = ("", "Pending")
BOUND = ("box", "Pending")
RUNNING = ("box", "Running")
DONE = ("box", "Succeeded")
FAILED = ("box", "Failed")


@pytest.mark.parametrize(
    ("states", "phase"),
    [
        pytest.param([PENDING], "Pending", id="too-few-members"),
        pytest.param([PENDING, PENDING], "Scheduling", id="enough-members"),
        pytest.param([BOUND, BOUND], "Scheduled", id="all-bound"),
        pytest.param([RUNNING, BOUND], "Scheduled", id="not-all-running"),
        pytest.param([RUNNING, DONE], "Running", id="running-or-done"),
        pytest.param([FAILED, RUNNING], "Failed", id="a-member-failed"),
        pytest.param([DONE, DONE], "Finished", id="finished"),
    ],
)
def test_coscheduling_phases(states: list[tuple[str, str]], phase: str) -> None:
    status = podgroups.coscheduling_status(group(2), members(*states), now=NOW)
    assert status["phase"] == phase


def test_coscheduling_counts_and_occupant() -> None:
    status = podgroups.coscheduling_status(group(2), members(RUNNING, DONE, BOUND), now=NOW)
    assert {k: status[k] for k in ("scheduled", "running", "succeeded", "failed")} == {
        "scheduled": 3,
        "running": 1,
        "succeeded": 1,
        "failed": 0,
    }
    assert status["scheduleStartTime"] == NOW
    assert podgroups.coscheduling_status(group(2), members(PENDING, PENDING), now=NOW)["occupiedBy"] == "ns/job"


def test_a_finished_group_is_left_alone() -> None:
    finished = {"phase": "Finished", "succeeded": 2}
    assert podgroups.coscheduling_status(group(2, finished), [], now=NOW) == finished


def test_schedule_timeout_becomes_a_condition_and_clears_when_placed() -> None:
    waiting = group(2, {"phase": "Scheduling", "scheduleStartTime": "2026-01-01T00:00:00Z"}, scheduleTimeoutSeconds=5)
    assert not podgroups.timed_out(waiting, datetime(2026, 1, 1, 0, 0, 4, tzinfo=UTC))
    assert podgroups.timed_out(waiting, datetime(2026, 1, 1, 0, 0, 5, tzinfo=UTC))
    status = podgroups.timeout_condition(waiting["status"], expired=True, verdict="no room", timeout=5, now=NOW)
    (condition,) = status["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == ("Unschedulable", "True", "ScheduleTimeout")
    assert condition["message"] == "not schedulable within scheduleTimeoutSeconds (5s): no room"
    cleared = podgroups.timeout_condition(status, expired=True, verdict=None, timeout=5, now=NOW)
    assert cleared["conditions"][0]["status"] == "False"


@pytest.mark.parametrize(
    ("phase", "enqueued", "states", "expected"),
    [
        pytest.param("", False, [], "Pending", id="new"),
        pytest.param("Pending", True, [], "Inqueue", id="enqueued"),
        pytest.param("Inqueue", False, [PENDING, PENDING], "Inqueue", id="waiting-for-placement"),
        pytest.param("Inqueue", False, [BOUND, RUNNING], "Running", id="allocated"),
        pytest.param("Running", False, [DONE, RUNNING], "Running", id="succeeded-counts"),
        pytest.param("Running", False, [DONE, DONE], "Completed", id="completed"),
        pytest.param("Running", False, [DONE, DONE, BOUND], "Running", id="a-member-still-to-run"),
        pytest.param("Running", False, [], "Pending", id="members-gone"),
        pytest.param("Completed", False, [], "Completed", id="completed-stays"),
    ],
)
def test_volcano_phases(phase: str, enqueued: bool, states: list[tuple[str, str]], expected: str) -> None:
    g = group(2, {"phase": phase})
    status = podgroups.volcano_status(g, members(*states), enqueued=enqueued, verdict=None, now=NOW)
    assert status["phase"] == expected


def test_volcano_conditions() -> None:
    refused = podgroups.volcano_status(group(2), [], enqueued=False, verdict="too big", now=NOW)
    (condition,) = refused["conditions"]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "Unschedulable",
        "True",
        "NotEnoughResources",
        "too big",
    )
    placed = podgroups.volcano_status(group(2, refused), members(BOUND, BOUND), enqueued=False, verdict=None, now=NOW)
    kinds = {c["type"]: c["status"] for c in placed["conditions"]}
    assert kinds == {"Unschedulable": "False", "Scheduled": "True"}


def test_crds_are_structural_and_named_as_upstream() -> None:
    names = [c["metadata"]["name"] for c in podgroupcrds.crds()]
    assert names == ["podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh"]
    for crd in podgroupcrds.crds():
        (version,) = crd["spec"]["versions"]
        assert version["schema"]["openAPIV3Schema"]["type"] == "object"
        assert version["subresources"] == {"status": {}}
