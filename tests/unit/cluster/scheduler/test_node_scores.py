"""The default profile's scores: each plugin's raw score and normalisation as kube-scheduler v1.32
computes them, their weights, and deterministic ties."""

from __future__ import annotations

from dataclasses import replace

import pytest
from podrules import THREE, affinity, decide, node, pod, spread, term, where

from trainyard.cluster.clients.scheduler import interpod, scoring
from trainyard.cluster.clients.scheduler import spread as spreading
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, Usage, nonzero_requests
from trainyard.cluster.clients.scheduler.terms import Selector, ServiceSelectors, default_selector


@pytest.mark.parametrize(
    ("raw", "reverse", "expected"),
    [
        ([0, 0], False, [0, 0]),
        ([0, 0], True, [100, 100]),
        ([1, 3], False, [33, 100]),
        ([1, 3], True, [67, 0]),
    ],
)
def test_default_normalize(raw: list[int], reverse: bool, expected: list[int]) -> None:
    assert scoring.default_normalize(raw, reverse=reverse) == expected


def test_least_allocated_counts_unset_requests_at_their_defaults() -> None:
    assert nonzero_requests({"containers": [{"name": "c"}]}) == {"cpu": 100, "memory": 200 * 2**20}
    n = NodeInfo("n", {"cpu": 4000, "memory": 2**30, "pods": 110})
    p = replace(pod("p"), nonzero={"cpu": 1000, "memory": 2**28})
    # cpu (4000 - 2000) * 100 / 4000 = 50; memory (2^30 - 2^29) * 100 / 2^30 = 50
    assert scoring.least_allocated(p, n, Usage({}, 1, {"cpu": 1000, "memory": 2**28})) == 50
    assert scoring.least_allocated(p, n, Usage({}, 1, {"cpu": 4000, "memory": 0})) == 37  # cpu over: 0; memory 75


def test_balanced_allocation_is_one_minus_the_spread_of_fractions() -> None:
    n = NodeInfo("n", {"cpu": 4000, "memory": 10000, "pods": 110})
    p = replace(pod("p"), requests={"cpu": 1000, "memory": 5000})
    # cpu 2000/4000 = 0.5, memory 5000/10000 = 0.5 -> 100
    assert scoring.balanced_allocation(p, n, Usage({"cpu": 1000}, 1)) == 100
    # cpu 0.25, memory 0.75 -> (1 - 0.25) * 100
    assert scoring.balanced_allocation(p, n, Usage({"memory": 2500}, 1)) == 75


def test_prefer_no_schedule_taints_weigh_three_times() -> None:
    soft = {"key": "spot", "effect": "PreferNoSchedule"}
    nodes = [node("n1", taints=(soft,)), node("n2")]
    assert where(decide([pod("p")], [], nodes)) == {"p": "n2"}
    assert scoring.prefer_no_schedule(pod("p"), nodes[0]) == 1
    tolerant = pod("p", tolerations=[{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}])
    assert scoring.prefer_no_schedule(tolerant, nodes[0]) == 0
    no_schedule_only = pod("p", tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}])
    assert scoring.prefer_no_schedule(no_schedule_only, nodes[0]) == 1


def test_preferred_node_affinity_by_weight() -> None:
    nodes = [node("n1", labels={"disk": "hdd"}), node("n2", labels={"disk": "ssd"})]
    prefs = [
        {"weight": 5, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["ssd"]}]}},
        {"weight": 1, "preference": {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]}},
        {"weight": 9, "preference": {}},  # an empty term matches nothing
    ]
    p = pod("p", affinity={"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": prefs}})
    assert [scoring.preferred_node_affinity(p, n) for n in nodes] == [1, 5]
    assert where(decide([p], [], nodes)) == {"p": "n2"}


def test_preferred_pod_affinity_and_anti_affinity() -> None:
    cache = pod("cache", {"app": "cache"}, on="n3", cpu="2")
    near = pod("near", affinity=affinity(term(app="cache"), preferred=True))
    far = pod("far", affinity=affinity(term(app="cache"), anti=True, preferred=True))
    assert where(decide([near], [cache])) == {"near": "n3"}
    assert where(decide([far], [cache]))["far"] != "n3"


def test_interpod_scores_are_normalised_between_lowest_and_highest() -> None:
    bound = [pod("a", {"app": "c"}, on="n1"), pod("b", {"app": "c"}, on="n1"), pod("c", {"app": "c"}, on="n2")]
    placed = Placed(THREE, {"n1": {p.uid: p for p in bound[:2]}, "n2": {bound[2].uid: bound[2]}})
    near = pod("near", affinity=affinity(term(app="c"), preferred=True))
    assert interpod.scores(near, THREE, placed) == [100, 50, 0]
    assert interpod.scores(pod("plain"), THREE, placed) is None


def test_existing_pods_required_affinity_draws_the_pods_it_wants() -> None:
    # hardPodAffinityWeight: a placed pod whose required affinity matches the incoming pod pulls it.
    fan = pod("fan", {"app": "fan"}, on="n2", affinity=affinity(term(app="star")))
    star = pod("star", {"app": "star"}, cpu="1")
    assert where(decide([star], [fan])) == {"star": "n2"}


def test_schedule_anyway_prefers_the_emptier_zone() -> None:
    bound = [pod("a", {"app": "w"}, on="n1", cpu="0"), pod("b", {"app": "w"}, on="n1", cpu="0")]
    soft = pod("w", {"app": "w"}, topologySpreadConstraints=[spread(hard=False)])
    scores = spreading.scores(soft, THREE, THREE, Placed(THREE, {"n1": {p.uid: p for p in bound}}))
    # raw: n1 2 x log(3 + 2) = 3.2 -> 3, others 0: reversed into 0..100 against the highest.
    assert scores == [0, 100, 100]
    assert where(decide([soft], bound))["w"] in ("n2", "n3")


def test_spread_scores_follow_upstream_formula_with_skew() -> None:
    nodes = [node("n1", "z1"), node("n2", "z2")]
    bound = [pod("a", {"app": "w"}, on="n1")]
    soft = pod("w", {"app": "w"}, topologySpreadConstraints=[spread(skew=3, hard=False)])
    # n1: 1 x log(4) + 2 = 3.39 -> 3; n2: 0 + 2 = 2; normalised 100 x (3 + 2 - s) / 3
    assert spreading.scores(soft, nodes, nodes, Placed(nodes, {"n1": {bound[0].uid: bound[0]}})) == [66, 100]


def test_nodes_without_the_key_score_zero_for_spread() -> None:
    nodes = [node("n1", "z1"), replace(node("n2"), labels={})]
    soft = pod("w", {"app": "w"}, topologySpreadConstraints=[spread(hard=False)])
    assert spreading.scores(soft, nodes, nodes, Placed(nodes)) == [100, 0]


def test_system_default_constraints_apply_to_pods_a_service_selects() -> None:
    bound = [pod(f"a{i}", {"app": "w"}, on="n1", cpu="0") for i in range(3)]
    chosen = replace(pod("w", {"app": "w"}, cpu="0"), default_selector=Selector((("app", "In", frozenset({"w"})),)))
    scores = spreading.scores(chosen, THREE, THREE, Placed(THREE, {"n1": {p.uid: p for p in bound}}))
    assert scores is not None and scores[0] < scores[1] == scores[2]
    assert spreading.scores(pod("w", {"app": "w"}), THREE, THREE, Placed(THREE)) is None


def test_ties_go_to_the_first_node_by_name() -> None:
    nodes = [node("n3"), node("n1"), node("n2")]
    assert where(decide([pod("p")], [], nodes)) == {"p": "n1"}


def test_weights_taints_outweigh_resources() -> None:
    soft = {"key": "k", "effect": "PreferNoSchedule"}
    nodes = [node("n1", "z1", taints=(soft,)), node("n2", "z2")]
    busy = [pod(f"b{i}", on="n2", cpu="3") for i in range(2)]  # n2 much fuller
    assert where(decide([pod("p")], busy, nodes)) == {"p": "n2"}
    placed = Placed(nodes, {"n2": {b.uid: b for b in busy}})
    used = {"n1": Usage(), "n2": Usage({"cpu": 6000}, 2, {"cpu": 6000, "memory": 400 * 2**20})}
    totals = scoring.totals(pod("p"), nodes, nodes, used, placed)
    assert totals[1] > totals[0]


def test_the_default_selector_merges_the_services_selecting_the_pod() -> None:
    services = [{"app": "w"}, {"app": "w", "role": "worker"}, {"app": "other"}, {}]
    chosen = default_selector(services, {"app": "w", "role": "worker", "index": "0"})
    assert chosen == Selector((("app", "In", frozenset({"w"})), ("role", "In", frozenset({"worker"}))))
    assert default_selector(services, {"app": "x"}) is None


def test_service_selectors_find_the_services_selecting_a_pod() -> None:
    services = ServiceSelectors()
    services.put("ns", "job", {"job": "j"})
    services.put("ns", "replica", {"job": "j", "index": "0"})
    services.put("other", "job", {"job": "j"})
    services.put("ns", "none", {})
    want = Selector((("index", "In", frozenset({"0"})), ("job", "In", frozenset({"j"}))))
    assert services.selector_for("ns", {"job": "j", "index": "0"}) == want
    services.put("ns", "replica", None)
    assert services.selector_for("ns", {"job": "j", "index": "0"}) == Selector((("job", "In", frozenset({"j"})),))
    assert services.selector_for("ns", {"job": "k"}) is None
