"""Which running pods to evict so that a pending pod (or a pending gang) fits: kube-scheduler v1.32's
``DefaultPreemption`` (``pkg/scheduler/framework/preemption`` and ``plugins/defaultpreemption``),
gang-aware. Pure: the choice is a value (``Preemption``); the scheduler's loop acts on it.

* **Eligibility** (``PodEligibleToPreemptOthers``): a preemptor with ``preemptionPolicy: Never``
  preempts nothing (``not eligible due to preemptionPolicy=Never.``); nor does one nominated to a
  node where a lower-priority pod is still terminating by preemption (``not eligible due to a
  terminating pod on the nominated node.``): the room it asked for is on its way.
* **Victims** are only pods of lower ``spec.priority``, bound, not finished and not already being
  deleted. A pod of a gang (a PodGroup of scheduler-plugins or Volcano: ``snapshot.group_of``) is
  one *unit* with every running member of its group, on whatever node: the unit is preempted whole
  or not at all, never one replica of a static job. A unit is eligible only when all its members
  are of lower priority; its priority is its highest member's, its start time its earliest's.
* **Per node** (``SelectVictimsOnNode``), for a single preemptor: every eligible unit with a member
  on the node is removed; if the pod then fits, units are given back ("reprieved") most important
  first (higher priority, then earlier start), each kept back if the pod still fits without it.
  Nodes whose failure preemption cannot resolve (taints, affinity, unschedulable) are skipped.
* **Which node** (``pickOneNodeForPreemption``), by upstream's order: fewest PodDisruptionBudget
  violations (the plane serves no PDBs, so this never decides: every eviction is allowed, as its
  ``pods/eviction`` says), then the lowest highest-victim priority, the smallest sum of victim
  priorities (each offset by 2^31 as upstream, so that negative priorities count), the fewest
  victim pods, the latest start among the highest-priority victims, then the first node by name.
  Priorities are counted per unit: a gang's weighs once in the sum, however many members it has.
* **A gang preemptor** needs room for its members all at once (``need``: what ``minMember`` still
  lacks), and they may span nodes, so one candidate is made over the whole cluster with the same
  remove-then-reprieve rule; nothing is evicted unless all of them would then fit.

What preemption found changes the ``FailedScheduling`` message as upstream: victims found, no
``preemption:`` part (the pod is only nominated); none, ``preemption: 0/N nodes are available: ...``.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainyard.cluster.clients.scheduler.filters import filter_node, place, prefilter
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, PodInfo, Usage

DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_REASON = "PreemptionByScheduler"
PREEMPTED_EVENT = "Preempted"
NEVER = "Never"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
PRIORITY_OFFSET = 2**31  # upstream adds MaxInt32+1 to each priority it sums

# Running pods by node, by uid: what is bound there (terminating ones included: they still hold).
Running = Mapping[str, Mapping[str, PodInfo]]


def condition_message(preemptor: PodInfo) -> str:
    """The victim's ``DisruptionTarget`` message: the preemptor's scheduler name, as upstream."""
    return f"{preemptor.scheduler}: preempting to accommodate a higher priority pod"


def event_message(preemptor: PodInfo, node: str) -> str:
    """The ``Preempted`` event on the victim."""
    return f"Preempted by pod {preemptor.uid} on node {node}"


@dataclass(frozen=True)
class Unit:
    """What is evicted together: one pod, or every running member of one gang."""

    key: str
    pods: tuple[PodInfo, ...]
    priority: int
    start: str

    @property
    def importance(self) -> tuple[int, str]:
        """Sorts the most important first (``MoreImportantPod``): higher priority, earlier start."""
        return (-self.priority, self.start)


@dataclass(frozen=True)
class Preemption:
    """Evict ``victims``; ``preemptors`` are nominated to the nodes they will go to once they are gone."""

    preemptors: tuple[tuple[PodInfo, str], ...]
    victims: tuple[PodInfo, ...]


def _start(pod: PodInfo) -> str:
    return pod.started or pod.created


def units(running: Running) -> list[Unit]:
    """Every running pod as an eviction unit: alone, or with the rest of its gang."""
    by_key: dict[str, list[PodInfo]] = {}
    for held in running.values():
        for pod in held.values():
            if pod.terminal:
                continue
            key = "/".join(pod.group) if pod.group is not None else f"pod/{pod.uid}"
            by_key.setdefault(key, []).append(pod)
    out = []
    for key, members in by_key.items():
        members.sort(key=lambda p: (p.namespace, p.name))
        out.append(Unit(key, tuple(members), max(p.priority for p in members), min(_start(p) for p in members)))
    return out


def not_eligible(pods: Sequence[PodInfo], running: Running) -> str | None:
    """Why ``pods`` may preempt nothing now (``PodEligibleToPreemptOthers``), or None."""
    for pod in pods:
        if pod.preemption_policy == NEVER:
            return NOT_ELIGIBLE_NEVER
    for pod in pods:
        if pod.nominated and any(
            p.deleting and p.preempted and p.priority < pod.priority for p in running.get(pod.nominated, {}).values()
        ):
            return NOT_ELIGIBLE_TERMINATING
    return None


def _fits(
    pods: Sequence[PodInfo], need: int, nodes: Sequence[NodeInfo], used: Mapping[str, Usage], placed: Placed
) -> list[tuple[PodInfo, str]] | None:
    scratch = {name: u.copy() for name, u in used.items()}
    mark = placed.mark()
    fits = []
    for pod in pods:
        target, _ = place(pod, nodes, scratch, placed)
        if target is not None:
            scratch[target].add_pod(pod)
            placed.add(pod, target)
            fits.append((pod, target))
    placed.rollback(mark)
    return fits if len(fits) >= need else None


def _select(
    pods: Sequence[PodInfo],
    need: int,
    nodes: Sequence[NodeInfo],
    used: Mapping[str, Usage],
    candidates: Sequence[Unit],
    placed: Placed,
) -> tuple[list[Unit], list[tuple[PodInfo, str]]] | None:
    """Remove every candidate unit; if ``pods`` then fit, give back all that are not needed.

    Victims leave ``placed`` too while they are tried, so that the anti-affinity and spread they
    cause are lifted with them (as upstream's ``RemovePod`` on the pre-filter state)."""
    scratch = {name: u.copy() for name, u in used.items()}
    mark = placed.mark()

    def charge(unit: Unit, sign: int) -> None:
        for member in unit.pods:
            if member.node_name in scratch:
                scratch[member.node_name].add_pod(member, sign)
                placed.add(member, member.node_name, sign)

    try:
        for unit in candidates:
            charge(unit, -1)
        fits = _fits(pods, need, nodes, scratch, placed)
        if fits is None:
            return None
        victims = []
        for unit in sorted(candidates, key=lambda u: (u.importance, u.key)):
            charge(unit, +1)
            again = _fits(pods, need, nodes, scratch, placed)
            if again is None:
                charge(unit, -1)
                victims.append(unit)
            else:
                fits = again
        return victims, _fits(pods, need, nodes, scratch, placed) or fits
    finally:
        placed.rollback(mark)


def _pick(candidates: Sequence[tuple[list[Unit], list[tuple[PodInfo, str]]]]) -> int:
    """``pickOneNodeForPreemption`` after PDB violations (none here): the index of the best candidate."""

    def top(victims: list[Unit]) -> int:
        return max(u.priority for u in victims)

    def earliest(victims: list[Unit]) -> str:
        return min(u.start for u in victims if u.priority == top(victims))

    order = list(range(len(candidates)))
    for criterion in (
        lambda v: top(v),
        lambda v: sum(u.priority + PRIORITY_OFFSET for u in v),
        lambda v: sum(len(u.pods) for u in v),
    ):
        best = min(criterion(candidates[i][0]) for i in order)
        order = [i for i in order if criterion(candidates[i][0]) == best]
    latest = max(earliest(candidates[i][0]) for i in order)  # the latest start wins
    return next(i for i in order if earliest(candidates[i][0]) == latest)


def preempt(
    pods: Sequence[PodInfo],
    need: int,
    nodes: Sequence[NodeInfo],
    used: Mapping[str, Usage],
    running: Running,
    taken: Collection[str] = (),
    placed: Placed | None = None,
) -> Preemption | None:
    """Victims whose eviction lets ``pods`` (at least ``need`` of them) fit, or None.

    ``pods`` are one preemptor, or the pending members of one gang; ``taken`` are units already
    chosen as victims in this pass (their resources are promised to another preemptor);
    ``placed``: the pass's placed pods (by default ``running``'s).
    """
    if not pods or not_eligible(pods, running) is not None:
        return None
    if placed is None:
        placed = Placed(nodes, running)
    priority = min(p.priority for p in pods)
    eligible = [
        u
        for u in units(running)
        if u.key not in taken and u.priority < priority and not any(p.deleting for p in u.pods)
    ]
    if not eligible:
        return None
    by_node: dict[str, list[Unit]] = {}
    for unit in eligible:
        for name in {p.node_name for p in unit.pods}:
            by_node.setdefault(name, []).append(unit)
    candidates: list[tuple[list[Unit], list[tuple[PodInfo, str]]]] = []
    if len(pods) == 1:
        pod = pods[0]
        pre = prefilter(pod, list(placed.nodes.values()), placed)
        for node in sorted(nodes, key=lambda n: n.name):
            failure = filter_node(pod, node, used.get(node.name, Usage()), pre)
            if (failure is not None and not failure.resolvable) or node.name not in by_node:
                continue
            found = _select(pods, 1, [node], used, by_node[node.name], placed)
            if found is not None and found[0]:
                candidates.append(found)
    else:
        found = _select(pods, need, nodes, used, eligible, placed)
        if found is not None and found[0]:
            candidates.append(found)
    if not candidates:
        return None
    victims, fits = candidates[_pick(candidates)]
    return Preemption(
        preemptors=tuple(fits),
        victims=tuple(p for u in sorted(victims, key=lambda u: u.key) for p in u.pods),
    )


def taken_units(preemption: Preemption) -> set[str]:
    return {"/".join(p.group) if p.group is not None else f"pod/{p.uid}" for p in preemption.victims}


def failed_message(fit: str, pods: Sequence[PodInfo], running: Running, nodes: Iterable[NodeInfo]) -> str:
    """The FailedScheduling message when preemption found nothing, with its ``preemption:`` part.

    ``fit`` is ``filters.fit_error``'s (no victims found, or not helpful, per node); an ineligible
    preemptor says why instead, in upstream's words.
    """
    why = not_eligible(pods, running)
    if why is None or why == NOT_ELIGIBLE_NEVER:
        return fit  # fit_error already words both
    head = fit.split(" preemption:")[0]
    return f"{head} preemption: {why}."


def nominated(fit: str) -> str:
    """The message of a pod whose preemption found victims: the fit error alone, as upstream."""
    return fit.split(" preemption:")[0]
