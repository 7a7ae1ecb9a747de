"""Whether one pod fits one node, and the best node for it: kube-scheduler v1.32's default filters
and scoring, in its words.

* **Filters**, in the default plugin order, the first failing one giving a node's reasons:
  ``NodeUnschedulable`` (``node(s) were unschedulable``), ``TaintToleration`` (NoSchedule and
  NoExecute taints; ``node(s) had untolerated taint {key: value}``), ``NodeAffinity``
  (``nodeSelector`` and required node affinity with In, NotIn, Exists, DoesNotExist, Gt and Lt
  over labels and ``metadata.name``; ``node(s) didn't match Pod's node affinity/selector``),
  ``NodeResourcesFit`` (``Too many pods``, ``Insufficient <resource>``), ``PodTopologySpread``
  (``spread``) and ``InterPodAffinity`` (``interpod``), the last two reading the pods already
  placed (``placed``) through a pre-filter state computed once per pod.
* **Scoring**: ``scoring`` (the default profile's plugins and weights), ties by name.
* **The message** of a pod that fits no node is kube-scheduler's ``FitError``: the reasons'
  histogram sorted as strings, with the ``preemption:`` part the default preemption plugin writes
  when it finds no victims.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainyard.cluster.clients.scheduler import interpod, scoring, spread
from trainyard.cluster.clients.scheduler.nodematch import node_affinity_matches, tolerates, untolerated
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.snapshot import VOLCANO, NodeInfo, PodInfo, Usage
from trainyard.cluster.quantity import PODS

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# Filter reasons, kube-scheduler v1.32's words.
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def insufficient(requests: Mapping[str, int], node: NodeInfo, used: Usage) -> list[str]:
    """``NodeResourcesFit``'s reasons: ``Too many pods``, then each resource that does not fit."""
    out = []
    if used.pods + 1 > node.allocatable.get(PODS, 0):
        out.append(TOO_MANY_PODS)
    for name, value in requests.items():
        if name == PODS or value <= 0:
            continue
        if value > node.allocatable.get(name, 0) - used.requested.get(name, 0):
            out.append(f"Insufficient {name}")
    return out


@dataclass(frozen=True)
class Failure:
    """Why one node does not fit a pod: its reasons, and whether preemption could ever help."""

    reasons: tuple[str, ...]
    resolvable: bool


@dataclass(frozen=True)
class Prefilter:
    """What the filters that read other pods computed once for a pod (None: nothing to check)."""

    spread: list[spread.Hard] | None = None
    affinity: interpod.State | None = None


NOTHING = Prefilter()


def prefilter(pod: PodInfo, nodes: Sequence[NodeInfo], placed: Placed | None) -> Prefilter:
    if placed is None:
        return NOTHING
    hard, affinity = spread.prefilter(pod, nodes, placed), interpod.prefilter(pod, placed)
    return Prefilter(hard, affinity) if hard is not None or affinity is not None else NOTHING


def filter_node(pod: PodInfo, node: NodeInfo, used: Usage, pre: Prefilter = NOTHING) -> Failure | None:
    """None when ``pod`` fits ``node``; else the first failing filter's reasons, in plugin order."""
    if node.unschedulable and not any(
        tolerates(t, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}) for t in pod.tolerations
    ):
        return Failure((NODE_UNSCHEDULABLE,), False)
    taint = untolerated(pod, node)
    if taint is not None:
        return Failure((f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}",), False)
    if not node_affinity_matches(pod, node):
        return Failure((NODE_AFFINITY,), False)
    reasons = insufficient(pod.requests, node, used)
    if reasons:
        return Failure(tuple(reasons), True)
    for found in (
        spread.check(pre.spread, node) if pre.spread is not None else None,
        interpod.check(pre.affinity, node) if pre.affinity is not None else None,
    ):
        if found is not None:
            return Failure((found[0],), found[1])
    return None


def _histogram(reasons: Iterable[str]) -> str:
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(sorted(f"{n} {reason}" for reason, n in counts.items()))


def fit_error(pod: PodInfo, failures: Sequence[Failure], nodes: int) -> str:
    """kube-scheduler's ``FitError`` message, with the default preemption plugin's ``preemption:`` part."""
    if nodes == 0:
        return "no nodes available to schedule pods"
    if pod.scheduler == VOLCANO:
        return f"0/{nodes} nodes are unavailable: {_histogram(r for f in failures for r in f.reasons)}."
    message = f"0/{nodes} nodes are available: {_histogram(r for f in failures for r in f.reasons)}."
    if pod.preemption_policy == "Never":
        return f"{message} preemption: not eligible due to preemptionPolicy=Never.."
    verdicts = _histogram(NO_VICTIMS if f.resolvable else NOT_HELPFUL for f in failures)
    return f"{message} preemption: 0/{nodes} nodes are available: {verdicts}.."


def place(
    pod: PodInfo, nodes: Sequence[NodeInfo], used: Mapping[str, Usage], placed: Placed | None = None
) -> tuple[str | None, list[Failure]]:
    """The node ``pod`` goes to, or None with every node's failure. ``placed``: the pods already on
    the nodes, for the rules that read them (None: no pod is placed anywhere)."""
    if placed is None:
        placed = Placed(nodes)
    everywhere = list(placed.nodes.values())  # spread's domains span every node, however few are tried
    pre = prefilter(pod, everywhere, placed)
    feasible, failures = [], []
    for node in nodes:
        failure = filter_node(pod, node, used[node.name], pre)
        if failure is None:
            feasible.append(node)
        else:
            failures.append(failure)
    if not feasible:
        return None, failures
    return scoring.best(pod, feasible, everywhere, used, placed), failures
