"""Kueue's scheduler as one pure decision: which pending Workloads get quota, which are evicted.

``decide`` takes the queue configuration (ClusterQueues, LocalQueues, ResourceFlavors, the
namespaces' labels) and every Workload, and returns a ``Decision``: the Workloads to admit with
their ``status.admission`` (a flavor per resource, the usage), those to evict for a preemptor,
the pending ones with why they wait (Kueue's words: ``couldn't assign flavors to pod set worker:
insufficient unused quota for cpu in flavor default-flavor, 1 more needed``, ``LocalQueue q
doesn't exist``) and their place in line, and every queue's status (pending, reserving and
admitted counts, usage by flavor).

What it follows of Kueue (v0.14, ``pkg/scheduler``, ``pkg/scheduler/flavorassigner``,
``pkg/scheduler/preemption``), simplified where noted:

* **Order**: within a ClusterQueue, higher ``spec.priority`` first, then the earlier queued
  (creation, or the last ``Requeued`` transition). ``StrictFIFO``: a head that does not fit
  blocks the rest; ``BestEffortFIFO``: the next ones are tried. Across ClusterQueues the same
  order decides who takes a cohort's unused quota first.
* **Fit**: a Workload is admitted whole (every pod set, ``count`` pods each) or not at all. Per
  pod set and resource group, the first flavor (in the group's order) where every requested
  resource fits is taken (Kueue's default flavor fungibility: ``Borrow`` then ``TryNextFlavor``).
* **Cohorts**: a ClusterQueue may use past its ``nominalQuota`` (up to ``borrowingLimit``) what
  the other ClusterQueues of its cohort leave unused and lend (``lendingLimit``).
* **Preemption**: ``withinClusterQueue`` (``LowerPriority``, ``LowerOrNewerEqualPriority``) and
  ``reclaimWithinCohort`` (``LowerPriority``, ``Any``: workloads of other queues that borrow).
  Candidates are taken lowest priority first, the most recently admitted first, until the
  preemptor fits, then the unneeded ones are given back. Victims are evicted (``Evicted``, reason
  ``Preempted``; a Workload set ``spec.active: false`` is evicted with ``InactiveWorkload``);
  their quota counts until their jobs have stopped, so the preemptor is admitted
  in a later pass. Not followed: ``borrowWithinCohort``, fair sharing, partial admission,
  admission checks, topology-aware scheduling.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainyard.api import kueue
from trainyard.api.kueue.books import (
    Books,
    Config,
    Key,
    Usage,
    assign,
    cluster_queue_status,
    cohort_of,
    condition,
    is_true,
    key_of,
    local_queue_status,
    priority_of,
    queued_at,
    reserved_at,
    resource_groups,
    selector_matches,
    shape_of,
    usage_of,
)
from trainyard.api.meta import Obj

__all__ = [
    "Admit",
    "Config",
    "Decision",
    "Evict",
    "Facts",
    "Waiting",
    "cohort_of",
    "condition",
    "decide",
    "facts",
    "is_true",
    "queued_at",
]


@dataclass(frozen=True)
class Admit:
    key: Key
    admission: Obj


@dataclass(frozen=True)
class Evict:
    key: Key
    preemptor: Key
    message: str
    preempted_reason: str
    """``InClusterQueue`` or ``InCohortReclamation``; "" for an eviction that is no preemption."""
    reason: str = kueue.EVICTED_BY_PREEMPTION
    """The ``Evicted`` condition's reason: ``Preempted``, or ``InactiveWorkload``."""


@dataclass(frozen=True)
class Waiting:
    key: Key
    reason: str
    message: str
    cluster_queue: str = ""
    position: int = 0
    """1 for the head of its ClusterQueue's line; 0 when it is in none (a queue that does not exist)."""


@dataclass(frozen=True)
class Decision:
    admit: tuple[Admit, ...] = ()
    evict: tuple[Evict, ...] = ()
    waiting: tuple[Waiting, ...] = ()
    cluster_queue_status: Mapping[str, Obj] = field(default_factory=dict)
    local_queue_status: Mapping[Key, Obj] = field(default_factory=dict)


@dataclass(frozen=True)
class Facts:
    """What the decision reads of one Workload version: read once per version (the controller's
    informer keeps them, ``Informer.parsed``), not on every pass over a long line."""

    key: Key
    finished: bool
    reserved: bool
    admitted: bool
    evicted: bool
    active: bool
    queue: str
    owner: str
    priority: int
    queued_at: str
    shape: tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...]
    usage: Usage


def facts(wl: Obj) -> Facts:
    spec = wl.get("spec") or {}
    return Facts(
        key=key_of(wl),
        finished=is_true(wl, kueue.FINISHED),
        reserved=is_true(wl, kueue.QUOTA_RESERVED),
        admitted=is_true(wl, kueue.ADMITTED),
        evicted=is_true(wl, kueue.EVICTED),
        active=spec.get("active") is not False,
        queue=str(spec.get("queueName") or ""),
        owner=str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or ""),
        priority=priority_of(wl),
        queued_at=queued_at(wl),
        shape=shape_of(wl),
        usage=usage_of(wl),
    )


def _preemption_policy(cq: Obj) -> tuple[str, str]:
    p = (cq.get("spec") or {}).get("preemption") or {}
    return str(p.get("withinClusterQueue") or kueue.NEVER), str(p.get("reclaimWithinCohort") or kueue.NEVER)


def _candidates(books: Books, cq_name: str, wl: Obj, reserved: Mapping[Key, tuple[str, Obj]]) -> list[tuple[Key, str]]:
    """Admitted Workloads ``wl`` may preempt, in the order Kueue tries them, with the reason."""
    cq = books.config.cluster_queues[cq_name]
    within, reclaim = _preemption_policy(cq)
    mine, cohort = priority_of(wl), cohort_of(cq)
    out: list[tuple[tuple[int, int, str], Key, str]] = []
    for key, (owner, other) in reserved.items():
        if is_true(other, kueue.EVICTED):
            continue
        theirs = priority_of(other)
        if owner == cq_name:
            newer_equal = theirs == mine and queued_at(other) > queued_at(wl)
            if (within == kueue.LOWER_PRIORITY and theirs < mine) or (
                within == kueue.LOWER_OR_NEWER_EQUAL and (theirs < mine or newer_equal)
            ):
                out.append(((1, theirs, _neg(reserved_at(other))), key, kueue.IN_CLUSTER_QUEUE))
        elif cohort and cohort_of(books.config.cluster_queues[owner]) == cohort and reclaim != kueue.NEVER:
            borrowing = any(books.borrowed(owner, k) > 0 for k in usage_of(other))
            if borrowing and (reclaim == kueue.ANY or theirs < mine):
                out.append(((0, theirs, _neg(reserved_at(other))), key, kueue.IN_COHORT_RECLAIM))
    out.sort(key=lambda t: t[0])
    return [(key, reason) for _, key, reason in out]


def _neg(text: str) -> str:
    """Sorts later timestamps first (most recently admitted preempted first)."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def _try_preempt(
    books: Books, cq_name: str, wl: Obj, reserved: Mapping[Key, tuple[str, Obj]]
) -> list[tuple[Key, str]] | None:
    """The victims that make room for ``wl``, or None when no set of candidates does."""
    chosen: list[tuple[Key, str]] = []
    for key, reason in _candidates(books, cq_name, wl, reserved):
        owner, victim = reserved[key]
        books.add(owner, usage_of(victim), -1)
        chosen.append((key, reason))
        if assign(books, cq_name, wl)[0] is not None:
            break
    else:
        for key, _ in chosen:
            owner, victim = reserved[key]
            books.add(owner, usage_of(victim))
        return None
    for key, reason in list(reversed(chosen)):  # give back the victims not needed after all
        owner, victim = reserved[key]
        books.add(owner, usage_of(victim))
        if assign(books, cq_name, wl)[0] is None:
            books.add(owner, usage_of(victim), -1)
        else:
            chosen.remove((key, reason))
    for key, _ in chosen:
        owner, victim = reserved[key]
        books.add(owner, usage_of(victim))
    return chosen


def _preempt_message(wl: Obj, cq: str, owner: str, reason: str) -> str:
    uid = (wl.get("metadata") or {}).get("uid", "")
    job_uid = ((wl.get("metadata") or {}).get("labels") or {}).get(kueue.JOB_UID_LABEL, "")
    why = "prioritization in the ClusterQueue" if reason == kueue.IN_CLUSTER_QUEUE else "reclamation within the cohort"
    return (
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to {why}; "
        f"preemptor path: /{cq}; preemptee path: /{owner}"
    )


def decide(config: Config, workloads: Iterable[Obj], facts_of: Callable[[Obj], Facts] = facts) -> Decision:
    books = Books(config)
    reserved: dict[Key, tuple[str, Obj]] = {}
    pending: dict[str, list[tuple[Facts, Obj]]] = {}
    waiting: list[Waiting] = []
    deactivated: list[Evict] = []
    counts: dict[str, dict[str, int]] = {
        n: {"pending": 0, "reserving": 0, "admitted": 0} for n in config.cluster_queues
    }
    lq_counts: dict[Key, dict[str, int]] = {
        k: {"pending": 0, "reserving": 0, "admitted": 0} for k in config.local_queues
    }
    missing_flavors = {
        name: sorted({f for _, names in resource_groups(cq) for f in names} - config.flavors)
        for name, cq in config.cluster_queues.items()
    }
    selectors = {name: (cq.get("spec") or {}).get("namespaceSelector") for name, cq in config.cluster_queues.items()}
    matches: dict[tuple[str, str], bool] = {}
    for wl in workloads:
        f = facts_of(wl)
        if f.finished:
            continue
        key = f.key
        lq_key = (key[0], f.queue)
        if f.reserved:
            if not f.active and not f.evicted:
                deactivated.append(Evict(key, key, "The workload is deactivated", "", kueue.EVICTED_INACTIVE))
            reserved[key] = (f.owner, wl)
            books.add(f.owner, f.usage)
            for book in (counts.get(f.owner), lq_counts.get(lq_key)):
                if book is not None:
                    book["reserving"] += 1
                    book["admitted"] += f.admitted
            continue
        if not f.active:
            continue
        lq = config.local_queues.get(lq_key)
        if lq is None:
            waiting.append(Waiting(key, kueue.INADMISSIBLE, f"LocalQueue {lq_key[1]} doesn't exist"))
            continue
        lq_counts[lq_key]["pending"] += 1
        cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
        if cq_name not in config.cluster_queues:
            waiting.append(Waiting(key, kueue.INADMISSIBLE, f"ClusterQueue {cq_name} doesn't exist"))
            continue
        counts[cq_name]["pending"] += 1
        if (cq_name, key[0]) not in matches:
            labels = config.namespace_labels.get(key[0], {})
            matches[(cq_name, key[0])] = selector_matches(selectors[cq_name], labels)
        if not matches[(cq_name, key[0])]:
            waiting.append(
                Waiting(key, kueue.INADMISSIBLE, "Workload namespace doesn't match ClusterQueue selector", cq_name)
            )
            continue
        if missing_flavors[cq_name]:
            waiting.append(Waiting(key, kueue.INADMISSIBLE, f"ClusterQueue {cq_name} is inactive", cq_name))
            continue
        pending.setdefault(cq_name, []).append((f, wl))

    def order(f: Facts) -> tuple[int, str, str]:
        return -f.priority, f.queued_at, f.key[1]

    line: list[tuple[tuple[int, str, str], str, Facts, Obj]] = []
    for cq_name, items in pending.items():
        items.sort(key=lambda pair: order(pair[0]))
        line.extend((order(f), cq_name, f, wl) for f, wl in items)
    line.sort(key=lambda t: t[0])
    positions = {f.key: i + 1 for items in pending.values() for i, (f, _) in enumerate(items)}
    admitted: list[Admit] = []
    evicted: list[Evict] = []
    blocked: dict[str, Key] = {}
    stopping = [k for k, (_, other) in reserved.items() if facts_of(other).evicted]
    # Room only shrinks during a pass, so what did not fit does not fit later in it either: a long
    # line of like workloads costs one fit, not one each.
    unfit: dict[tuple[str, Any], str] = {}
    for _, cq_name, f, wl in line:
        key = f.key
        cq = config.cluster_queues[cq_name]
        strict = (cq.get("spec") or {}).get("queueingStrategy") == kueue.STRICT_FIFO
        if cq_name in blocked:
            head = blocked[cq_name]
            waiting.append(
                Waiting(
                    key,
                    kueue.PENDING,
                    f"Waiting behind workload {head[0]}/{head[1]} in ClusterQueue {cq_name} (StrictFIFO)",
                    cq_name,
                    positions[key],
                )
            )
            continue
        shape = (cq_name, f.shape)
        usage: Usage = {}
        if shape in unfit:
            admission, why = None, unfit[shape]
        else:
            admission, usage, why = assign(books, cq_name, wl)
        if admission is None:
            unfit[shape] = why
        if admission is not None:
            books.add(cq_name, usage)
            admitted.append(Admit(key, admission))
            counts[cq_name]["pending"] -= 1
            counts[cq_name]["reserving"] += 1
            counts[cq_name]["admitted"] += 1
            lq_key = (key[0], f.queue)
            lq_counts[lq_key]["pending"] -= 1
            lq_counts[lq_key]["reserving"] += 1
            lq_counts[lq_key]["admitted"] += 1
            continue
        # Room already being made for it (its victims still stopping) is not made twice.
        freed_fits = False
        if stopping:
            for k in stopping:
                books.add(reserved[k][0], usage_of(reserved[k][1]), -1)
            freed_fits = assign(books, cq_name, wl)[0] is not None
            for k in stopping:
                books.add(reserved[k][0], usage_of(reserved[k][1]))
        may_preempt = _preemption_policy(cq) != (kueue.NEVER, kueue.NEVER)
        victims = None if freed_fits or not may_preempt else _try_preempt(books, cq_name, wl, reserved)
        if victims:
            for victim_key, reason in victims:
                owner, victim = reserved[victim_key]
                evicted.append(Evict(victim_key, key, _preempt_message(wl, cq_name, owner, reason), reason))
                stopping.append(victim_key)
                reserved[victim_key] = (
                    owner,
                    {
                        **victim,
                        "status": {
                            **(victim.get("status") or {}),
                            "conditions": [{"type": kueue.EVICTED, "status": "True"}],
                        },
                    },
                )
        if victims or freed_fits:
            count = len(victims or stopping)
            waiting.append(
                Waiting(key, kueue.PENDING, f"Pending the preemption of {count} workload(s)", cq_name, positions[key])
            )
        else:
            waiting.append(Waiting(key, kueue.PENDING, why, cq_name, positions[key]))
        if strict or victims or freed_fits:
            blocked[cq_name] = key
    return Decision(
        admit=tuple(admitted),
        evict=(*deactivated, *evicted),
        waiting=tuple(waiting),
        cluster_queue_status={
            name: cluster_queue_status(books, name, counts[name], missing_flavors[name])
            for name in config.cluster_queues
        },
        local_queue_status={
            k: local_queue_status(k, lq, lq_counts[k], config, books) for k, lq in config.local_queues.items()
        },
    )
