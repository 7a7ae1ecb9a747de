"""The pure victim choice: DefaultPreemption's rules and order, gangs whole or not at all, messages."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainyard.cluster.clients.scheduler import preemption
from trainyard.cluster.clients.scheduler.placement import Group, schedule
from trainyard.cluster.clients.scheduler.snapshot import COSCHEDULING, NodeInfo, PodInfo, Usage, usage

A = NodeInfo("a", {"cpu": 2000, "memory": 2**30, "pods": 110})
B = NodeInfo("b", {"cpu": 2000, "memory": 2**30, "pods": 110})


def pod(name: str, cpu: int = 1000, priority: int = 0, node: str = "", **kw: Any) -> PodInfo:
    phase = "Running" if node else "Pending"
    return PodInfo(
        uid=f"uid-{name}",
        namespace="ns",
        name=name,
        requests={"cpu": cpu},
        priority=priority,
        node_name=node,
        phase=phase,
        **kw,
    )


def gang(name: str, *pods: PodInfo) -> list[PodInfo]:
    return [replace(p, group=(COSCHEDULING, "ns", name)) for p in pods]


def running(*pods: PodInfo) -> dict[str, dict[str, PodInfo]]:
    out: dict[str, dict[str, PodInfo]] = {}
    for p in pods:
        out.setdefault(p.node_name, {})[p.uid] = p
    return out


def choose(preemptors: list[PodInfo], bound: list[PodInfo], nodes: list[NodeInfo], need: int = 1) -> set[str] | None:
    found = preemption.preempt(preemptors, need, nodes, usage(nodes, bound), running(*bound))
    return None if found is None else {v.name for v in found.victims}


def test_only_lower_priority_pods_are_victims() -> None:
    high = pod("high", cpu=2000, priority=100)
    assert choose([high], [pod("low", priority=1, node="a"), pod("low2", priority=1, node="a")], [A]) == {
        "low",
        "low2",
    }
    assert choose([high], [pod("equal", priority=100, node="a"), pod("low", priority=1, node="a")], [A]) is None
    assert choose([high], [pod("above", priority=200, node="a"), pod("low", priority=1, node="a")], [A]) is None


def test_preemption_policy_never_preempts_nothing() -> None:
    never = pod("never", cpu=2000, priority=100, preemption_policy="Never")
    assert choose([never], [pod("low", cpu=2000, node="a")], [A]) is None
    assert preemption.not_eligible([never], {}) == "not eligible due to preemptionPolicy=Never."


def test_victims_not_needed_are_reprieved_most_important_first() -> None:
    high = pod("high", cpu=1000, priority=100)
    bound = [pod("p1", priority=1, node="a"), pod("p5", priority=5, node="a")]
    assert choose([high], bound, [A]) == {"p1"}


def test_a_gang_is_preempted_whole_on_every_node_or_not_at_all() -> None:
    high = pod("high", cpu=1000, priority=100)
    low = gang("low", pod("low-0", priority=1, node="a"), pod("low-1", priority=1, node="b"))
    busy = [*low, pod("b-other", priority=150, node="b"), pod("a-other", priority=50, node="a")]
    # Room for one pod on a: the gang (priority 1) goes whole, its member on b too, not a-other (50).
    assert choose([high], busy, [A, B]) == {"low-0", "low-1"}
    # A gang with one member of higher priority cannot be a victim at all.
    mixed = [low[0], replace(low[1], priority=200), busy[2], replace(busy[3], priority=150)]
    assert choose([high], mixed, [A, B]) is None


def test_node_order_lowest_highest_victim_priority_then_sum_then_count_then_latest_start() -> None:
    high = pod("high", cpu=2000, priority=100)
    # lowest highest-victim priority: b
    assert choose([high], [pod("a5", 2000, 5, "a"), pod("b1", 2000, 1, "b")], [A, B]) == {"b1"}
    # same highest, smaller sum: b (one victim of 1 vs 1 + 1)
    two = [pod("a1", 1000, 1, "a"), pod("a1x", 1000, 1, "a"), pod("b1", 2000, 1, "b")]
    assert choose([high], two, [A, B]) == {"b1"}
    # same highest and sum (a gang counts once): fewest victim pods, b
    g = gang("g", pod("g0", 1000, 1, "a"), pod("g1", 1000, 1, "a"))
    assert choose([high], [*g, pod("b1", 2000, 1, "b")], [A, B]) == {"b1"}
    # all equal: the latest start
    early = pod("early", 2000, 1, "a", started="2026-01-01T00:00:00Z")
    late = pod("late", 2000, 1, "b", started="2026-01-01T00:05:00Z")
    assert choose([high], [early, late], [A, B]) == {"late"}
    assert choose([high], [replace(early, started="2026-01-01T00:09:00Z"), late], [A, B]) == {"early"}


def test_nodes_preemption_cannot_help_are_skipped() -> None:
    high = pod("high", cpu=2000, priority=100)
    cordoned = replace(A, unschedulable=True)
    assert choose([high], [pod("low", 2000, 1, "a")], [cordoned]) is None


def test_a_gang_preemptor_gets_room_for_all_its_members_or_evicts_nothing() -> None:
    members = gang("high", pod("h0", 2000, 100), pod("h1", 2000, 100))
    low = [pod("la", 2000, 1, "a"), pod("lb", 2000, 1, "b")]
    found = preemption.preempt(members, 2, [A, B], usage([A, B], low), running(*low))
    assert found is not None
    assert {v.name for v in found.victims} == {"la", "lb"}
    assert sorted((p.name, n) for p, n in found.preemptors) == [("h0", "a"), ("h1", "b")]
    # One of the two nodes holds a pod of equal priority: both members cannot fit, nothing is evicted.
    held = [pod("la", 2000, 1, "a"), pod("lb", 2000, 100, "b")]
    assert preemption.preempt(members, 2, [A, B], usage([A, B], held), running(*held)) is None


def test_terminating_victims_are_not_chosen_again_and_block_a_nominated_preemptor() -> None:
    high = replace(pod("high", cpu=2000, priority=100), nominated="a")
    going = pod("going", 2000, 1, "a", deleting=True, preempted=True)
    assert preemption.not_eligible([high], running(going)) == (
        "not eligible due to a terminating pod on the nominated node."
    )
    assert choose([replace(high, nominated="")], [going], [A]) is None


def decide(pending: list[PodInfo], bound: list[PodInfo], groups: dict[Any, Group] | None = None) -> Any:
    return schedule([A], usage([A], bound), pending, groups or {}, {}, running(*bound))


def test_schedule_lists_victims_and_words_the_message_as_upstream() -> None:
    low = gang("low", pod("low-0", 1000, 1, "a"), pod("low-1", 1000, 1, "a"))
    groups = {(COSCHEDULING, "ns", "low"): Group((COSCHEDULING, "ns", "low"), 2, members=tuple(low))}
    decision = decide([pod("high", 1000, 100)], low, groups)
    assert decision.bindings == []
    [found] = decision.preemptions
    assert {v.name for v in found.victims} == {"low-0", "low-1"}  # never one replica alone
    assert [(p.name, n) for p, n in found.preemptors] == [("high", "a")]
    # victims found: no preemption part
    assert decision.unschedulable[0][1] == "0/1 nodes are available: 1 Insufficient cpu."

    none = decide([pod("high", 1000, 100)], [pod("top", 2000, 200, "a")])
    assert none.preemptions == []
    assert none.unschedulable[0][1] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.."
    )
    going = pod("going", 2000, 1, "a", deleting=True, preempted=True)
    blocked = decide([replace(pod("high", 1000, 100), nominated="a")], [going])
    assert blocked.unschedulable[0][1] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to a terminating pod "
        "on the nominated node.."
    )


def test_victims_go_to_one_preemptor_per_pass() -> None:
    bound = [pod("low", 2000, 1, "a")]
    decision = decide([pod("first", 2000, 100, created="1"), pod("second", 2000, 90, created="2")], bound)
    assert [[v.name for v in f.victims] for f in decision.preemptions] == [["low"]]
    assert [p.name for f in decision.preemptions for p, _ in f.preemptors] == ["first"]


def test_a_pending_gang_preempts_a_lower_gang_past_its_min_resources() -> None:
    low = gang("low", pod("low-0", 1000, 1, "a"), pod("low-1", 1000, 1, "a"))
    high = gang("high", pod("high-0", 1000, 100), pod("high-1", 1000, 100))
    groups = {
        (COSCHEDULING, "ns", "low"): Group((COSCHEDULING, "ns", "low"), 2, members=tuple(low)),
        (COSCHEDULING, "ns", "high"): Group(
            (COSCHEDULING, "ns", "high"), 2, min_resources={"cpu": 2000}, members=tuple(high)
        ),
    }
    decision = decide(high, low, groups)
    [found] = decision.preemptions
    assert {v.name for v in found.victims} == {"low-0", "low-1"}
    assert sorted(p.name for p, _ in found.preemptors) == ["high-0", "high-1"]
    assert decision.bindings == []
    # Without ``running`` the scheduler evicts nothing, as before.
    assert schedule([A], usage([A], low), high, groups, {}).preemptions == []
    assert Usage().pods == 0
