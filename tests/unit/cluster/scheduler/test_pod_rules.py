"""The filters that read other pods, in kube-scheduler v1.32's words: InterPodAffinity (affinity,
anti-affinity, existing pods' anti-affinity) and PodTopologySpread; gangs and preemption with them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from podrules import HOST, THREE, ZONE, affinity, decide, gang, node, pod, running, spread, term, where

from trainyard.cluster.clients.scheduler.filters import fit_error, place
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.placement import schedule
from trainyard.cluster.clients.scheduler.snapshot import Usage, usage
from trainyard.cluster.clients.scheduler.terms import Selector, pod_terms, spread_constraints

NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def message(decision: object) -> str:
    (entry,) = decision.unschedulable  # type: ignore[attr-defined]
    return str(entry[1])


# -- InterPodAffinity: required affinity -----------------------------------------------------------


def test_affinity_goes_where_a_matching_pod_is() -> None:
    db = pod("db", {"app": "db"}, on="n2")
    web = pod("web", affinity=affinity(term(app="db")))
    assert where(decide([web], [db])) == {"web": "n2"}


def test_affinity_over_zones_admits_every_node_of_the_zone() -> None:
    nodes = [node("n1", "z1"), node("n2", "z1"), node("n3", "z2")]
    db = pod("db", {"app": "db"}, on="n1", cpu="8")  # n1 full: the zone's other node must do
    web = pod("web", affinity=affinity(term(ZONE, app="db")))
    assert where(decide([web], [db], nodes)) == {"web": "n2"}


def test_affinity_with_no_match_is_not_resolvable_by_preemption() -> None:
    web = pod("web", affinity=affinity(term(app="db")))
    assert message(decide([web], [pod("other", {"app": "x"}, on="n1")])) == (
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. "
        f"preemption: 0/3 nodes are available: 3 {NOT_HELPFUL}.."
    )


def test_the_first_pod_of_a_self_affine_group_is_let_through_then_the_rest_follow() -> None:
    rule = affinity(term(ZONE, app="w"))
    pods = [pod(f"w{i}", {"app": "w"}, affinity=rule, created=f"2026-01-01T00:00:0{i}Z") for i in range(3)]
    placed = where(decide(pods))
    assert len(placed) == 3
    assert len({THREE[int(n[1]) - 1].labels[ZONE] for n in placed.values()}) == 1


def test_the_first_pod_exception_needs_the_pod_to_match_its_own_terms() -> None:
    loner = pod("w", {"app": "other"}, affinity=affinity(term(app="w")))
    assert "3 node(s) didn't match pod affinity rules." in message(decide([loner]))


def test_a_node_without_the_topology_label_fails_affinity() -> None:
    bare = replace(node("n4"), labels={})
    db = pod("db", {"app": "db"}, on="n1")
    web = pod("web", affinity=affinity(term(app="db")))
    target, failures = place(web, [bare], {"n4": Usage()}, Placed([bare, THREE[0]], {"n1": {db.uid: db}}))
    assert target is None
    assert fit_error(web, failures, 1).startswith("0/1 nodes are available: 1 node(s) didn't match pod affinity rules.")


def test_affinity_terms_look_in_the_pods_namespace_unless_told() -> None:
    db = pod("db", {"app": "db"}, on="n2", namespace="data")
    here = pod("a", affinity=affinity(term(app="db")))
    listed = pod("b", affinity=affinity(term(namespaces=["data"], app="db")))
    assert "didn't match pod affinity rules" in message(decide([here], [db]))
    assert where(decide([listed], [db])) == {"b": "n2"}
    everywhere = {**term(app="db"), "namespaceSelector": {}}
    by_name = {**term(app="db"), "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "data"}}}
    for t in (everywhere, by_name):
        assert where(decide([pod("c", affinity=affinity(t))], [db])) == {"c": "n2"}


def test_a_term_without_a_label_selector_matches_no_pod() -> None:
    db = pod("db", {"app": "db"}, on="n2")
    web = pod(
        "web", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": HOST}]}}
    )
    assert "didn't match pod affinity rules" in message(decide([web], [db]))


def test_match_label_keys_are_merged_with_the_pods_own_values() -> None:
    t = {**term(app="w"), "matchLabelKeys": ["job"]}
    terms = pod_terms({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [t]}}, "ns", {"job": "a"})
    (merged,) = terms.anti_affinity
    assert merged.matches("ns", {"app": "w", "job": "a"})
    assert not merged.matches("ns", {"app": "w", "job": "b"})
    other_job = pod("x", {"app": "w", "job": "b"}, on="n1")
    mine = pod(
        "y",
        {"app": "w", "job": "a"},
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [t]}},
    )
    assert where(decide([mine], [other_job], [THREE[0]])) == {"y": "n1"}


# -- InterPodAffinity: anti-affinity ---------------------------------------------------------------


def test_anti_affinity_puts_one_per_node_and_says_why_the_fourth_waits() -> None:
    rule = affinity(term(app="w"), anti=True)
    pods = [pod(f"w{i}", {"app": "w"}, affinity=rule, created=f"2026-01-01T00:00:0{i}Z") for i in range(4)]
    decision = decide(pods)
    assert sorted(where(decision).values()) == ["n1", "n2", "n3"]
    assert message(decision) == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
        f"preemption: 0/3 nodes are available: 3 {NO_VICTIMS}.."
    )


def test_anti_affinity_over_zones_keeps_off_the_whole_zone() -> None:
    nodes = [node("n1", "z1"), node("n2", "z1"), node("n3", "z2")]
    rival = pod("r", {"app": "w"}, on="n1")
    mine = pod("w", affinity=affinity(term(ZONE, app="w"), anti=True))
    assert where(decide([mine], [rival], nodes)) == {"w": "n3"}


def test_existing_pods_anti_affinity_keeps_the_incoming_pod_off() -> None:
    guard = pod("g", {"app": "db"}, on="n1", affinity=affinity(term(app="web"), anti=True))
    web = pod("web", {"app": "web"})
    decision = decide([web], [guard], [THREE[0]])
    assert message(decision) == (
        "0/1 nodes are available: 1 node(s) didn't satisfy existing pods anti-affinity rules. "
        f"preemption: 0/1 nodes are available: 1 {NO_VICTIMS}.."
    )
    assert where(decide([replace(web, labels={"app": "api"})], [guard], [THREE[0]])) == {"web": "n1"}


def test_filter_order_resources_before_pod_rules() -> None:
    full = pod("full", {"app": "x"}, on="n1", cpu="8")
    mine = pod("w", affinity=affinity(term(app="x"), anti=True))
    assert message(decide([mine], [full], [THREE[0]])).startswith("0/1 nodes are available: 1 Insufficient cpu.")


def test_the_histogram_is_sorted_as_kube_scheduler_sorts_it() -> None:
    gpu_taint = {"key": "nvidia.com/gpu", "effect": "NoSchedule"}
    nodes = [node("n1", taints=(gpu_taint,)), node("n2"), node("n3")]
    hungry = pod("p")
    hungry = replace(hungry, requests={"nvidia.com/gpu": 8})
    assert message(decide([hungry], [], nodes)) == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: }, 2 Insufficient nvidia.com/gpu. "
        f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}.."
    )


# -- PodTopologySpread -----------------------------------------------------------------------------


def test_spread_over_zones_fills_the_emptiest_zone_first() -> None:
    bound = [pod("a", {"app": "w"}, on="n1"), pod("b", {"app": "w"}, on="n2")]
    mine = pod("w", {"app": "w"}, topologySpreadConstraints=[spread()])
    assert where(decide([mine], bound)) == {"w": "n3"}


def test_spread_refuses_a_node_over_the_skew_and_says_so() -> None:
    bound = [pod("a", {"app": "w"}, on="n1"), pod("b", {"app": "w"}, on="n2")]
    mine = pod("w", {"app": "w"}, cpu="9", topologySpreadConstraints=[spread()])  # fits no node's CPU
    small = replace(mine, requests={"cpu": 1000})
    nodes = [THREE[0], THREE[1], node("n3", "z3", allocatable={**THREE[2].allocatable, "cpu": 500})]
    assert message(decide([small], bound, nodes)) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod topology spread constraints. "
        f"preemption: 0/3 nodes are available: 3 {NO_VICTIMS}.."
    )


def test_a_node_without_the_topology_key_is_refused_unresolvably() -> None:
    nodes = [*THREE[:2], replace(node("n3"), labels={HOST: "n3"})]
    mine = pod("w", {"app": "w"}, topologySpreadConstraints=[spread(minDomains=3)])  # 2 domains: the minimum is 0
    decision = decide([mine], [pod("a", {"app": "w"}, on="n1"), pod("b", {"app": "w"}, on="n2")], nodes)
    assert message(decision) == (
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), "
        "2 node(s) didn't match pod topology spread constraints. "
        f"preemption: 0/3 nodes are available: 1 {NOT_HELPFUL}, 2 {NO_VICTIMS}.."
    )


def test_min_domains_counts_the_minimum_as_zero_while_domains_are_few() -> None:
    nodes = THREE[:2]
    bound = [pod("a", {"app": "w"}, on="n1"), pod("b", {"app": "w"}, on="n2")]
    mine = pod("w", {"app": "w"}, topologySpreadConstraints=[spread(minDomains=3)])
    assert "2 node(s) didn't match pod topology spread constraints." in message(decide([mine], bound, nodes))
    plain = pod("w", {"app": "w"}, topologySpreadConstraints=[spread()])
    assert len(where(decide([plain], bound, nodes))) == 1


def test_node_affinity_policy_decides_which_nodes_are_domains() -> None:
    bound = [pod("a", {"app": "w"}, on="n1"), pod("b", {"app": "w"}, on="n1")]
    nodes = [node("n1", "z1", labels={"pool": "x"}), node("n2", "z2", labels={"pool": "y"}), node("n3", "z3")]
    # Honor (default): only the pool-x node is a domain; its own pods are the minimum, skew 1.
    honor = pod("w", {"app": "w"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=[spread()])
    assert where(decide([honor], bound, nodes)) == {"w": "n1"}
    ignore = pod(
        "w", {"app": "w"}, nodeSelector={"pool": "x"}, topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")]
    )
    assert "1 node(s) didn't match pod topology spread constraints" in message(decide([ignore], bound, nodes))


def test_node_taints_policy_honor_leaves_tainted_nodes_out() -> None:
    taint = {"key": "spot", "effect": "NoSchedule"}
    nodes = [node("n1", "z1"), node("n2", "z2", taints=(taint,))]
    bound = [pod("a", {"app": "w"}, on="n1")]
    ignore = pod("w", {"app": "w"}, topologySpreadConstraints=[spread()])
    assert "didn't match pod topology spread constraints" in message(decide([ignore], bound, nodes))
    honor = pod("w", {"app": "w"}, topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")])
    assert where(decide([honor], bound, nodes)) == {"w": "n1"}


def test_pods_being_deleted_do_not_count_for_spread() -> None:
    going = [replace(pod(f"g{i}", {"app": "w"}, on="n1"), deleting=True) for i in range(2)]
    mine = pod("w", {"app": "w"}, topologySpreadConstraints=[spread()])
    assert where(decide([mine], going, THREE[:2]))["w"] in ("n1", "n2")
    assert where(decide([mine], [replace(p, deleting=False) for p in going], THREE[:2])) == {"w": "n2"}


def test_spread_parsing_defaults() -> None:
    (c,) = spread_constraints([{"maxSkew": 2, "topologyKey": ZONE, "labelSelector": {}}], "ns", {})
    assert (c.max_skew, c.hard, c.min_domains, c.honor_affinity, c.honor_taints) == (2, True, 1, True, False)
    assert c.selector == Selector()
    (keyed,) = spread_constraints([{**spread(), "matchLabelKeys": ["job"]}], "ns", {"job": "a"})
    assert keyed.selector is not None and not keyed.selector.matches({"app": "w", "job": "b"})


# -- verdicts shared by pods of one template -------------------------------------------------------


def test_a_refusal_is_not_reused_once_a_pod_it_waited_for_is_placed() -> None:
    rule = affinity(term(app="db"))
    early = pod("early", affinity=rule, created="2026-01-01T00:00:00Z")
    db = pod("db", {"app": "db"}, created="2026-01-01T00:00:01Z")
    late = pod("late", affinity=rule, created="2026-01-01T00:00:02Z")
    decision = decide([late, db, early])
    assert [p.name for p, _ in decision.unschedulable] == ["early"]
    assert where(decision)["late"] == where(decision)["db"]


def test_labels_decide_against_existing_anti_affinity_for_one_template() -> None:
    guard = pod("g", on="n1", affinity=affinity(term(role="a"), anti=True))
    a = pod("a", {"role": "a"}, created="2026-01-01T00:00:00Z")
    b = pod("b", {"role": "b"}, created="2026-01-01T00:00:01Z")
    decision = decide([a, b], [guard], [THREE[0]])
    assert where(decision) == {"b": "n1"}


# -- gangs -----------------------------------------------------------------------------------------


def test_a_gang_with_anti_affinity_lands_one_member_per_node() -> None:
    rule = affinity(term(job="j"), anti=True)
    members, groups = gang("j", [pod(f"w{i}", {"job": "j"}, affinity=rule) for i in range(3)])
    decision = decide(members, groups=groups)
    assert sorted(where(decision).values()) == ["n1", "n2", "n3"]
    assert decision.placed_gangs == [("scheduler-plugins", "ns", "j")]


def test_a_gang_that_anti_affinity_cannot_fit_binds_nothing_and_says_why() -> None:
    rule = affinity(term(job="j"), anti=True)
    members, groups = gang("j", [pod(f"w{i}", {"job": "j"}, affinity=rule) for i in range(4)])
    decision = decide(members, groups=groups)
    assert not decision.bindings
    why = decision.gangs[("scheduler-plugins", "ns", "j")]
    assert why == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. PodGroup ns/j gets rejected: "
        "4 more pod(s) must be placed together for minMember 4, only 3 fit."
    )
    assert {m for _, m in decision.unschedulable} == {why}


def test_a_failed_gang_leaves_no_trace_for_the_next_pod() -> None:
    rule = affinity(term(job="j"), anti=True)
    members, groups = gang("j", [pod(f"w{i}", {"job": "j"}, affinity=rule) for i in range(4)])
    follower = pod("f", affinity=affinity(term(job="j")), created="2026-01-02T00:00:00Z")
    decision = decide([*members, follower], groups=groups)
    assert not decision.bindings
    assert "didn't match pod affinity rules" in dict((p.name, m) for p, m in decision.unschedulable)["f"]


def test_spread_inside_a_gang_counts_the_members_placed_before() -> None:
    nodes = [node("n1", "z1"), node("n2", "z1"), node("n3", "z2"), node("n4", "z2")]
    rule = [spread(match={"job": "j"})]
    members, groups = gang("j", [pod(f"w{i}", {"job": "j"}, topologySpreadConstraints=rule) for i in range(4)])
    decision = decide(members, nodes=nodes, groups=groups)
    zones = [nodes[int(n[1]) - 1].labels[ZONE] for n in where(decision).values()]
    assert sorted(zones) == ["z1", "z1", "z2", "z2"]


# -- preemption ------------------------------------------------------------------------------------


def test_preemption_lifts_anti_affinity_by_evicting_the_matching_pod() -> None:
    low = pod("low", {"app": "x"}, on="n1", cpu="1")
    high = pod("high", priority=100, affinity=affinity(term(app="x"), anti=True))
    decision = decide([high], [low], [THREE[0]])
    assert [v.name for found in decision.preemptions for v in found.victims] == ["low"]
    assert message(decision) == "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."


def test_preemption_does_not_evict_for_affinity_it_cannot_satisfy() -> None:
    low = pod("low", {"app": "x"}, on="n1", cpu="1")
    high = pod("high", priority=100, affinity=affinity(term(app="db")))
    decision = decide([high], [low], [THREE[0]])
    assert not decision.preemptions


@pytest.mark.parametrize("sign", [1, -1])
def test_the_index_follows_adds_and_rolls_back(sign: int) -> None:
    a = pod("a", {"app": "w"}, on="n1")
    placed = Placed(THREE, {"n1": {a.uid: a}})
    rule = pod_terms(affinity(term(app="w")), "ns", {}).affinity
    assert placed.count(rule) == {"n1": 1}
    mark = placed.mark()
    if sign > 0:
        placed.add(pod("b", {"app": "w"}), "n2")
        assert placed.count(rule) == {"n1": 1, "n2": 1}
    else:
        placed.add(a, "n1", -1)
        assert placed.count(rule) == {}
    placed.rollback(mark)
    assert placed.count(rule) == {"n1": 1}
    assert sorted(p.name for _, p in placed.pods()) == ["a"]


def test_seed_004s_anti_affinity_by_expression_spreads_a_gang_one_worker_per_node() -> None:
    rule = {
        "labelSelector": {
            "matchExpressions": [{"key": "training-job", "operator": "In", "values": ["advanced-training"]}]
        },
        "topologyKey": HOST,
    }
    spec = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [rule]}}}
    labels = {"training-job": "advanced-training"}
    members, groups = gang("adv", [pod(f"w{i}", labels, **spec) for i in range(3)])
    assert sorted(where(decide(members, groups=groups)).values()) == ["n1", "n2", "n3"]


def test_a_namespace_selector_reads_the_namespaces_labels() -> None:
    db = pod("db", {"app": "db"}, on="n2", namespace="data")
    t = {**term(app="db"), "namespaceSelector": {"matchLabels": {"team": "storage"}}}
    web = pod("web", affinity=affinity(t))
    nodes, bound = THREE, [db]
    labelled = {"data": {"team": "storage"}}
    decision = schedule(nodes, usage(nodes, bound), [web], {}, {}, running(db), labelled)
    assert where(decision) == {"web": "n2"}
    assert "didn't match pod affinity rules" in message(decide([web], bound))
