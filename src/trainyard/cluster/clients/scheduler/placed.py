"""The pods placed on each node as one scheduling pass sees them, indexed for the rules that look at
other pods (``interpod``, ``spread``): kube-scheduler's snapshot of ``NodeInfo.Pods`` with the
pre-filter state its InterPodAffinity and PodTopologySpread plugins keep.

Counting the pods a rule matches on every node is one scan of the bound pods per distinct rule in a
pass (pods of one template share their rules), kept up to date as the pass places pods, takes them
out for preemption or puts them back (``add``); a rule is never matched against every pod per node
per pending pod. Rules are filed under a label pair their selector requires (its first ``In``), and
placed pods by their label pairs, so a pod placed is tried only against the rules it may satisfy
and a new rule reads only the pods that may match it. The terms that bound pods carry themselves
(their anti-affinity against the pod being placed, their preferred terms for scoring) are gathered
once per pass, by term, with how many pods on each node carry them. ``mark``/``rollback`` undo
what a gang or a preemption trial placed.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, PodInfo
from trainyard.cluster.clients.scheduler.terms import Term, matcher_matches

# Bound pods by node, by uid (the scheduler's ``on_node``).
Running = Mapping[str, Mapping[str, PodInfo]]
Counts = dict[str, int]  # node -> pods

# Roles of the terms bound pods carry.
ANTI = "anti"  # required anti-affinity: the pod being placed must keep off their domain
AFFINITY = "affinity"  # required affinity: scores as hardPodAffinityWeight
PREFERRED = "preferred"  # preferred affinity: scores by weight
PREFERRED_ANTI = "preferred-anti"  # preferred anti-affinity: scores minus weight


Pair = tuple[str, str]


def _hint(matcher: tuple[Any, ...]) -> tuple[Pair, ...] | None:
    """Label pairs one of which a pod must carry to match (its selector's first ``In``), or None."""
    chosen = matcher[0]
    if chosen is None:
        return ()  # matches no pod
    for key, operator, values in chosen.requirements:
        if operator == "In":
            return tuple((key, v) for v in values)
    return None


class _ByLabel:
    """Rules filed under the label pairs they require, so a pod is tried only against those it may match."""

    def __init__(self) -> None:
        self.by_pair: dict[Pair, list[Any]] = {}
        self.always: list[Any] = []

    def put(self, item: Any, hint: tuple[Pair, ...] | None) -> None:
        if hint is None:
            self.always.append(item)
        for pair in hint or ():
            self.by_pair.setdefault(pair, []).append(item)

    def candidates(self, labels: Mapping[str, str]) -> list[Any]:
        out = list(self.always)
        for pair in labels.items():
            out += self.by_pair.get(pair, ())
        return out


class Placed:
    """The pods on each node, with counts per node of the pods a rule matches (see the module)."""

    def __init__(
        self,
        nodes: Sequence[NodeInfo],
        running: Running | None = None,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.namespaces = namespaces or {}  # namespace -> its labels, for namespaceSelectors
        self._running: Running = running or {}
        self._changed: dict[str, tuple[str, PodInfo] | None] = {}  # uid -> (node, pod), or None: taken out
        self._journal: list[tuple[str, tuple[str, PodInfo] | None]] = []
        self._counts: dict[tuple[Any, ...], Counts] = {}
        self._rules = _ByLabel()  # the keys of ``_counts``
        # Placed pods by label pair, built when a rule is first counted.
        self._by_pair: dict[Pair, dict[str, tuple[str, PodInfo]]] | None = None
        # (role, namespace of the carrier, term) -> pods carrying it, per node
        self.carried: dict[tuple[str, str, Term], Counts] = {}
        self._carried = _ByLabel()
        self._anti = 0  # pods carrying required anti-affinity terms, counted once a term
        self.version = 0  # bumped by every change: verdicts that depend on other pods key on it
        for node, pod in self.pods():
            self._carry(pod, node, 1)

    @property
    def anti_affinity(self) -> bool:
        """Whether any placed pod carries a required anti-affinity term (every pod's labels then matter)."""
        return self._anti > 0

    def carried_matching(self, pod: PodInfo) -> list[tuple[tuple[str, str, Term], Counts]]:
        """The terms placed pods carry that match ``pod``, with their carriers per node."""
        out = []
        for entry in self._carried.candidates(pod.labels):
            counts = self.carried[entry]
            if counts and entry[2].matches(pod.namespace, pod.labels, self.namespaces.get(pod.namespace)):
                out.append((entry, counts))
        return out

    def pods(self) -> Iterator[tuple[str, PodInfo]]:
        """Every placed, unfinished pod, with its node."""
        for node, held in self._running.items():
            for uid, pod in held.items():
                if uid not in self._changed and not pod.terminal:
                    yield node, pod
        for entry in self._changed.values():
            if entry is not None:
                yield entry

    @staticmethod
    def _key(terms: Sequence[Term], live: bool) -> tuple[Any, ...]:
        return (tuple(sorted({t.matcher for t in terms}, key=repr)), live)

    def _matches(self, key: tuple[Any, ...], pod: PodInfo) -> bool:
        matchers, live = key
        if live and pod.deleting:
            return False
        ns_labels = self.namespaces.get(pod.namespace)
        return all(matcher_matches(m, pod.namespace, pod.labels, ns_labels) for m in matchers)

    def _pods_with(self, hint: tuple[Pair, ...] | None) -> Iterator[tuple[str, PodInfo]]:
        if hint is None:
            yield from self.pods()
            return
        if self._by_pair is None:
            self._by_pair = {}
            for node, pod in self.pods():
                self._file(pod, node, 1)
        for pair in hint:
            yield from self._by_pair.get(pair, {}).values()

    def _file(self, pod: PodInfo, node: str, sign: int) -> None:
        assert self._by_pair is not None
        for pair in pod.labels.items():
            if sign > 0:
                self._by_pair.setdefault(pair, {})[pod.uid] = (node, pod)
            else:
                self._by_pair.get(pair, {}).pop(pod.uid, None)

    def count(self, terms: Sequence[Term], *, live: bool = False) -> Counts:
        """Pods matching every one of ``terms`` on each node (``live``: not being deleted, as
        PodTopologySpread counts). Computed once per distinct rule, then kept up to date."""
        key = self._key(terms, live)
        counts = self._counts.get(key)
        if counts is None:
            counts = {}
            hint = _hint(key[0][0]) if key[0] else None
            for node, pod in self._pods_with(hint):
                if self._matches(key, pod):
                    counts[node] = counts.get(node, 0) + 1
            self._counts[key] = counts
            self._rules.put(key, hint)
        return counts

    def _carry(self, pod: PodInfo, node: str, sign: int) -> None:
        t = pod.terms
        if not t:
            return
        roles: tuple[tuple[str, tuple[Term, ...]], ...] = ((ANTI, t.anti_affinity), (AFFINITY, t.affinity))
        roles += ((PREFERRED, t.preferred_affinity), (PREFERRED_ANTI, t.preferred_anti_affinity))
        for role, terms in roles:
            for term in terms:
                entry = (role, pod.namespace, term)
                counts = self.carried.get(entry)
                if counts is None:
                    counts = self.carried[entry] = {}
                    self._carried.put(entry, _hint(term.matcher))
                self._bump(counts, node, sign)
                if role == ANTI:
                    self._anti += sign

    @staticmethod
    def _bump(counts: Counts, node: str, sign: int) -> None:
        value = counts.get(node, 0) + sign
        if value:
            counts[node] = value
        else:
            counts.pop(node, None)

    def _apply(self, pod: PodInfo, node: str, sign: int) -> None:
        for key in self._rules.candidates(pod.labels):
            if self._matches(key, pod):
                self._bump(self._counts[key], node, sign)
        if self._by_pair is not None:
            self._file(pod, node, sign)
        self._carry(pod, node, sign)
        self.version += 1

    def add(self, pod: PodInfo, node: str, sign: int = 1) -> None:
        """``pod`` placed on ``node`` (``sign`` -1: taken off it, as a preemption victim)."""
        self._journal.append((pod.uid, self._changed.get(pod.uid, _ABSENT)))
        self._changed[pod.uid] = (node, pod) if sign > 0 else None
        self._apply(pod, node, sign)

    def mark(self) -> int:
        return len(self._journal)

    def rollback(self, mark: int) -> None:
        """Undo every ``add`` since ``mark``."""
        while len(self._journal) > mark:
            uid, before = self._journal.pop()
            now = self._effective(uid)
            if before is _ABSENT:
                self._changed.pop(uid, None)
            else:
                self._changed[uid] = before
            again = self._effective(uid)
            if now is not None:
                self._apply(now[1], now[0], -1)
            if again is not None:
                self._apply(again[1], again[0], 1)

    def _effective(self, uid: str) -> tuple[str, PodInfo] | None:
        if uid in self._changed:
            return self._changed[uid]
        for node, held in self._running.items():
            pod = held.get(uid)
            if pod is not None and not pod.terminal:
                return node, pod
        return None


_ABSENT: Any = object()
