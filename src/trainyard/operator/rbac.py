"""An RBAC rule of the operator's ClusterRole, with the call site that needs it, and how owned kinds merge.

``operator.families`` says what each family's controllers ask of which resources; ``manifests``
gathers every family's rules and the operator's own into ``deploy/``'s ClusterRole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from trainyard.frameworks.base import ChildKind
from trainyard.operator.controller import CHILD_VERBS


@dataclass(frozen=True)
class Rule:
    """Verbs on resources of one API group, and the call site of the operator that needs them."""

    group: str
    resources: tuple[str, ...]
    verbs: tuple[str, ...]
    why: str

    def triples(self) -> set[tuple[str, str, str]]:
        return {(self.group, r, v) for r in self.resources for v in self.verbs}

    def manifest(self) -> dict[str, Any]:
        return {"apiGroups": [self.group], "resources": list(self.resources), "verbs": list(self.verbs)}


def job_kind_rules(
    group: str, plurals: tuple[str, ...], asked: tuple[str, ...], *, reads: str, status: str, owners: str
) -> list[Rule]:
    """A family's rules for its own job kinds: what its controller asks of the jobs (``reads``: why),
    the one status merge-patch per pass, and the finalizers blockOwnerDeletion on children asks for."""
    return [
        Rule(group, plurals, asked, reads),
        Rule(group, tuple(f"{p}/status" for p in plurals), ("patch",), status),
        Rule(group, tuple(f"{p}/finalizers" for p in plurals), ("update",), owners),
    ]


_VERB_ORDER = ("get", "list", "watch", "create", "update", "patch", "delete")


def verbs(*asked: str) -> tuple[str, ...]:
    """The verbs asked, once each, in kubectl's order."""
    return tuple(sorted(set(asked), key=_VERB_ORDER.index))


def child_rules(kinds: Iterable[ChildKind]) -> list[Rule]:
    """One rule per kind plugins declare their jobs own, with the owned-children path's verbs."""
    rules: dict[tuple[str, str], Rule] = {}
    for kind in kinds:
        asked = kind.verbs or CHILD_VERBS
        known = rules.get((kind.group, kind.plural))
        if known is not None:  # owned by two kinds: what either asks
            asked, purpose = verbs(*known.verbs, *asked), f"{known.why}; {kind.purpose}"
            rules[kind.group, kind.plural] = Rule(kind.group, (kind.plural,), asked, purpose)
            continue
        rules[kind.group, kind.plural] = Rule(kind.group, (kind.plural,), asked, kind.purpose)
        if kind.patches_status:
            status = f"{kind.plural}/status"
            rules.setdefault((kind.group, status), Rule(kind.group, (status,), ("patch",), kind.purpose))
    return list(rules.values())
