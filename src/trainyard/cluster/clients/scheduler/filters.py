"""Whether one pod fits one node, and the best node for it: kube-scheduler v1.32's default filters
and scoring, in its words.

* **Filters**, in the default plugin order, the first failing one giving a node's reasons:
  ``NodeUnschedulable`` (``node(s) were unschedulable``), ``TaintToleration`` (NoSchedule and
  NoExecute taints; ``node(s) had untolerated taint {key: value}``), ``NodeAffinity``
  (``nodeSelector`` and required node affinity with In, NotIn, Exists, DoesNotExist, Gt and Lt
  over labels and ``metadata.name``; ``node(s) didn't match Pod's node affinity/selector``) and
  ``NodeResourcesFit`` (``Too many pods``, ``Insufficient <resource>``).
* **Scoring**: the least allocated feasible node (CPU and memory), then by name.
* **The message** of a pod that fits no node is kube-scheduler's ``FitError``, with the
  ``preemption:`` part the default preemption plugin writes when it finds no victims.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainyard.api.meta import Obj
from trainyard.cluster.clients.scheduler.snapshot import VOLCANO, NodeInfo, PodInfo, Usage
from trainyard.cluster.quantity import CPU, MEMORY, PODS

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# Filter reasons, kube-scheduler v1.32's words.
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


def tolerates(toleration: Obj, taint: Obj) -> bool:
    """``Toleration.ToleratesTaint``: empty effect matches every effect, ``Exists`` every value."""
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    if key and key != taint.get("key"):
        return False
    if operator == "Exists":
        return True
    if not key:
        return False  # an empty key with Equal is invalid; it tolerates nothing
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def untolerated(pod: PodInfo, node: NodeInfo) -> Obj | None:
    """The first NoSchedule/NoExecute taint of ``node`` that ``pod`` does not tolerate."""
    for taint in node.taints:
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint) for t in pod.tolerations):
            return taint
    return None


def _requirement(req: Obj, value: str | None) -> bool:
    operator = req.get("operator")
    values = [str(v) for v in req.get("values") or []]
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and len(values) == 1:
        try:
            have, bound = int(value), int(values[0])
        except ValueError:
            return False
        return have > bound if operator == "Gt" else have < bound
    return False


def _term_matches(term: Obj, node: NodeInfo) -> bool:
    expressions = [e for e in term.get("matchExpressions") or [] if isinstance(e, dict)]
    fields = [e for e in term.get("matchFields") or [] if isinstance(e, dict)]
    if not expressions and not fields:
        return False  # an empty term matches no node
    for req in expressions:
        if not _requirement(req, node.labels.get(str(req.get("key")))):
            return False
    for req in fields:
        value = node.name if req.get("key") == "metadata.name" else None
        if not _requirement(req, value):
            return False
    return True


def node_affinity_matches(pod: PodInfo, node: NodeInfo) -> bool:
    if any(node.labels.get(k) != v for k, v in pod.node_selector):
        return False
    if pod.affinity is None:
        return True
    return any(_term_matches(term, node) for term in pod.affinity)


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


def filter_node(pod: PodInfo, node: NodeInfo, used: Usage) -> Failure | None:
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
    return Failure(tuple(reasons), True) if reasons else None


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


def _score(node: NodeInfo, used: Usage, requests: Mapping[str, int]) -> float:
    """LeastAllocated over CPU and memory: the share left free after placing the pod (higher is better)."""
    shares = []
    for name in (CPU, MEMORY):
        total = node.allocatable.get(name, 0)
        if total > 0:
            shares.append((total - used.requested.get(name, 0) - requests.get(name, 0)) / total)
    return sum(shares) / len(shares) if shares else 0.0


def place(pod: PodInfo, nodes: Sequence[NodeInfo], used: Mapping[str, Usage]) -> tuple[str | None, list[Failure]]:
    """The node ``pod`` goes to, or None with every node's failure."""
    best: tuple[float, str] | None = None
    failures = []
    for node in nodes:
        failure = filter_node(pod, node, used[node.name])
        if failure is not None:
            failures.append(failure)
            continue
        rank = (-_score(node, used[node.name], pod.requests), node.name)
        if best is None or rank < best:
            best = rank
    return (best[1] if best is not None else None), failures
