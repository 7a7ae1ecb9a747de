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
from trainyard.api.kueue.workloads import Amounts, amount, fmt, podset_totals
from trainyard.api.meta import Obj

Key = tuple[str, str]
INFINITE = Decimal("Infinity")
Usage = dict[tuple[str, str], Decimal]
"""(flavor, resource) → amount."""


@dataclass(frozen=True)
class Config:
    cluster_queues: Mapping[str, Obj]
    local_queues: Mapping[Key, Obj]
    flavors: frozenset[str]
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


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


def _key(obj: Obj) -> Key:
    m = obj.get("metadata") or {}
    return str(m.get("namespace") or ""), str(m.get("name") or "")


def condition(obj: Obj, type_: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def is_true(obj: Obj, type_: str) -> bool:
    found = condition(obj, type_)
    return found is not None and found.get("status") == "True"


def _priority(wl: Obj) -> int:
    value = (wl.get("spec") or {}).get("priority")
    return value if isinstance(value, int) else 0


def queued_at(wl: Obj) -> str:
    requeued = condition(wl, kueue.REQUEUED)
    if requeued is not None and requeued.get("status") == "True" and requeued.get("lastTransitionTime"):
        return str(requeued["lastTransitionTime"])
    return str((wl.get("metadata") or {}).get("creationTimestamp") or "")


def _reserved_at(wl: Obj) -> str:
    found = condition(wl, kueue.QUOTA_RESERVED)
    return str((found or {}).get("lastTransitionTime") or "")


def cohort_of(cq: Obj) -> str:
    spec = cq.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _quotas(cq: Obj) -> dict[tuple[str, str], Obj]:
    out = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                out[(str(flavor.get("name")), str(res.get("name")))] = res
    return out


def _groups(cq: Obj) -> list[tuple[list[str], list[str]]]:
    """Each resource group as (covered resources, flavor names in order)."""
    return [
        ([str(r) for r in g.get("coveredResources") or []], [str(f.get("name")) for f in g.get("flavors") or []])
        for g in (cq.get("spec") or {}).get("resourceGroups") or []
    ]


def _usage_of(wl: Obj) -> Usage:
    """What an admitted Workload holds, from its ``status.admission``."""
    out: Usage = {}
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for res, quantity in (psa.get("resourceUsage") or {}).items():
            k = (str(flavors.get(res, "")), str(res))
            out[k] = out.get(k, Decimal(0)) + amount(quantity)
    return out


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return False  # Kueue: a nil namespaceSelector matches nothing
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        op, key, values = expr.get("operator"), expr.get("key"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


class _Books:
    """Usage by ClusterQueue, and what each may still take (its own quota, then its cohort's)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.quotas = {name: _quotas(cq) for name, cq in config.cluster_queues.items()}
        self.used: dict[str, Usage] = {name: {} for name in config.cluster_queues}
        self.members: dict[str, list[str]] = {}
        for name, cq in config.cluster_queues.items():
            if cohort_of(cq):
                self.members.setdefault(cohort_of(cq), []).append(name)

    def add(self, cq: str, usage: Usage, sign: int = 1) -> None:
        book = self.used.setdefault(cq, {})
        for k, v in usage.items():
            book[k] = book.get(k, Decimal(0)) + sign * v

    def _limits(self, cq: str, k: tuple[str, str]) -> tuple[Decimal, Decimal, Decimal]:
        """(nominal, borrowing limit, lendable) of one flavor/resource of ``cq``."""
        quota = self.quotas.get(cq, {}).get(k)
        if quota is None:
            return Decimal(0), Decimal(0), Decimal(0)
        nominal = amount(quota.get("nominalQuota"))
        borrow = amount(quota["borrowingLimit"]) if quota.get("borrowingLimit") is not None else INFINITE
        lend = amount(quota["lendingLimit"]) if quota.get("lendingLimit") is not None else nominal
        return nominal, borrow, min(lend, nominal)

    def room(self, cq: str, k: tuple[str, str]) -> Decimal:
        """How much more of ``k`` ``cq`` may take now."""
        nominal, borrow, _ = self._limits(cq, k)
        used = self.used.get(cq, {}).get(k, Decimal(0))
        cohort = cohort_of(self.config.cluster_queues[cq])
        if not cohort:
            return nominal - used
        own = nominal + borrow - used
        # The cohort's pool: what every member lends, less what members use past what they keep.
        pool = Decimal(0)
        for member in self.members.get(cohort, []):
            m_nominal, _, m_lend = self._limits(member, k)
            kept = m_nominal - m_lend
            pool += m_lend - max(Decimal(0), self.used.get(member, {}).get(k, Decimal(0)) - kept)
        _, _, lend = self._limits(cq, k)
        kept_here = nominal - lend
        return min(own, max(Decimal(0), kept_here - used) + pool)

    def borrowed(self, cq: str, k: tuple[str, str]) -> Decimal:
        nominal, _, _ = self._limits(cq, k)
        return max(Decimal(0), self.used.get(cq, {}).get(k, Decimal(0)) - nominal)


def _assign(books: _Books, cq_name: str, wl: Obj) -> tuple[Obj | None, Usage, str]:
    """The admission of ``wl`` in ``cq_name`` if it fits now: (admission, usage, why not)."""
    cq = books.config.cluster_queues[cq_name]
    groups = _groups(cq)
    assignments: list[Obj] = []
    total: Usage = {}
    problems: list[str] = []
    for podset in (wl.get("spec") or {}).get("podSets") or []:
        name = str(podset.get("name") or "main")
        needs: Amounts = podset_totals(podset)
        flavors: dict[str, str] = {}
        why: list[str] = []
        for res in needs:
            if not any(res in covered for covered, _ in groups):
                why.append(f"resource {res} unavailable in ClusterQueue")
        for covered, flavor_names in groups:
            wanted = {r: v for r, v in needs.items() if r in covered}
            if not wanted:
                continue
            chosen = None
            tried: list[str] = []
            for flavor in flavor_names:
                short = [
                    f"insufficient unused quota for {r} in flavor {flavor}, "
                    f"{fmt(r, v + total.get((flavor, r), Decimal(0)) - books.room(cq_name, (flavor, r)))} more needed"
                    for r, v in wanted.items()
                    if v + total.get((flavor, r), Decimal(0)) > books.room(cq_name, (flavor, r))
                ]
                if not short:
                    chosen = flavor
                    break
                tried.extend(short)
            if chosen is None:
                why.extend(tried)
                continue
            for r, v in wanted.items():
                flavors[r] = chosen
                total[(chosen, r)] = total.get((chosen, r), Decimal(0)) + v
        if why:
            problems.append(f"couldn't assign flavors to pod set {name}: {', '.join(why)}")
            continue
        assignments.append(
            {
                "name": name,
                "flavors": flavors,
                "resourceUsage": {r: fmt(r, v) for r, v in needs.items()},
                "count": podset.get("count", 1),
            }
        )
    if problems:
        return None, {}, "; ".join(problems)
    return {"clusterQueue": cq_name, "podSetAssignments": assignments}, total, ""


def _shape(wl: Obj) -> tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...]:
    """What a Workload asks for, as a key: pod set names and their total requests."""
    return tuple(
        (str(ps.get("name") or "main"), tuple(sorted(podset_totals(ps).items())))
        for ps in (wl.get("spec") or {}).get("podSets") or []
    )


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
        key=_key(wl),
        finished=is_true(wl, kueue.FINISHED),
        reserved=is_true(wl, kueue.QUOTA_RESERVED),
        admitted=is_true(wl, kueue.ADMITTED),
        evicted=is_true(wl, kueue.EVICTED),
        active=spec.get("active") is not False,
        queue=str(spec.get("queueName") or ""),
        owner=str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue") or ""),
        priority=_priority(wl),
        queued_at=queued_at(wl),
        shape=_shape(wl),
        usage=_usage_of(wl),
    )


def _preemption_policy(cq: Obj) -> tuple[str, str]:
    p = (cq.get("spec") or {}).get("preemption") or {}
    return str(p.get("withinClusterQueue") or kueue.NEVER), str(p.get("reclaimWithinCohort") or kueue.NEVER)


def _candidates(books: _Books, cq_name: str, wl: Obj, reserved: Mapping[Key, tuple[str, Obj]]) -> list[tuple[Key, str]]:
    """Admitted Workloads ``wl`` may preempt, in the order Kueue tries them, with the reason."""
    cq = books.config.cluster_queues[cq_name]
    within, reclaim = _preemption_policy(cq)
    mine, cohort = _priority(wl), cohort_of(cq)
    out: list[tuple[tuple[int, int, str], Key, str]] = []
    for key, (owner, other) in reserved.items():
        if is_true(other, kueue.EVICTED):
            continue
        theirs = _priority(other)
        if owner == cq_name:
            newer_equal = theirs == mine and queued_at(other) > queued_at(wl)
            if (within == kueue.LOWER_PRIORITY and theirs < mine) or (
                within == kueue.LOWER_OR_NEWER_EQUAL and (theirs < mine or newer_equal)
            ):
                out.append(((1, theirs, _neg(_reserved_at(other))), key, kueue.IN_CLUSTER_QUEUE))
        elif cohort and cohort_of(books.config.cluster_queues[owner]) == cohort and reclaim != kueue.NEVER:
            borrowing = any(books.borrowed(owner, k) > 0 for k in _usage_of(other))
            if borrowing and (reclaim == kueue.ANY or theirs < mine):
                out.append(((0, theirs, _neg(_reserved_at(other))), key, kueue.IN_COHORT_RECLAIM))
    out.sort(key=lambda t: t[0])
    return [(key, reason) for _, key, reason in out]


def _neg(text: str) -> str:
    """Sorts later timestamps first (most recently admitted preempted first)."""
    return "".join(chr(0x10FFFF - ord(c)) for c in text)


def _try_preempt(
    books: _Books, cq_name: str, wl: Obj, reserved: Mapping[Key, tuple[str, Obj]]
) -> list[tuple[Key, str]] | None:
    """The victims that make room for ``wl``, or None when no set of candidates does."""
    chosen: list[tuple[Key, str]] = []
    for key, reason in _candidates(books, cq_name, wl, reserved):
        owner, victim = reserved[key]
        books.add(owner, _usage_of(victim), -1)
        chosen.append((key, reason))
        if _assign(books, cq_name, wl)[0] is not None:
            break
    else:
        for key, _ in chosen:
            owner, victim = reserved[key]
            books.add(owner, _usage_of(victim))
        return None
    for key, reason in list(reversed(chosen)):  # give back the victims not needed after all
        owner, victim = reserved[key]
        books.add(owner, _usage_of(victim))
        if _assign(books, cq_name, wl)[0] is None:
            books.add(owner, _usage_of(victim), -1)
        else:
            chosen.remove((key, reason))
    for key, _ in chosen:
        owner, victim = reserved[key]
        books.add(owner, _usage_of(victim))
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
    books = _Books(config)
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
        name: sorted({f for _, names in _groups(cq) for f in names} - config.flavors)
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
            matches[(cq_name, key[0])] = _selector_matches(selectors[cq_name], labels)
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
            admission, usage, why = _assign(books, cq_name, wl)
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
                books.add(reserved[k][0], _usage_of(reserved[k][1]), -1)
            freed_fits = _assign(books, cq_name, wl)[0] is not None
            for k in stopping:
                books.add(reserved[k][0], _usage_of(reserved[k][1]))
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
            name: _cq_status(books, name, counts[name], missing_flavors[name]) for name in config.cluster_queues
        },
        local_queue_status={k: _lq_status(k, lq, lq_counts[k], config, books) for k, lq in config.local_queues.items()},
    )


def _flavor_usage(books: _Books, name: str, borrowed: bool = True) -> list[Obj]:
    out = []
    for group_resources, flavor_names in _groups(books.config.cluster_queues[name]):
        for flavor in flavor_names:
            resources = []
            for res in group_resources:
                entry: Obj = {"name": res, "total": fmt(res, books.used.get(name, {}).get((flavor, res), Decimal(0)))}
                if borrowed:
                    entry["borrowed"] = fmt(res, books.borrowed(name, (flavor, res)))
                resources.append(entry)
            out.append({"name": flavor, "resources": resources})
    return out


def _cq_status(books: _Books, name: str, counts: Mapping[str, int], missing: list[str]) -> Obj:
    usage = _flavor_usage(books, name)
    if missing:
        active = {
            "type": "Active",
            "status": "False",
            "reason": "FlavorNotFound",
            "message": f"Can't admit new workloads: references missing ResourceFlavor(s): {','.join(missing)}.",
        }
    else:
        active = {"type": "Active", "status": "True", "reason": "Ready", "message": "Can admit new workloads"}
    return {
        "pendingWorkloads": counts["pending"],
        "reservingWorkloads": counts["reserving"],
        "admittedWorkloads": counts["admitted"],
        "flavorsReservation": usage,
        "flavorsUsage": usage,
        "conditions": [active],
    }


def _lq_status(key: Key, lq: Obj, counts: Mapping[str, int], config: Config, books: _Books) -> Obj:
    cq_name = str((lq.get("spec") or {}).get("clusterQueue") or "")
    if cq_name in config.cluster_queues:
        active = {
            "type": "Active",
            "status": "True",
            "reason": "Ready",
            "message": "Can submit new workloads to localQueue",
        }
    else:
        active = {
            "type": "Active",
            "status": "False",
            "reason": "ClusterQueueDoesNotExist",
            "message": "Can't submit new workloads to clusterQueue",
        }
    return {
        "pendingWorkloads": counts["pending"],
        "reservingWorkloads": counts["reserving"],
        "admittedWorkloads": counts["admitted"],
        "conditions": [active],
    }
