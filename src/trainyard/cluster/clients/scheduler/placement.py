"""Where pods go: the scheduler's decision as a pure function, in kube-scheduler's terms and words.

``schedule`` takes the nodes (with what their bound pods already request: ``snapshot``), the
pending pods, the pod groups those pods belong to and the priority classes, and returns the
bindings to make, the verdict for every pod that cannot be placed (worded as kube-scheduler's
``FailedScheduling`` message), the Volcano pod groups to enqueue and a verdict per gang that
could not be placed. Whether and where one pod fits is ``filters``'s.

It follows kube-scheduler v1.32's default profile for what it implements:

* **Order**: higher ``spec.priority`` first, then older first (a gang by its PodGroup's age).
* **Preemption**, when ``running`` is given: a pod or gang that does not fit asks ``preemption``
  for lower-priority victims (gangs evicted whole); the decision lists them with the nodes the
  preemptors are nominated to, and the preemptors stay Pending until the victims are gone (their
  resources are held while they terminate). Victims chosen for one preemptor are not offered to
  another in the same pass.

**Pods placed earlier in the pass count** for the rules that read other pods (``placed``: pod
affinity and anti-affinity, spread), and a pod refused is not refused again by a sibling's verdict
when placing others could have helped it (``_refusal_key``).

Gangs are all-or-nothing: the pending members of a group are placed together on a scratch copy
of the nodes (each member seeing those placed before it) and bound only if, with the members
already placed, at least ``minMember`` fit (scheduler-plugins' coscheduling: bound and running
members; Volcano: also succeeded ones). A
gang that does not fit binds nothing and reserves nothing, so two gangs cannot deadlock. Volcano
groups are first *enqueued* (``Pending`` → ``Inqueue``) when their ``minResources`` fit the
cluster's free resources less what other enqueued groups still need; only enqueued groups are
placed. Pure: no I/O, no clock (``now`` is not needed: time-based rules live in ``gangs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.clients.scheduler import preemption
from trainyard.cluster.clients.scheduler.filters import NOT_HELPFUL, Failure, fit_error, place
from trainyard.cluster.clients.scheduler.placed import Placed
from trainyard.cluster.clients.scheduler.preemption import Preemption, Running
from trainyard.cluster.clients.scheduler.snapshot import (
    COSCHEDULING,
    VOLCANO,
    VOLCANO_GROUP,
    GroupKey,
    NodeInfo,
    PodInfo,
    Resources,
    Usage,
    add_requests,
    quantities,
)
from trainyard.cluster.quantity import PODS, format_amount

# Volcano phases in which a group's pods may be placed.
VOLCANO_PLACEABLE = ("Inqueue", "Running", "Unknown")


# -- gangs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Group:
    """A PodGroup as the scheduler reads it, with every member pod it knows of."""

    key: GroupKey
    min_member: int
    min_resources: Mapping[str, int] = field(default_factory=dict)
    created: str = ""
    phase: str = ""
    priority_class: str = ""
    members: tuple[PodInfo, ...] = ()
    exists: bool = True

    @property
    def flavour(self) -> str:
        return self.key[0]

    @property
    def label(self) -> str:
        return f"{self.key[1]}/{self.key[2]}"

    def assigned(self) -> int:
        """Members already placed: bound and not finished (coscheduling), or also succeeded (Volcano)."""
        return sum(
            1
            for p in self.members
            if p.node_name and (not p.terminal or (self.flavour == VOLCANO_GROUP and p.phase == "Succeeded"))
        )


def group_resources(spec: Obj) -> Resources:
    return quantities(spec.get("minResources"))


def group(obj: Obj, flavour: str, members: Iterable[PodInfo]) -> Group:
    m, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    return Group(
        key=(flavour, m.get("namespace", ""), m.get("name", "")),
        min_member=int(spec.get("minMember") or (1 if flavour == VOLCANO_GROUP else 0)),
        min_resources=group_resources(spec),
        created=m.get("creationTimestamp") or "",
        phase=status.get("phase") or "",
        priority_class=spec.get("priorityClassName") or "",
        members=tuple(members),
    )


# -- the decision ------------------------------------------------------------------------------------


@dataclass
class Decision:
    bindings: list[tuple[PodInfo, str]] = field(default_factory=list)
    # (pod, message): pods that stay Pending with PodScheduled=False, reason Unschedulable.
    unschedulable: list[tuple[PodInfo, str]] = field(default_factory=list)
    enqueued: list[GroupKey] = field(default_factory=list)
    # Gangs that could not be placed (or enqueued), and why, for their PodGroup's status and events.
    gangs: dict[GroupKey, str] = field(default_factory=dict)
    # Gangs whose pending members were all bound this time.
    placed_gangs: list[GroupKey] = field(default_factory=list)
    # Victims to evict, with the pods nominated to the room they leave.
    preemptions: list[Preemption] = field(default_factory=list)
    # Units (``preemption.Unit.key``) already chosen as victims in this pass.
    taken: set[str] = field(default_factory=set)

    def preempt(self, found: Preemption) -> None:
        self.preemptions.append(found)
        self.taken |= preemption.taken_units(found)


@dataclass(frozen=True)
class _Unit:
    order: tuple[Any, ...]
    pods: tuple[PodInfo, ...]
    group: Group | None


def _units(pending: Sequence[PodInfo], groups: Mapping[GroupKey, Group], priorities: Mapping[str, int]) -> list[_Unit]:
    by_group: dict[GroupKey, list[PodInfo]] = {}
    units = []
    for pod in pending:
        if pod.group is not None and pod.group in groups:
            by_group.setdefault(pod.group, []).append(pod)
        else:
            units.append(_Unit((-pod.priority, pod.created, pod.namespace, pod.name), (pod,), None))
    for key, pods in by_group.items():
        g = groups[key]
        if g.flavour == VOLCANO_GROUP:
            prio = priorities.get(g.priority_class, max(p.priority for p in pods))
        else:
            prio = max(p.priority for p in pods)
        ordered = tuple(sorted(pods, key=lambda p: (-p.priority, p.created, p.name)))
        units.append(_Unit((-prio, g.created or ordered[0].created, key[1], key[2]), ordered, g))
    units.sort(key=lambda u: u.order)
    return units


def _enqueue(
    groups: Mapping[GroupKey, Group],
    nodes: Sequence[NodeInfo],
    used: Mapping[str, Usage],
    priorities: Mapping[str, int],
    decision: Decision,
) -> set[GroupKey]:
    """Volcano's enqueue action: Pending groups whose minResources fit what is free and not promised."""
    free: Resources = {}
    for node in nodes:
        if node.unschedulable:
            continue
        for name, total in node.allocatable.items():
            free[name] = free.get(name, 0) + max(0, total - used[node.name].requested.get(name, 0))
    volcano = [g for g in groups.values() if g.flavour == VOLCANO_GROUP and g.exists]
    for g in volcano:
        if g.phase == "Inqueue":
            # Promised to an enqueued group: what its minResources still want beyond its bound members.
            bound: Resources = {}
            for p in g.members:
                if p.node_name and not p.terminal:
                    bound = add_requests(bound, p.requests)
            for name, value in g.min_resources.items():
                free[name] = free.get(name, 0) - max(0, value - bound.get(name, 0))
    placeable = {g.key for g in volcano if g.phase in VOLCANO_PLACEABLE}
    waiting = sorted(
        (g for g in volcano if g.phase in ("", "Pending")),
        key=lambda g: (-priorities.get(g.priority_class, 0), g.created, g.key),
    )
    for g in waiting:
        short = {n: v for n, v in g.min_resources.items() if v > free.get(n, 0)}
        if short:
            wants = ", ".join(f"{n} {format_amount(n, v)}" for n, v in sorted(g.min_resources.items()))
            idle = ", ".join(f"{n} {format_amount(n, max(0, free.get(n, 0)))}" for n in sorted(short))
            decision.gangs[g.key] = (
                f"pod group {g.label} is not enqueued: its minResources ({wants}) do not fit the cluster's "
                f"idle resources ({idle})"
            )
            continue
        for name, value in g.min_resources.items():
            free[name] = free.get(name, 0) - value
        decision.enqueued.append(g.key)
        placeable.add(g.key)
    return placeable


def _gang_refusal(g: Group, pending: Sequence[PodInfo]) -> str | None:
    """Why a gang is not even tried (coscheduling's PreFilter, Volcano's missing group)."""
    if not g.exists:
        if g.flavour == VOLCANO_GROUP:
            return f"pod group {g.label} not found"
        return None
    if g.flavour == COSCHEDULING and len(g.members) < g.min_member:
        return (
            f"pre-filter pod {pending[0].name} cannot find enough sibling pods, current pods number: "
            f"{len(g.members)}, minMember of group: {g.min_member}"
        )
    return None


def _cluster_short(g: Group, nodes: Sequence[NodeInfo], used: Mapping[str, Usage]) -> str | None:
    """Coscheduling's minResources check against what the nodes have free (pods: minMember slots)."""
    wanted = dict(g.min_resources)
    wanted[PODS] = g.min_member
    free: Resources = {}
    for node in nodes:
        for name, total in node.allocatable.items():
            have = used[node.name].pods if name == PODS else used[node.name].requested.get(name, 0)
            free[name] = free.get(name, 0) + max(0, total - have)
    gap = {n: v - free.get(n, 0) for n, v in wanted.items() if v > free.get(n, 0)}
    if not gap:
        return None
    return "resource gap: " + ", ".join(f"{n} {format_amount(n, v)}" for n, v in sorted(gap.items()))


def _prefilter_error(pod: PodInfo, nodes: int, why: str) -> str:
    return f"0/{nodes} nodes are available: {why}. preemption: 0/{nodes} nodes are available: {nodes} {NOT_HELPFUL}.."


def schedule(
    nodes: Sequence[NodeInfo],
    used: Mapping[str, Usage],
    pending: Sequence[PodInfo],
    groups: Mapping[GroupKey, Group],
    priorities: Mapping[str, int],
    running: Running | None = None,
    namespaces: Mapping[str, Mapping[str, str]] | None = None,
) -> Decision:
    """Decide where ``pending`` pods go; ``used`` is not modified (the decision says what to bind).

    ``pending`` are unbound, undeleted pods of the schedulers served here; ``groups`` holds every
    group any of them names plus the Volcano groups waiting to be enqueued or promised resources.
    ``running`` (the bound pods by node) enables preemption; without it nothing is ever evicted.
    ``namespaces``: each namespace's labels, for the namespaceSelectors of affinity terms.
    """
    decision = Decision()
    state = {n.name: (used[n.name].copy() if n.name in used else Usage()) for n in nodes}
    placed = Placed(nodes, running, namespaces)
    placeable = _enqueue(groups, nodes, state, priorities, decision)
    refused: dict[tuple[Any, ...], str] = {}
    for unit in _units(pending, groups, priorities):
        if unit.group is None:
            pod = unit.pods[0]
            key = _refusal_key(pod, placed)
            if key in refused:
                decision.unschedulable.append((pod, refused[key]))
                continue
            target, failures = place(pod, nodes, state, placed)
            if target is not None:
                _bind(pod, target, state, placed)
                decision.bindings.append((pod, target))
                continue
            fit = fit_error(pod, failures, len(nodes))
            found = _preempt([pod], 1, nodes, state, running, decision, placed)
            if found:
                decision.unschedulable.append((pod, preemption.nominated(fit)))
                continue
            if running is not None:
                fit = preemption.failed_message(fit, [pod], running, nodes)
            refused[key] = fit
            decision.unschedulable.append((pod, fit))
            continue
        _schedule_gang(unit.group, unit.pods, nodes, state, placeable, decision, running, placed)
    return decision


def _refusal_key(pod: PodInfo, placed: Placed) -> tuple[Any, ...]:
    """Which pods share a refusal within one decision: those of one shape, while usage and
    anti-affinity only fill up. Labels join the key where some rule may match them; a pod that
    placing others can help (pod affinity, hard spread) is refused only until anything is placed."""
    labels = None
    if pod.label_sensitive or placed.anti_affinity:
        labels = (pod.namespace, tuple(sorted(pod.labels.items())))
    return (pod.shape, labels, placed.version if pod.waits_for_siblings else None)


def _bind(pod: PodInfo, node: str, state: Mapping[str, Usage], placed: Placed) -> None:
    state[node].add_pod(pod)
    placed.add(pod, node)


def _preempt(
    pods: Sequence[PodInfo],
    need: int,
    nodes: Sequence[NodeInfo],
    state: Mapping[str, Usage],
    running: Running | None,
    decision: Decision,
    placed: Placed | None = None,
) -> bool:
    """Whether victims were found for ``pods`` (then recorded in ``decision``)."""
    if running is None or not nodes or pods[0].scheduler == VOLCANO:
        return False  # Volcano's preempt action (queues, jobs) is not the default plugin's
    found = preemption.preempt(pods, need, nodes, state, running, decision.taken, placed)
    if found is None:
        return False
    decision.preempt(found)
    return True


def _schedule_gang(
    g: Group,
    pods: Sequence[PodInfo],
    nodes: Sequence[NodeInfo],
    state: dict[str, Usage],
    placeable: set[GroupKey],
    decision: Decision,
    running: Running | None,
    placed: Placed,
) -> None:
    refusal = _gang_refusal(g, pods)
    if refusal is None and g.flavour == VOLCANO_GROUP and g.key not in placeable:
        refusal = decision.gangs.get(g.key) or f"pod group {g.label} is {g.phase or 'Pending'}: not enqueued yet"
        for pod in pods:
            decision.unschedulable.append((pod, refusal))
        return
    if refusal is not None:
        decision.gangs[g.key] = refusal
        for pod in pods:
            message = refusal if pod.scheduler == VOLCANO else _prefilter_error(pod, len(nodes), refusal)
            decision.unschedulable.append((pod, message))
        return
    if not g.exists:  # coscheduling: a pod naming no PodGroup is scheduled on its own
        for pod in pods:
            target, failures = place(pod, nodes, state, placed)
            if target is None:
                decision.unschedulable.append((pod, fit_error(pod, failures, len(nodes))))
            else:
                _bind(pod, target, state, placed)
                decision.bindings.append((pod, target))
        return
    already = g.assigned()
    if g.flavour == COSCHEDULING and g.min_resources and already < g.min_member:
        short = _cluster_short(g, nodes, state)
        # Unlike coscheduling's PreFilter, the minResources gap may be closed by preemption.
        if short is not None and not _preempt(pods, g.min_member - already, nodes, state, running, decision, placed):
            decision.gangs[g.key] = short
            for pod in pods:
                message = _prefilter_error(pod, len(nodes), short)
                if running is not None:
                    message = preemption.failed_message(message, pods, running, nodes)
                decision.unschedulable.append((pod, message))
            return
        if short is not None:
            decision.gangs[g.key] = f"{short}; preempting lower-priority pods to make room"
            for pod in pods:
                decision.unschedulable.append((pod, f"0/{len(nodes)} nodes are available: {short}."))
            return
    # Members are placed on a scratch copy, each seeing those placed before it (anti-affinity
    # among siblings, spread inside the gang); undone unless the gang fits.
    scratch = {name: u.copy() for name, u in state.items()}
    mark = placed.mark()
    fits: list[tuple[PodInfo, str]] = []
    failed: list[tuple[PodInfo, list[Failure]]] = []
    for pod in pods:
        target, failures = place(pod, nodes, scratch, placed)
        if target is None:
            failed.append((pod, failures))
        else:
            _bind(pod, target, scratch, placed)
            fits.append((pod, target))
    if already + len(fits) >= g.min_member:
        state.update(scratch)
        decision.bindings += fits
        decision.unschedulable += [(pod, fit_error(pod, failures, len(nodes))) for pod, failures in failed]
        if not failed:
            decision.placed_gangs.append(g.key)
        return
    placed.rollback(mark)
    first = fit_error(failed[0][0], failed[0][1], len(nodes)) if failed else ""
    need = g.min_member - already
    if _preempt(pods, need, nodes, state, running, decision, placed):
        message = f"{preemption.nominated(first)} PodGroup {g.label} is preempting lower-priority pods to make room."
        decision.gangs[g.key] = message
        decision.unschedulable += [(pod, message) for pod in pods]
        return
    if g.flavour == VOLCANO_GROUP:
        message = (
            f"{len(failed)}/{len(pods)} tasks in gang unschedulable: pod group is not ready, {len(pods)} Pending, "
            f"{g.min_member} minAvailable; Pending: {len(failed)} Unschedulable, {len(fits)} Schedulable. "
            f"Origin reason is {failed[0][0].name}: {first}"
            if failed
            else f"pod group {g.label} is not ready: {len(pods)} Pending, {g.min_member} minAvailable"
        )
    else:
        message = (
            f"{first.split(' preemption:')[0]} PodGroup {g.label} gets rejected: {need} more pod(s) must be placed "
            f"together for minMember {g.min_member}, only {len(fits)} fit."
        )
    decision.gangs[g.key] = message
    decision.unschedulable += [(pod, message) for pod in pods]
