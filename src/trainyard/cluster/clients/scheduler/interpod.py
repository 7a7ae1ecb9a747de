"""kube-scheduler v1.32's ``InterPodAffinity`` plugin: pod affinity and anti-affinity over any
topology key (``kubernetes.io/hostname``, ``topology.kubernetes.io/zone``, ...).

* **PreFilter** (``prefilter``), once per pod: per topology pair, how many placed pods match *all*
  the pod's required affinity terms, how many match each anti-affinity term, and the pairs where
  placed pods carry a required anti-affinity term matching the pod (``placed`` keeps the counts).
* **Filter**, in upstream's order and words: ``node(s) didn't match pod affinity rules`` (the node
  lacks a term's topology label or no matching pod is in its domain; not resolvable by
  preemption), ``node(s) didn't match pod anti-affinity rules`` and ``node(s) didn't satisfy
  existing pods anti-affinity rules`` (resolvable). The first pod of a group that is affine to
  itself is let through when no placed pod matches its terms anywhere and it matches them itself.
* **Score**: the pod's preferred terms (weight per matching placed pod in the domain, anti-affinity
  subtracting), the preferred terms of placed pods that match it, and their required affinity terms
  at ``hardPodAffinityWeight`` 1; summed over the node's labels, normalised to 0..100 between the
  lowest and highest node.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainyard.cluster.clients.scheduler import placed as index
from trainyard.cluster.clients.scheduler.placed import Counts, Placed
from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, PodInfo
from trainyard.cluster.clients.scheduler.terms import Term

AFFINITY_RULES = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
HARD_POD_AFFINITY_WEIGHT = 1
MAX_NODE_SCORE = 100

Pair = tuple[str, str]  # (topology key, value)


@dataclass(frozen=True)
class State:
    """The pre-filter state of one pod."""

    affinity: Mapping[Pair, int]
    anti: Mapping[Pair, int]
    existing: frozenset[Pair]
    self_match: bool
    terms: Sequence[Term]
    anti_terms: Sequence[Term]


def _pairs(terms: Sequence[Term], counts: Counts, nodes: Mapping[str, NodeInfo], out: dict[Pair, int]) -> None:
    for name, n in counts.items():
        node = nodes.get(name)
        if node is None or n <= 0:
            continue
        for term in terms:
            value = node.labels.get(term.topology_key)
            if value is not None:
                pair = (term.topology_key, value)
                out[pair] = out.get(pair, 0) + n


def prefilter(pod: PodInfo, placed: Placed) -> State | None:
    """None when the plugin has nothing to check for ``pod``."""
    existing: set[Pair] = set()
    for (role, _, term), counts in placed.carried_matching(pod):
        if role != index.ANTI:
            continue
        hits: dict[Pair, int] = {}
        _pairs((term,), counts, placed.nodes, hits)
        existing |= set(hits)
    terms, anti_terms = pod.terms.affinity, pod.terms.anti_affinity
    if not terms and not anti_terms and not existing:
        return None
    affinity: dict[Pair, int] = {}
    if terms:
        _pairs(terms, placed.count(terms), placed.nodes, affinity)
    anti: dict[Pair, int] = {}
    for term in anti_terms:
        _pairs((term,), placed.count((term,)), placed.nodes, anti)
    ns_labels = placed.namespaces.get(pod.namespace)
    self_match = bool(terms) and all(t.matches(pod.namespace, pod.labels, ns_labels) for t in terms)
    return State(affinity, anti, frozenset(existing), self_match, terms, anti_terms)


def check(state: State, node: NodeInfo) -> tuple[str, bool] | None:
    """The filter: None when ``node`` passes, else (reason, whether preemption could resolve it)."""
    if state.terms:
        found = True
        for term in state.terms:
            value = node.labels.get(term.topology_key)
            if value is None:
                return AFFINITY_RULES, False
            if state.affinity.get((term.topology_key, value), 0) <= 0:
                found = False
        # The first of a group affine to itself: nothing matches anywhere yet, and it matches itself.
        if not found and not (not state.affinity and state.self_match):
            return AFFINITY_RULES, False
    if state.anti:
        for term in state.anti_terms:
            value = node.labels.get(term.topology_key)
            if value is not None and state.anti.get((term.topology_key, value), 0) > 0:
                return ANTI_AFFINITY_RULES, True
    if state.existing and any(node.labels.get(key) == value for key, value in state.existing):
        return EXISTING_ANTI_AFFINITY, True
    return None


def scores(pod: PodInfo, feasible: Sequence[NodeInfo], placed: Placed) -> list[int] | None:
    """Normalised scores of ``feasible`` (None: the plugin skips the pod, all nodes alike)."""
    topology: dict[str, dict[str, int]] = {}

    def add(term: Term, counts: Counts, weight: int) -> None:
        for name, n in counts.items():
            node = placed.nodes.get(name)
            value = node.labels.get(term.topology_key) if node is not None else None
            if value is not None and n:
                per = topology.setdefault(term.topology_key, {})
                per[value] = per.get(value, 0) + weight * n

    for term in pod.terms.preferred_affinity:
        add(term, placed.count((term,)), term.weight)
    for term in pod.terms.preferred_anti_affinity:
        add(term, placed.count((term,)), -term.weight)
    for (role, _, term), counts in placed.carried_matching(pod):
        if role == index.ANTI:
            continue
        weight = {index.AFFINITY: HARD_POD_AFFINITY_WEIGHT, index.PREFERRED: term.weight}.get(role, -term.weight)
        add(term, counts, weight)
    if not topology:
        return None
    raw = [
        sum(per.get(node.labels[key], 0) for key, per in topology.items() if key in node.labels) for node in feasible
    ]
    low, high = min(raw), max(raw)
    if high == low:
        return [0] * len(raw)
    return [int(MAX_NODE_SCORE * ((s - low) / (high - low))) for s in raw]
