"""kube-scheduler v1.32's ``PodTopologySpread`` plugin: ``topologySpreadConstraints``.

* **Filter** (``DoNotSchedule`` constraints): the domains of a constraint are the values of its
  topology key on the nodes that have every hard constraint's key and pass its node inclusion
  policies (``nodeAffinityPolicy`` Honor: the pod's nodeSelector and required node affinity;
  ``nodeTaintsPolicy`` Honor: its tolerations); each domain counts the placed pods, not being
  deleted, that the constraint's selector matches in the pod's namespace. A node passes when
  ``pods in its domain + (1 if the pod matches itself) - the fewest in any domain <= maxSkew``,
  the fewest being 0 while there are fewer domains than ``minDomains``. Words: ``node(s) didn't
  match pod topology spread constraints`` (resolvable by preemption), ``... (missing required
  label)`` when the node lacks a topology key (not resolvable).
* **Score** (``ScheduleAnyway`` constraints, or the system defaults for a pod with none that a
  Service or workload controller selects): per node ``sum(count x log(domains + 2) + maxSkew - 1)``
  (the hostname key counting the node's own pods), rounded, then reversed into 0..100 as upstream
  normalises it (fewest matching pods best); nodes lacking a key score 0.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from trainyard.cluster.clients.scheduler.nodematch import node_affinity_matches, untolerated
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, PodInfo
from trainyard.cluster.clients.scheduler.terms import HOSTNAME, Spread, system_defaults

CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = f"{CONSTRAINTS_NOT_MATCH} (missing required label)"
MAX_NODE_SCORE = 100


def _included(c: Spread, pod: PodInfo, node: NodeInfo) -> bool:
    """``matchNodeInclusionPolicies``."""
    if c.honor_affinity and not node_affinity_matches(pod, node):
        return False
    return not (c.honor_taints and untolerated(pod, node) is not None)


def _has_keys(node: NodeInfo, constraints: Sequence[Spread]) -> bool:
    return all(c.topology_key in node.labels for c in constraints)


@dataclass(frozen=True)
class Hard:
    """One DoNotSchedule constraint's pre-filter state."""

    constraint: Spread
    domains: dict[str, int]
    fewest: int
    self_match: int


def prefilter(pod: PodInfo, nodes: Sequence[NodeInfo], placed: Placed) -> list[Hard] | None:
    hard = [c for c in pod.spread if c.hard]
    if not hard:
        return None
    out = []
    for c in hard:
        counts = placed.count((c.term,), live=True)
        domains: dict[str, int] = {}
        for node in nodes:
            if not _has_keys(node, hard) or not _included(c, pod, node):
                continue
            value = node.labels[c.topology_key]
            domains[value] = domains.get(value, 0) + counts.get(node.name, 0)
        fewest = 0 if len(domains) < c.min_domains else min(domains.values())
        matches = c.selector is not None and c.selector.matches(pod.labels)
        out.append(Hard(c, domains, fewest, 1 if matches else 0))
    return out


def check(state: Sequence[Hard], node: NodeInfo) -> tuple[str, bool] | None:
    """The filter: None when ``node`` passes, else (reason, whether preemption could resolve it)."""
    for h in state:
        value = node.labels.get(h.constraint.topology_key)
        if value is None:
            return MISSING_LABEL, False
        if h.domains.get(value, 0) + h.self_match - h.fewest > h.constraint.max_skew:
            return CONSTRAINTS_NOT_MATCH, True
    return None


def _soft(pod: PodInfo) -> tuple[tuple[Spread, ...], bool]:
    """The constraints to score by, and whether every topology key must be on a node."""
    if pod.spread:
        return tuple(c for c in pod.spread if not c.hard), True
    if pod.default_selector is not None:
        return system_defaults(pod.default_selector, pod.namespace), False
    return (), False


def scores(pod: PodInfo, feasible: Sequence[NodeInfo], nodes: Sequence[NodeInfo], placed: Placed) -> list[int] | None:
    """Normalised scores of ``feasible`` (None: the plugin skips the pod, all nodes alike)."""
    constraints, require_all = _soft(pod)
    if not constraints:
        return None
    ignored = {n.name for n in feasible if require_all and not _has_keys(n, constraints)}
    counted = [n for n in feasible if n.name not in ignored]
    per_node = [placed.count((c.term,), live=True) for c in constraints]
    weights: list[float] = []
    totals: list[dict[str, int]] = []
    for i, c in enumerate(constraints):
        if c.topology_key == HOSTNAME:
            weights.append(math.log(len(counted) + 2))
            totals.append({})
            continue
        values = {n.labels.get(c.topology_key, "") for n in counted}
        weights.append(math.log(len(values) + 2))
        total = dict.fromkeys(values, 0)
        for node in nodes:
            if require_all and not _has_keys(node, constraints):
                continue
            key = node.labels.get(c.topology_key, "")
            if key in total and _included(c, pod, node):
                total[key] += per_node[i].get(node.name, 0)
        totals.append(total)
    raw: list[int | None] = []
    for node in feasible:
        if node.name in ignored:
            raw.append(None)
            continue
        score = 0.0
        for i, c in enumerate(constraints):
            found = node.labels.get(c.topology_key)
            if found is None:
                continue
            value = found
            count = per_node[i].get(node.name, 0) if c.topology_key == HOSTNAME else totals[i].get(value, 0)
            score += count * weights[i] + (c.max_skew - 1)
        raw.append(math.floor(score + 0.5))  # Go's math.Round for non-negative scores
    valid = [s for s in raw if s is not None]
    low, high = (min(valid), max(valid)) if valid else (0, 0)
    out = []
    for s in raw:
        if s is None:
            out.append(0)
        elif high == 0:
            out.append(MAX_NODE_SCORE)
        else:
            out.append(MAX_NODE_SCORE * (high + low - s) // high)
    return out
