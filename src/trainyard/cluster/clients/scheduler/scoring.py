"""Which feasible node a pod goes to: kube-scheduler v1.32's default profile's score plugins, each
normalised to 0..100 as upstream, summed with the profile's weights, the highest sum winning and
ties going to the first node by name (upstream draws one at random; here it is deterministic).

| plugin | weight | score |
| --- | --- | --- |
| ``TaintToleration`` | 3 | fewest untolerated ``PreferNoSchedule`` taints (reversed over the nodes' most) |
| ``NodeAffinity`` | 2 | the weights of the preferred node affinity terms the node matches, over the highest |
| ``PodTopologySpread`` | 2 | ``spread`` (``ScheduleAnyway`` and the system defaults) |
| ``InterPodAffinity`` | 2 | ``interpod`` (preferred terms, both ways) |
| ``NodeResourcesFit`` | 1 | ``LeastAllocated``: CPU and memory left free, requests unset counted at their defaults |
| ``NodeResourcesBalancedAllocation`` | 1 | how evenly CPU and memory would be used (1 - their std-dev) |

``ImageLocality`` (weight 1) has no images to weigh here. A pod that only one node fits is not
scored, as upstream. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.cluster.clients.scheduler import interpod, spread
from trainyard.cluster.clients.scheduler.nodematch import term_matches, tolerates
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.snapshot import NONZERO_DEFAULTS, NodeInfo, PodInfo, Usage
from trainyard.cluster.quantity import CPU, MEMORY

MAX_NODE_SCORE = 100
TAINT_TOLERATION, NODE_AFFINITY, POD_TOPOLOGY_SPREAD, INTER_POD_AFFINITY, FIT, BALANCED = 3, 2, 2, 2, 1, 1


def default_normalize(raw: Sequence[int], *, reverse: bool = False) -> list[int]:
    """``helper.DefaultNormalizeScore``: scaled to the highest (reversed: the highest scores 0)."""
    top = max(raw, default=0)
    if top == 0:
        return [MAX_NODE_SCORE if reverse else s for s in raw]
    out = [MAX_NODE_SCORE * s // top for s in raw]
    return [MAX_NODE_SCORE - s for s in out] if reverse else out


def prefer_no_schedule(pod: PodInfo, node: NodeInfo) -> int:
    """TaintToleration's raw score: the node's PreferNoSchedule taints the pod does not tolerate."""
    tolerations = [t for t in pod.tolerations if (t.get("effect") or "") in ("", "PreferNoSchedule")]
    return sum(
        1
        for taint in node.taints
        if taint.get("effect") == "PreferNoSchedule" and not any(tolerates(t, taint) for t in tolerations)
    )


def preferred_node_affinity(pod: PodInfo, node: NodeInfo) -> int:
    """NodeAffinity's raw score: the weights of the preferred terms ``node`` matches (empty terms never do)."""
    return sum(weight for weight, term in pod.preferred if weight and term_matches(term, node))


def least_allocated(pod: PodInfo, node: NodeInfo, used: Usage) -> int:
    """``LeastAllocated`` over CPU and memory (weight 1 each), as NodeResourcesFit scores by default."""
    total = weights = 0
    have, want = used.nonzero or used.requested, pod.nonzero or pod.requests
    for name in NONZERO_DEFAULTS:
        capacity = node.allocatable.get(name, 0)
        if capacity:
            requested = have.get(name, 0) + want.get(name, 0)
            if requested <= capacity:
                total += (capacity - requested) * MAX_NODE_SCORE // capacity
            weights += 1
    return total // weights if weights else 0


def balanced_allocation(pod: PodInfo, node: NodeInfo, used: Usage) -> int:
    """``NodeResourcesBalancedAllocation``: (1 - the std-dev of the CPU and memory fractions) x 100."""
    fractions = []
    for name in (CPU, MEMORY):
        capacity = node.allocatable.get(name, 0)
        if capacity:
            fraction = (used.requested.get(name, 0) + pod.requests.get(name, 0)) / capacity
            fractions.append(fraction if fraction < 1 else 1.0)
    # Upstream's formula for any number of resources; with CPU and memory it is |f1 - f2| / 2.
    std = abs(fractions[0] - fractions[1]) / 2 if len(fractions) == 2 else 0.0
    return int((1 - std) * MAX_NODE_SCORE)


def totals(
    pod: PodInfo,
    feasible: Sequence[NodeInfo],
    nodes: Sequence[NodeInfo],
    used: Mapping[str, Usage],
    placed: Placed,
) -> list[int]:
    """Every feasible node's weighted sum of the default score plugins' normalised scores."""
    out = [0] * len(feasible)

    def weigh(scores: Sequence[int] | None, weight: int) -> None:
        if scores is not None:
            for i, s in enumerate(scores):
                out[i] += s * weight

    if any(n.taints for n in feasible):  # else every node scores 100: no difference to make
        weigh(default_normalize([prefer_no_schedule(pod, n) for n in feasible], reverse=True), TAINT_TOLERATION)
    if pod.preferred:
        weigh(default_normalize([preferred_node_affinity(pod, n) for n in feasible]), NODE_AFFINITY)
    weigh(spread.scores(pod, feasible, nodes, placed), POD_TOPOLOGY_SPREAD)
    weigh(interpod.scores(pod, feasible, placed), INTER_POD_AFFINITY)
    weigh([least_allocated(pod, n, used[n.name]) for n in feasible], FIT)
    weigh([balanced_allocation(pod, n, used[n.name]) for n in feasible], BALANCED)
    return out


def best(
    pod: PodInfo, feasible: Sequence[NodeInfo], nodes: Sequence[NodeInfo], used: Mapping[str, Usage], placed: Placed
) -> str:
    """The feasible node with the highest total, the first by name among equals."""
    if len(feasible) == 1:
        return feasible[0].name
    scores = totals(pod, feasible, nodes, used, placed)
    return min(zip(scores, (n.name for n in feasible), strict=True), key=lambda s: (-s[0], s[1]))[1]
