"""Whether a node's labels and taints admit a pod: tolerations against taints, nodeSelector and node
affinity terms, as kube's component-helpers match them. Shared by the filters, the spread
constraints' node inclusion policies and the scores. Pure: no I/O.
"""

from __future__ import annotations

from trainyard.api.meta import Obj
from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, PodInfo


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


def term_matches(term: Obj, node: NodeInfo) -> bool:
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
    return any(term_matches(term, node) for term in pod.affinity)
