"""The cluster as the scheduler reads it: a pod's scheduling-relevant parts (``PodInfo``, parsed
once per version of the pod), a node's (``NodeInfo``, a node that is not Ready carrying
``node.kubernetes.io/not-ready`` as the node lifecycle controller would taint it), and what the
pods bound to each node request (``Usage``), as kube-scheduler's snapshot holds them.

**Requests** are ``PodRequests``': the sum over containers, at least the largest init container
(sidecars, init containers with ``restartPolicy: Always``, add to both), limits standing in for
unset requests as API defaulting makes them. Which gang a pod joins is read here too, as its
scheduler reads it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from trainyard.api.meta import Obj
from trainyard.cluster.clients.scheduler.terms import (
    NO_TERMS,
    PodTerms,
    Selector,
    Spread,
    pod_terms,
    spread_constraints,
)
from trainyard.cluster.quantity import CPU, MEMORY, amount

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
TERMINAL = ("Succeeded", "Failed")
# What NodeResourcesFit's scoring counts for a container that requests no CPU or memory (kube's
# DefaultMilliCPURequest and DefaultMemoryRequest).
NONZERO_DEFAULTS = {CPU: 100, MEMORY: 200 * 2**20}


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
    nominated: str = ""  # status.nominatedNodeName: where preemption is making room for it
    started: str = ""  # status.startTime (a victim's start time orders preemption)
    preempted: bool = False  # carries the scheduler's DisruptionTarget (reason PreemptionByScheduler)
    labels: Mapping[str, str] = field(default_factory=dict)
    terms: PodTerms = NO_TERMS  # pod affinity and anti-affinity
    spread: tuple[Spread, ...] = ()  # topologySpreadConstraints
    # Preferred node affinity: (weight, nodeSelectorTerm).
    preferred: tuple[tuple[int, Obj], ...] = ()
    # CPU and memory as NodeResourcesFit's scoring counts them (unset requests at their defaults).
    nonzero: Mapping[str, int] = field(default_factory=dict)
    # The selector of the Services and workload controllers selecting the pod, when the scheduler
    # knows it: the system default spread constraints apply to a pod without its own.
    default_selector: Selector | None = None

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL

    @cached_property
    def shape(self) -> tuple[Any, ...]:
        """What a pod's placement depends on but its labels: pods of one template share it (and
        their verdicts, while nothing placed in between can change them: ``placement``)."""
        return (
            tuple(sorted(self.requests.items())),
            self.node_selector,
            repr(self.affinity),
            repr(self.tolerations),
            self.preemption_policy,
            self.scheduler,
            self.terms,
            self.spread,
            repr(self.preferred),
        )

    @property
    def judged(self) -> tuple[Any, ...]:
        """What a pending pod's verdict depends on: a change to it makes the pod worth trying again."""
        return (self.shape, self.priority, self.labels)

    @property
    def label_sensitive(self) -> bool:
        """Whether the pod's own labels take part in its placement (its terms or constraints may match it)."""
        return bool(self.terms or self.spread)

    @property
    def waits_for_siblings(self) -> bool:
        """Whether placing other pods can make this one fit (required pod affinity, hard spread):
        unlike resources and anti-affinity, which only fill up, a refusal does not stand."""
        return bool(self.terms.affinity) or any(c.hard for c in self.spread)


@dataclass(frozen=True)
class NodeInfo:
    name: str
    allocatable: Mapping[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Obj, ...] = ()
    unschedulable: bool = False


@dataclass
class Usage:
    """What the pods bound to one node request, and how many they are (terminal pods excluded);
    ``nonzero``: their CPU and memory as scoring counts them (``PodInfo.nonzero``)."""

    requested: Resources = field(default_factory=dict)
    pods: int = 0
    nonzero: Resources = field(default_factory=dict)

    def add(self, requests: Mapping[str, int], sign: int = 1, nonzero: Mapping[str, int] | None = None) -> None:
        for name, value in requests.items():
            self.requested[name] = self.requested.get(name, 0) + sign * value
        for name, value in (requests if nonzero is None else nonzero).items():
            if name in NONZERO_DEFAULTS:
                self.nonzero[name] = self.nonzero.get(name, 0) + sign * value
        self.pods += sign

    def add_pod(self, pod: PodInfo, sign: int = 1) -> None:
        self.add(pod.requests, sign, pod.nonzero or None)

    def copy(self) -> Usage:
        return Usage(dict(self.requested), self.pods, dict(self.nonzero))


def quantities(values: Any) -> Resources:
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
    return quantities(resources.get("limits")) | quantities(resources.get("requests"))


def add_requests(total: Resources, more: Mapping[str, int]) -> Resources:
    out = dict(total)
    for name, value in more.items():
        out[name] = out.get(name, 0) + value
    return out


def _max(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    return {name: max(a.get(name, 0), b.get(name, 0)) for name in set(a) | set(b)}


def pod_requests(spec: Obj, of: Callable[[Obj], Resources] = container_requests) -> Resources:
    """kube's ``PodRequests``: containers summed, at least each init container, plus ``overhead``
    (``of``: what one container requests)."""
    total: Resources = {}
    for container in spec.get("containers") or []:
        total = add_requests(total, of(container))
    sidecars: Resources = {}
    init_max: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = of(container)
        if container.get("restartPolicy") == "Always":
            total = add_requests(total, requests)
            sidecars = add_requests(sidecars, requests)
            step = sidecars
        else:
            step = add_requests(requests, sidecars)
        init_max = _max(init_max, step)
    total = add_requests(_max(total, init_max), quantities(spec.get("overhead")))
    return {name: value for name, value in total.items() if value > 0}


def _nonzero(container: Obj) -> Resources:
    requests = container_requests(container)
    return {**{n: v for n, v in NONZERO_DEFAULTS.items() if n not in requests}, **requests}


def nonzero_requests(spec: Obj) -> Resources:
    """CPU and memory as kube-scheduler's scoring counts them: ``PodRequests`` with each container's
    missing request at its default (``NonMissingContainerRequests``)."""
    total = pod_requests(spec, _nonzero)
    return {name: total.get(name, 0) for name in NONZERO_DEFAULTS}


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
    namespace = m.get("namespace", "")
    labels = {str(k): str(v) for k, v in (m.get("labels") or {}).items()}
    preferred = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "preferredDuringSchedulingIgnoredDuringExecution"
    )
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
        nominated=status.get("nominatedNodeName") or "",
        started=status.get("startTime") or "",
        preempted=any(
            isinstance(c, dict) and c.get("type") == "DisruptionTarget" and c.get("reason") == "PreemptionByScheduler"
            for c in status.get("conditions") or []
        ),
        labels=labels,
        terms=pod_terms(spec.get("affinity"), namespace, labels),
        spread=spread_constraints(spec.get("topologySpreadConstraints"), namespace, labels),
        preferred=tuple(
            (int(t.get("weight") or 0), t.get("preference") or {}) for t in preferred or [] if isinstance(t, dict)
        ),
        nonzero=nonzero_requests(spec),
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
        allocatable=quantities(status.get("allocatable") or status.get("capacity")),
        labels=dict((node.get("metadata") or {}).get("labels") or {}),
        taints=taints,
        unschedulable=bool(spec.get("unschedulable")),
    )


def usage(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo]) -> dict[str, Usage]:
    """What each node's bound, non-terminal pods request (the scheduler keeps this incrementally)."""
    out = {n.name: Usage() for n in nodes}
    for pod in pods:
        if pod.node_name and not pod.terminal:
            out.setdefault(pod.node_name, Usage()).add_pod(pod)
    return out
