"""What the simulated cloud does to a node's machine, from the Node's annotations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trainyard.cluster.clients.node import machines

NOW = datetime(2026, 12, 3, 10, 0, 0, tzinfo=UTC)


def node(annotations: dict[str, str] | None = None, *, tainted: bool = False, condition: bool = False) -> dict:
    return {
        "metadata": {"name": "n", "annotations": annotations or {}},
        "spec": {"taints": [dict(machines.SPOT_TAINT)] if tainted else []},
        "status": {"conditions": [{"type": machines.SPOT_CONDITION, "status": "True"}] if condition else []},
    }


def test_power_off_stops_a_running_machine_and_on_boots_a_stopped_one() -> None:
    off = node({machines.POWER_ANNOTATION: "off"})
    assert machines.plan(off, NOW, running=True, reclaimed=False).power_off
    assert machines.plan(off, NOW, running=False, reclaimed=False) == machines.MachinePlan()
    assert machines.plan(node(), NOW, running=False, reclaimed=False).power_on
    assert machines.plan(node(), NOW, running=True, reclaimed=False) == machines.MachinePlan()


def test_a_spot_notice_taints_once_then_waits_for_its_deadline() -> None:
    at = NOW + timedelta(seconds=30)
    noticed = {machines.NOTICE_ANNOTATION: at.strftime("%Y-%m-%dT%H:%M:%SZ")}
    first = machines.plan(node(noticed), NOW, running=True, reclaimed=False)
    assert first.notice == {"at": at} and first.requeue == 30 and not first.reclaim
    again = machines.plan(node(noticed, tainted=True, condition=True), NOW, running=True, reclaimed=False)
    assert again.notice is None and again.requeue == 30
    # Someone removed the condition (or the taint): written again.
    assert machines.plan(node(noticed, tainted=True), NOW, running=True, reclaimed=False).notice is not None


def test_at_the_deadline_the_machine_is_reclaimed_once() -> None:
    noticed = {machines.NOTICE_ANNOTATION: NOW.strftime("%Y-%m-%dT%H:%M:%SZ")}
    assert machines.plan(node(noticed), NOW, running=True, reclaimed=False).reclaim
    assert machines.plan(node(noticed), NOW, running=False, reclaimed=False).reclaim  # powered off: deleted anyway
    assert machines.plan(node(noticed), NOW, running=False, reclaimed=True) == machines.MachinePlan()


def test_an_unreadable_deadline_is_reported_not_acted_on() -> None:
    decided = machines.plan(node({machines.NOTICE_ANNOTATION: "soon"}), NOW, running=True, reclaimed=False)
    assert decided.problem is not None and "'soon' is not an RFC 3339 time" in decided.problem
    assert not decided.reclaim and decided.notice is None
