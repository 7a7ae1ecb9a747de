"""Where pods go: the scheduler's decision as a pure function, in kube-scheduler's terms and words.

``schedule`` takes the nodes (with what their bound pods already request), the pending pods, the
pod groups those pods belong to and the priority classes, and returns the bindings to make, the
verdict for every pod that cannot be placed (worded as kube-scheduler's ``FailedScheduling``
message), the Volcano pod groups to enqueue and a verdict per gang that could not be placed.

It follows kube-scheduler v1.32's default profile for what it implements:

* **Filters**, in the default plugin order, the first failing one giving a node's reasons:
  ``NodeUnschedulable`` (``node(s) were unschedulable``), ``TaintToleration`` (NoSchedule and
  NoExecute taints; ``node(s) had untolerated taint {key: value}``; a node that is not Ready
  carries ``node.kubernetes.io/not-ready`` as the node lifecycle controller would taint it),
  ``NodeAffinity`` (``nodeSelector`` and required node affinity with In, NotIn, Exists,
  DoesNotExist, Gt and Lt over labels and ``metadata.name``; ``node(s) didn't match Pod's node
  affinity/selector``) and ``NodeResourcesFit`` (``Too many pods``, ``Insufficient <resource>``).
* **Requests** as ``PodRequests``: the sum over containers, at least the largest init container
  (sidecars, init containers with ``restartPolicy: Always``, add to both), limits standing in for
  unset requests as API defaulting makes them.
* **Order**: higher ``spec.priority`` first, then older first (a gang by its PodGroup's age).
* **Scoring**: the least allocated feasible node (CPU and memory), then by name.
* **Preemption** is not implemented: the message's ``preemption:`` part says what the default
  preemption plugin says when it finds no victims, and nothing is evicted.

Gangs are all-or-nothing: the pending members of a group are placed together on a scratch copy
of the nodes and bound only if, with the members already placed, at least ``minMember`` fit
(scheduler-plugins' coscheduling: bound and running members; Volcano: also succeeded ones). A
gang that does not fit binds nothing and reserves nothing, so two gangs cannot deadlock. Volcano
groups are first *enqueued* (``Pending`` → ``Inqueue``) when their ``minResources`` fit the
cluster's free resources less what other enqueued groups still need; only enqueued groups are
placed. Pure: no I/O, no clock (``now`` is not needed: time-based rules live in ``gangs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from trainyard.cluster.quantity import CPU, MEMORY, PODS, amount, format_amount

Obj = dict[str, Any]
Resources = dict[str, int]
GroupKey = tuple[str, str, str]  # (flavour, namespace, name)

DEFAULT_SCHEDULER = "default-scheduler"
VOLCANO = "volcano"
SCHEDULER_PLUGINS = "scheduler-plugins-scheduler"
SCHEDULERS = (DEFAULT_SCHEDULER, SCHEDULER_PLUGINS, VOLCANO)
COSCHEDULING: Literal["scheduler-plugins"] = "scheduler-plugins"
VOLCANO_GROUP: Literal["volcano"] = "volcano"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
NOT_READY_TAINT = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
TERMINAL = ("Succeeded", "Failed")
# Volcano phases in which a group's pods may be placed.
VOLCANO_PLACEABLE = ("Inqueue", "Running", "Unknown")

# Filter reasons, kube-scheduler v1.32's words.
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
TOO_MANY_PODS = "Too many pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


# -- what the scheduler reads of pods and nodes ----------------------------------------------------


@dataclass(frozen=True)
class PodInfo:
    """The parts of a pod the scheduler reads, parsed once per version of the pod."""

    uid: str
    namespace: str
    name: str
    requests: Mapping[str, int]
    priority: int = 0
    created: str = ""
    scheduler: str = DEFAULT_SCHEDULER
    node_name: str = ""
    phase: str = "Pending"
    deleting: bool = False
    node_selector: tuple[tuple[str, str], ...] = ()
    # None: no required node affinity; otherwise its nodeSelectorTerms (ORed).
    affinity: tuple[Obj, ...] | None = None
    tolerations: tuple[Obj, ...] = ()
    group: GroupKey | None = None
    preemption_policy: str = "PreemptLowerPriority"
    owners: tuple[str, ...] = ()
    gated: bool = False  # spec.schedulingGates: not to be scheduled yet

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    @cached_property
    def shape(self) -> tuple[Any, ...]:
        """What a pod's placement depends on: pods of one template share it (and their verdicts)."""
        return (
            tuple(sorted(self.requests.items())),
            self.node_selector,
            repr(self.affinity),
            repr(self.tolerations),
            self.preemption_policy,
            self.scheduler,
        )


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Obj, ...] = ()
    unschedulable: bool = False


@dataclass
class Usage:
    """What the pods bound to one node request, and how many they are (terminal pods excluded)."""

    requested: Resources = field(default_factory=dict)
    pods: int = 0

    def add(self, requests: Mapping[str, int], sign: int = 1) -> None:
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, 0) + sign * value
        self.pods += sign

    def copy(self) -> Usage:
        return Usage(dict(self.requested), self.pods)


def _quantities(values: Any) -> Resources:
    out: Resources = {}
    if not isinstance(values, dict):
        return out
    for name, text in values.items():
        try:
            out[name] = amount(name, text)
        except (ValueError, TypeError):
            continue  # admission refuses malformed quantities on a cluster; here they count as unset
    return out


def container_requests(container: Obj) -> Resources:
    """A container's requests, its limits standing in for unset requests (as API defaulting does)."""
    resources = container.get("resources") or {}
    return _quantities(resources.get("limits")) | _quantities(resources.get("requests"))


def _add(total: Resources, more: Mapping[str, int]) -> Resources:
    out = dict(total)
    for name, value in more.items():
        out[name] = out.get(name, 0) + value
    return out


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in set(a) | set(b)}


def pod_requests(spec: Obj) -> Resources:
    """kube's ``PodRequests``: containers summed, at least each init container, plus ``overhead``."""
    total: Resources = {}
    for container in spec.get("containers") or []:
        total = _add(total, container_requests(container))
    sidecars: Resources = {}
    init_max: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = container_requests(container)
        if container.get("restartPolicy") == "Always":
            total = _add(total, requests)
            sidecars = _add(sidecars, requests)
            step = sidecars
        else:
            step = _add(requests, sidecars)
        init_max = _max(init_max, step)
    total = _add(_max(total, init_max), _quantities(spec.get("overhead")))
    return {name: value for name, value in total.items() if value > 0}


def group_of(pod: Obj, scheduler: str) -> GroupKey | None:
    """The gang a pod joins, as its scheduler reads it (a label for coscheduling, an annotation for Volcano)."""
    m = pod.get("metadata") or {}
    if scheduler == VOLCANO:
        name = (m.get("annotations") or {}).get(VOLCANO_GROUP_ANNOTATION)
        return (VOLCANO_GROUP, m.get("namespace", ""), name) if name else None
    name = (m.get("labels") or {}).get(POD_GROUP_LABEL)
    return (COSCHEDULING, m.get("namespace", ""), name) if name else None


def pod_info(pod: Obj) -> PodInfo:
    m, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    scheduler = spec.get("schedulerName") or DEFAULT_SCHEDULER
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    terms = None
    if isinstance(affinity, dict):
        terms = tuple(t for t in affinity.get("nodeSelectorTerms") or [] if isinstance(t, dict))
    selector = spec.get("nodeSelector") or {}
    return PodInfo(
        uid=m.get("uid", ""),
        namespace=m.get("namespace", ""),
        name=m.get("name", ""),
        requests=pod_requests(spec),
        priority=int(spec.get("priority") or 0),
        created=m.get("creationTimestamp") or "",
        scheduler=scheduler,
        node_name=spec.get("nodeName") or "",
        phase=status.get("phase") or "Pending",
        deleting=bool(m.get("deletionTimestamp")),
        node_selector=tuple(sorted((str(k), str(v)) for k, v in selector.items())),
        affinity=terms,
        tolerations=tuple(t for t in spec.get("tolerations") or [] if isinstance(t, dict)),
        group=group_of(pod, scheduler),
        preemption_policy=spec.get("preemptionPolicy") or "PreemptLowerPriority",
        owners=tuple(sorted(r.get("name", "") for r in m.get("ownerReferences") or [] if isinstance(r, dict))),
        gated=bool(spec.get("schedulingGates")),
    )


def _ready(node: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (node.get("status") or {}).get("conditions") or []
        if isinstance(c, dict)
    )


def node_info(node: Obj) -> NodeInfo:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    taints = tuple(t for t in spec.get("taints") or [] if isinstance(t, dict))
    if not _ready(node) and not any(t.get("key") == NOT_READY_TAINT["key"] for t in taints):
        taints += (NOT_READY_TAINT,)
    return NodeInfo(
        name=(node.get("metadata") or {}).get("name", ""),
        allocatable=_quantities(status.get("allocatable") or status.get("capacity")),
        labels=dict((node.get("metadata") or {}).get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
    )


def usage(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo]) -> dict[str, Usage]:
    """What each node's bound, non-terminal pods request (the scheduler keeps this incrementally)."""
    out = {n.name: Usage() for n in nodes}
    for pod in pods:
        if pod.node_name and not pod.terminal:
            out.setdefault(pod.node_name, Usage()).add(pod.requests)
    return out


# -- filters -----------------------------------------------------------------------------------------


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
    return _quantities(spec.get("minResources"))


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
                    bound = _add(bound, p.requests)
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
) -> Decision:
    """Decide where ``pending`` pods go; ``used`` is not modified (the decision says what to bind).

    ``pending`` are unbound, undeleted pods of the schedulers served here; ``groups`` holds every
    group any of them names plus the Volcano groups waiting to be enqueued or promised resources.
    """
    decision = Decision()
    state = {n.name: (used[n.name].copy() if n.name in used else Usage()) for n in nodes}
    placeable = _enqueue(groups, nodes, state, priorities, decision)
    # Pods of one shape that failed once fail again: usage only grows within one decision.
    refused: dict[tuple[Any, ...], str] = {}
    for unit in _units(pending, groups, priorities):
        if unit.group is None:
            pod = unit.pods[0]
            if pod.shape in refused:
                decision.unschedulable.append((pod, refused[pod.shape]))
                continue
            target, failures = place(pod, nodes, state)
            if target is None:
                refused[pod.shape] = fit_error(pod, failures, len(nodes))
                decision.unschedulable.append((pod, refused[pod.shape]))
            else:
                state[target].add(pod.requests)
                decision.bindings.append((pod, target))
            continue
        _schedule_gang(unit.group, unit.pods, nodes, state, placeable, decision)
    return decision


def _schedule_gang(
    g: Group,
    pods: Sequence[PodInfo],
    nodes: Sequence[NodeInfo],
    state: dict[str, Usage],
    placeable: set[GroupKey],
    decision: Decision,
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
            target, failures = place(pod, nodes, state)
            if target is None:
                decision.unschedulable.append((pod, fit_error(pod, failures, len(nodes))))
            else:
                state[target].add(pod.requests)
                decision.bindings.append((pod, target))
        return
    already = g.assigned()
    if g.flavour == COSCHEDULING and g.min_resources and already < g.min_member:
        short = _cluster_short(g, nodes, state)
        if short is not None:
            decision.gangs[g.key] = short
            for pod in pods:
                decision.unschedulable.append((pod, _prefilter_error(pod, len(nodes), short)))
            return
    scratch = {name: u.copy() for name, u in state.items()}
    placed: list[tuple[PodInfo, str]] = []
    failed: list[tuple[PodInfo, list[Failure]]] = []
    for pod in pods:
        target, failures = place(pod, nodes, scratch)
        if target is None:
            failed.append((pod, failures))
        else:
            scratch[target].add(pod.requests)
            placed.append((pod, target))
    if already + len(placed) >= g.min_member:
        state.update(scratch)
        decision.bindings += placed
        decision.unschedulable += [(pod, fit_error(pod, failures, len(nodes))) for pod, failures in failed]
        if not failed:
            decision.placed_gangs.append(g.key)
        return
    first = fit_error(failed[0][0], failed[0][1], len(nodes)) if failed else ""
    need = g.min_member - already
    if g.flavour == VOLCANO_GROUP:
        message = (
            f"{len(failed)}/{len(pods)} tasks in gang unschedulable: pod group is not ready, {len(pods)} Pending, "
            f"{g.min_member} minAvailable; Pending: {len(failed)} Unschedulable, {len(placed)} Schedulable. "
            f"Origin reason is {failed[0][0].name}: {first}"
            if failed
            else f"pod group {g.label} is not ready: {len(pods)} Pending, {g.min_member} minAvailable"
        )
    else:
        message = (
            f"{first.split(' preemption:')[0]} PodGroup {g.label} gets rejected: {need} more pod(s) must be placed "
            f"together for minMember {g.min_member}, only {len(placed)} fit."
        )
    decision.gangs[g.key] = message
    decision.unschedulable += [(pod, message) for pod in pods]
