"""The pod-level placement rules, parsed once per version of a pod as kube-scheduler's
``framework.PodInfo`` holds them: label selectors, pod (anti-)affinity terms and topology spread
constraints.

* **Selectors** are apimachinery's ``LabelSelectorAsSelector``: ``matchLabels`` and
  ``matchExpressions`` ANDed, an empty selector matching everything and a missing (nil) one
  nothing; a malformed one (an unknown operator) matches nothing, as a conversion error would.
* **Affinity terms** (``PodAffinityTerm``): the namespaces a term looks in are its ``namespaces``
  or, with neither they nor ``namespaceSelector`` given, the pod's own; a ``namespaceSelector``
  is matched against the namespace's labels (the scheduler's Namespace cache; every namespace has
  ``kubernetes.io/metadata.name``). ``matchLabelKeys``/``mismatchLabelKeys`` are merged into the
  selector with the pod's own values, as kube-apiserver v1.32 does at creation (not when the
  selector is nil: it matches nothing).
* **Spread constraints** (``TopologySpreadConstraint``): ``minDomains`` 1 unless given,
  ``nodeAffinityPolicy`` Honor and ``nodeTaintsPolicy`` Ignore by default, ``matchLabelKeys``
  merged with the pod's values as the scheduler does; the selector looks in the pod's namespace.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainyard.api.meta import Obj

NAMESPACE_NAME = "kubernetes.io/metadata.name"
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"

Requirement = tuple[str, str, frozenset[str]]  # (key, operator, values)
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


@dataclass(frozen=True)
class Selector:
    """A parsed LabelSelector: its requirements, all of which must hold (none: everything)."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        for key, operator, values in self.requirements:
            value = labels.get(key)
            if operator == "In":
                ok = value is not None and value in values
            elif operator == "NotIn":
                ok = value is None or value not in values
            elif operator == "Exists":
                ok = value is not None
            else:
                ok = value is None
            if not ok:
                return False
        return True

    def merged(self, labels: Mapping[str, str], keys: Any, operator: str) -> Selector:
        """With ``key <operator> (the pod's value)`` for each of ``keys`` the pod's labels have."""
        extra = tuple((str(k), operator, frozenset({labels[k]})) for k in keys or () if k in labels)
        return Selector(self.requirements + extra) if extra else self


def selector(obj: Any) -> Selector | None:
    """``LabelSelectorAsSelector``: None (matches nothing) for a missing or malformed selector."""
    if not isinstance(obj, dict):
        return None
    out: list[Requirement] = [
        (str(k), "In", frozenset({str(v)})) for k, v in sorted((obj.get("matchLabels") or {}).items())
    ]
    for expr in obj.get("matchExpressions") or []:
        if not isinstance(expr, dict) or expr.get("operator") not in _OPERATORS:
            return None
        values = frozenset(str(v) for v in expr.get("values") or [])
        out.append((str(expr.get("key")), str(expr["operator"]), values))
    return Selector(tuple(out))


@dataclass(frozen=True)
class Term:
    """One pod (anti-)affinity term: which pods it matches, and over which topology."""

    selector: Selector | None
    namespaces: frozenset[str]
    namespace_selector: Selector | None
    topology_key: str
    weight: int = 0  # preferred terms' weight (required terms: 0)

    @property
    def matcher(self) -> tuple[Any, ...]:
        """What decides which pods the term matches (not its topology or weight): a cache key."""
        return (self.selector, self.namespaces, self.namespace_selector)

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None = None) -> bool:
        return matcher_matches(self.matcher, namespace, labels, ns_labels)


def matcher_matches(
    matcher: tuple[Any, ...], namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None = None
) -> bool:
    """Whether a pod of ``namespace`` (labelled ``ns_labels``) with ``labels`` is matched by a term's ``matcher``."""
    chosen, namespaces, ns_selector = matcher
    if chosen is None:
        return False
    if namespace in namespaces:
        return bool(chosen.matches(labels))
    if ns_selector is None or not ns_selector.matches({**(ns_labels or {}), NAMESPACE_NAME: namespace}):
        return False
    return bool(chosen.matches(labels))


def _term(obj: Obj, namespace: str, labels: Mapping[str, str], weight: int = 0) -> Term:
    chosen = selector(obj.get("labelSelector"))
    if chosen is not None:
        chosen = chosen.merged(labels, obj.get("matchLabelKeys"), "In")
        chosen = chosen.merged(labels, obj.get("mismatchLabelKeys"), "NotIn")
    namespaces = frozenset(str(n) for n in obj.get("namespaces") or [])
    ns_selector = selector(obj["namespaceSelector"]) if obj.get("namespaceSelector") is not None else None
    if not namespaces and obj.get("namespaceSelector") is None:
        namespaces = frozenset({namespace})
    return Term(chosen, namespaces, ns_selector, str(obj.get("topologyKey") or ""), weight)


@dataclass(frozen=True)
class PodTerms:
    """A pod's affinity and anti-affinity terms, required and preferred."""

    affinity: tuple[Term, ...] = ()
    anti_affinity: tuple[Term, ...] = ()
    preferred_affinity: tuple[Term, ...] = ()
    preferred_anti_affinity: tuple[Term, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.affinity or self.anti_affinity or self.preferred_affinity or self.preferred_anti_affinity)


NO_TERMS = PodTerms()


def pod_terms(affinity: Any, namespace: str, labels: Mapping[str, str]) -> PodTerms:
    if not isinstance(affinity, dict):
        return NO_TERMS

    def required(part: Any) -> tuple[Term, ...]:
        items = (part or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or []
        return tuple(_term(t, namespace, labels) for t in items if isinstance(t, dict))

    def preferred(part: Any) -> tuple[Term, ...]:
        items = (part or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        return tuple(
            _term(t.get("podAffinityTerm") or {}, namespace, labels, int(t.get("weight") or 0))
            for t in items
            if isinstance(t, dict)
        )

    pa, anti = affinity.get("podAffinity"), affinity.get("podAntiAffinity")
    out = PodTerms(required(pa), required(anti), preferred(pa), preferred(anti))
    return out if out else NO_TERMS


@dataclass(frozen=True)
class Spread:
    """One topology spread constraint, defaults applied."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (else ScheduleAnyway)
    selector: Selector | None
    namespace: str
    min_domains: int = 1
    honor_affinity: bool = True  # nodeAffinityPolicy: Honor
    honor_taints: bool = False  # nodeTaintsPolicy: Ignore

    @property
    def term(self) -> Term:
        """The pods it counts, as a term: its selector, in the pod's namespace."""
        return Term(self.selector, frozenset({self.namespace}), None, self.topology_key)


def spread_constraints(items: Any, namespace: str, labels: Mapping[str, str]) -> tuple[Spread, ...]:
    out = []
    for c in items or []:
        if not isinstance(c, dict):
            continue
        chosen = selector(c.get("labelSelector"))
        if chosen is not None:
            chosen = chosen.merged(labels, c.get("matchLabelKeys"), "In")
        out.append(
            Spread(
                max_skew=int(c.get("maxSkew") or 1),
                topology_key=str(c.get("topologyKey") or ""),
                hard=(c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule",
                selector=chosen,
                namespace=namespace,
                min_domains=int(c.get("minDomains") or 1),
                honor_affinity=(c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                honor_taints=(c.get("nodeTaintsPolicy") or "Ignore") == "Honor",
            )
        )
    return tuple(out)


def default_selector(selectors: Iterable[Mapping[str, str]], labels: Mapping[str, str]) -> Selector | None:
    """``helper.DefaultSelector`` over Services: the merged selectors of those selecting a pod with
    ``labels`` (None: none does, and the system default constraints do not apply)."""
    merged: dict[str, str] = {}
    for chosen in selectors:
        if chosen and all(labels.get(k) == v for k, v in chosen.items()):
            merged.update(chosen)
    if not merged:
        return None
    return Selector(tuple((k, "In", frozenset({v})) for k, v in sorted(merged.items())))


class ServiceSelectors:
    """The Services' selectors by namespace, filed under one label pair each, so that finding the
    Services selecting a pod reads only those that may (not every Service of its namespace)."""

    def __init__(self) -> None:
        self._by_pair: dict[tuple[str, str, str], dict[str, Mapping[str, str]]] = {}
        self._filed: dict[tuple[str, str], tuple[str, str, str]] = {}

    def put(self, namespace: str, name: str, selector: Mapping[str, str] | None) -> None:
        """A Service's selector (None or empty: it is gone, or selects no pod)."""
        old = self._filed.pop((namespace, name), None)
        if old is not None:
            self._by_pair.get(old, {}).pop(name, None)
        if selector:
            key, value = min(selector.items())
            pair = (namespace, str(key), str(value))
            self._by_pair.setdefault(pair, {})[name] = dict(selector)
            self._filed[(namespace, name)] = pair

    def selector_for(self, namespace: str, labels: Mapping[str, str]) -> Selector | None:
        found = [s for k, v in labels.items() for s in self._by_pair.get((namespace, k, v), {}).values()]
        return default_selector(found, labels)


def system_defaults(chosen: Selector, namespace: str) -> tuple[Spread, ...]:
    """kube-scheduler's system default constraints (ScheduleAnyway) for a pod with none of its own."""
    return (
        Spread(3, HOSTNAME, False, chosen, namespace),
        Spread(5, ZONE, False, chosen, namespace),
    )
