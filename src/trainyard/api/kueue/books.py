"""The books of Kueue's decision: what a Workload and a ClusterQueue say, and the quota left.

Readers of a Workload (its key, conditions, priority, when it was queued, its usage from
``status.admission``) and of a ClusterQueue (cohort, resource groups, quotas), ``Books`` (usage by
ClusterQueue and the room each has left, its own quota first, then its cohort's), ``assign``
(Kueue's flavor assignment: the first flavor of each resource group where every requested
resource fits) and the queues' status as Kueue writes it. Pure; ``admission`` decides with them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainyard.api import kueue
from trainyard.api.kueue.workloads import Amounts, amount, fmt, podset_totals
from trainyard.api.labels import selector_matches as label_selector_matches
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


def key_of(obj: Obj) -> Key:
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


def priority_of(wl: Obj) -> int:
    value = (wl.get("spec") or {}).get("priority")
    return value if isinstance(value, int) else 0


def queued_at(wl: Obj) -> str:
    requeued = condition(wl, kueue.REQUEUED)
    if requeued is not None and requeued.get("status") == "True" and requeued.get("lastTransitionTime"):
        return str(requeued["lastTransitionTime"])
    return str((wl.get("metadata") or {}).get("creationTimestamp") or "")


def reserved_at(wl: Obj) -> str:
    found = condition(wl, kueue.QUOTA_RESERVED)
    return str((found or {}).get("lastTransitionTime") or "")


def cohort_of(cq: Obj) -> str:
    spec = cq.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def quotas_of(cq: Obj) -> dict[tuple[str, str], Obj]:
    out = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                out[(str(flavor.get("name")), str(res.get("name")))] = res
    return out


def nominal_quotas(cq: Obj) -> dict[tuple[str, str], Decimal]:
    """(flavor, resource) → ``nominalQuota``, in the ClusterQueue's order."""
    return {k: amount(q.get("nominalQuota")) for k, q in quotas_of(cq).items()}


def resource_groups(cq: Obj) -> list[tuple[list[str], list[str]]]:
    """Each resource group as (covered resources, flavor names in order)."""
    return [
        ([str(r) for r in g.get("coveredResources") or []], [str(f.get("name")) for f in g.get("flavors") or []])
        for g in (cq.get("spec") or {}).get("resourceGroups") or []
    ]


def usage_of(wl: Obj) -> Usage:
    """What an admitted Workload holds, from its ``status.admission``."""
    out: Usage = {}
    for psa in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for res, quantity in (psa.get("resourceUsage") or {}).items():
            k = (str(flavors.get(res, "")), str(res))
            out[k] = out.get(k, Decimal(0)) + amount(quantity)
    return out


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A ClusterQueue's ``namespaceSelector``: Kueue's nil selector matches no namespace."""
    return selector is not None and label_selector_matches(selector, labels)


class Books:
    """Usage by ClusterQueue, and what each may still take (its own quota, then its cohort's)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.quotas = {name: quotas_of(cq) for name, cq in config.cluster_queues.items()}
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


def assign(books: Books, cq_name: str, wl: Obj) -> tuple[Obj | None, Usage, str]:
    """The admission of ``wl`` in ``cq_name`` if it fits now: (admission, usage, why not)."""
    cq = books.config.cluster_queues[cq_name]
    groups = resource_groups(cq)
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


def shape_of(wl: Obj) -> tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...]:
    """What a Workload asks for, as a key: pod set names and their total requests."""
    return tuple(
        (str(ps.get("name") or "main"), tuple(sorted(podset_totals(ps).items())))
        for ps in (wl.get("spec") or {}).get("podSets") or []
    )


def flavor_usage(books: Books, name: str, borrowed: bool = True) -> list[Obj]:
    out = []
    for group_resources, flavor_names in resource_groups(books.config.cluster_queues[name]):
        for flavor in flavor_names:
            resources = []
            for res in group_resources:
                entry: Obj = {"name": res, "total": fmt(res, books.used.get(name, {}).get((flavor, res), Decimal(0)))}
                if borrowed:
                    entry["borrowed"] = fmt(res, books.borrowed(name, (flavor, res)))
                resources.append(entry)
            out.append({"name": flavor, "resources": resources})
    return out


def cluster_queue_status(books: Books, name: str, counts: Mapping[str, int], missing: list[str]) -> Obj:
    usage = flavor_usage(books, name)
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


def local_queue_status(key: Key, lq: Obj, counts: Mapping[str, int], config: Config, books: Books) -> Obj:
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
