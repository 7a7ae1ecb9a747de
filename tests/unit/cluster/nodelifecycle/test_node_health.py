"""The node lifecycle controller's decisions, on an injected clock: when a silent node goes Unknown,
which taints follow, when evictions are held back, and which pods are marked not Ready."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trainyard.api.meta import Obj, format_time
from trainyard.cluster.clients.nodelifecycle import health

T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def node(name: str = "n1", ready: str | None = "True", heartbeat: float = 0, **spec: object) -> Obj:
    conditions = []
    if ready is not None:
        conditions.append(
            {
                "type": "Ready",
                "status": ready,
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": format_time(at(heartbeat)),
                "lastTransitionTime": format_time(T0),
            }
        )
    return {
        "metadata": {"name": name, "creationTimestamp": format_time(T0), "labels": {}},
        "spec": dict(spec),
        "status": {"conditions": conditions},
    }


def lease(renewed: float) -> Obj:
    return {"spec": {"holderIdentity": "n1", "leaseDurationSeconds": 40, "renewTime": at(renewed).isoformat()}}


def test_a_lease_renewal_or_a_heartbeat_moves_the_probe_and_nothing_else_does() -> None:
    first = health.observe(None, node(), lease(0), at(0))
    assert first.seen == at(0)
    assert health.observe(first, node(), lease(0), at(30)) is first
    assert health.observe(first, node(), lease(10), at(11)).seen == at(11)
    assert health.observe(first, node(heartbeat=10), lease(0), at(12)).seen == at(12)


def test_a_node_heard_within_the_grace_period_stays_and_the_pass_wakes_at_its_deadline() -> None:
    probe = health.observe(None, node(), lease(0), at(0))
    verdict = health.assess(node(), probe, at(10), grace=15)
    assert (verdict.ready, verdict.conditions, verdict.taints, verdict.went_silent) == ("True", None, None, False)
    assert verdict.wake_in == 5


def test_a_silent_node_goes_unknown_in_kube_words_and_gets_the_unreachable_taints() -> None:
    probe = health.observe(None, node(), lease(0), at(0))
    verdict = health.assess(node(), probe, at(15), grace=15)
    assert verdict.ready == "Unknown" and verdict.went_silent and verdict.wake_in is None
    assert verdict.conditions is not None
    ready = next(c for c in verdict.conditions if c["type"] == "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "Unknown",
        "NodeStatusUnknown",
        "Kubelet stopped posting node status.",
    )
    assert ready["lastHeartbeatTime"] == format_time(at(0))  # the last heartbeat heard, kept
    assert ready["lastTransitionTime"] == format_time(at(15))
    never = next(c for c in verdict.conditions if c["type"] == "MemoryPressure")
    assert (never["reason"], never["message"]) == ("NodeStatusNeverUpdated", "Kubelet never posted node status.")
    assert verdict.taints == [
        {"key": health.UNREACHABLE, "effect": "NoExecute", "timeAdded": format_time(at(15))},
        {"key": health.UNREACHABLE, "effect": "NoSchedule", "timeAdded": format_time(at(15))},
    ]


def test_a_node_already_unknown_is_not_rewritten_nor_told_again() -> None:
    unknown = node(ready="Unknown")
    unknown["status"]["conditions"] += [
        {"type": t, "status": "Unknown"} for t in ("MemoryPressure", "DiskPressure", "PIDPressure")
    ]
    unknown["spec"]["taints"] = [
        {"key": health.UNREACHABLE, "effect": "NoExecute", "timeAdded": "x"},
        {"key": health.UNREACHABLE, "effect": "NoSchedule", "timeAdded": "x"},
    ]
    probe = health.observe(None, unknown, None, at(0))
    verdict = health.assess(unknown, probe, at(100), grace=15)
    assert (verdict.conditions, verdict.taints, verdict.went_silent) == (None, None, False)


def test_a_node_that_never_posted_ready_gets_the_startup_grace_period() -> None:
    fresh = node(ready=None)
    probe = health.observe(None, fresh, None, at(0))
    registering = health.assess(fresh, probe, at(30), grace=15, startup_grace=60)
    assert (registering.conditions, registering.taints) == (None, None)  # no taint before its first status
    late = health.assess(fresh, probe, at(60), grace=15, startup_grace=60)
    assert late.conditions is not None and not late.went_silent
    assert {c["reason"] for c in late.conditions} == {"NodeStatusNeverUpdated"}


def test_ready_again_removes_the_controller_taints_but_keeps_the_users() -> None:
    back = node()
    user = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    back["spec"]["taints"] = [user, {"key": health.UNREACHABLE, "effect": "NoExecute", "timeAdded": "x"}]
    probe = health.observe(None, back, None, at(0))
    assert health.assess(back, probe, at(1), grace=15).taints == [user]


def test_not_ready_pressure_and_cordon_give_their_taints() -> None:
    sick = node(ready="False", unschedulable=True)
    sick["status"]["conditions"].append({"type": "DiskPressure", "status": "True"})
    taints = health.wanted_taints(sick, sick, at(0))
    assert taints is not None
    assert sorted((t["key"], t["effect"]) for t in taints) == [
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        (health.NOT_READY, "NoExecute"),
        (health.NOT_READY, "NoSchedule"),
        (health.UNSCHEDULABLE, "NoSchedule"),
    ]


def test_no_noexecute_taint_while_evictions_are_held_back() -> None:
    probe = health.observe(None, node(), None, at(0))
    verdict = health.assess(node(), probe, at(20), grace=15, evict=False)
    assert [(t["key"], t["effect"]) for t in verdict.taints or []] == [(health.UNREACHABLE, "NoSchedule")]


def test_evictions_stop_when_every_node_is_down_and_in_a_zone_in_partial_disruption() -> None:
    def zoned(name: str, zone: str) -> Obj:
        n = node(name)
        n["metadata"]["labels"] = {health.ZONE_LABEL: zone}
        return n

    nodes = [zoned(f"a{i}", "a") for i in range(4)] + [zoned("b0", "b")]
    key_a, key_b = health.zone_of(nodes[0]), health.zone_of(nodes[4])
    one_down = {"a0": "Unknown"}
    assert health.evictions(nodes, one_down) == {key_a: True, key_b: True}
    three_of_four = {"a0": "Unknown", "a1": "Unknown", "a2": "False"}
    assert health.evictions(nodes, three_of_four) == {key_a: False, key_b: True}
    every = {n["metadata"]["name"]: "Unknown" for n in nodes}
    assert health.evictions(nodes, every) == {key_a: False, key_b: False}
    # a whole zone down while another is up is full disruption of that zone: evicted at the normal rate
    zone_down = {f"a{i}": "Unknown" for i in range(4)}
    assert health.evictions(nodes, zone_down) == {key_a: True, key_b: True}


def test_pods_of_a_node_not_ready_lose_ready() -> None:
    pod = {"status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]}}
    assert health.pod_not_ready(pod, "now") == [
        {"type": "Ready", "status": "False", "lastTransitionTime": "now"},
        {"type": "PodScheduled", "status": "True"},
    ]
    assert health.pod_not_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "now") is None
