"""What ``yard get queues`` and ``yard describe`` say of queues and of a job waiting in one.

Read from one ``admission.decide`` over the queues and Workloads as listed (the decision the
controller makes, so a job's place in line and what it lacks are the controller's own): each
ClusterQueue's usage against its nominal quota, each LocalQueue's counts, and for one Workload
its queue, its position and what it waits for, e.g. ``waiting for 2 cpu in ClusterQueue team-a:
3 of 4 in use``. Pure.
"""

from __future__ import annotations

from decimal import Decimal

from trainyard.api.kueue import admission
from trainyard.api.kueue.admission import Config, Decision, cohort_of
from trainyard.api.kueue.books import nominal_quotas
from trainyard.api.kueue.workloads import amount, fmt, podset_totals
from trainyard.api.meta import Obj

CLUSTER_QUEUE_HEADERS = ["CLUSTERQUEUE", "COHORT", "STRATEGY", "PENDING", "ADMITTED", "USAGE"]
LOCAL_QUEUE_HEADERS = ["NAMESPACE", "LOCALQUEUE", "CLUSTERQUEUE", "PENDING", "ADMITTED"]


def _used(status: Obj) -> dict[tuple[str, str], Decimal]:
    return {
        (str(f.get("name")), str(r.get("name"))): amount(r.get("total"))
        for f in status.get("flavorsReservation") or []
        for r in f.get("resources") or []
    }


def usage_cell(cq: Obj, status: Obj) -> str:
    used = _used(status)
    parts = [
        f"{res} {fmt(res, used.get((flavor, res), Decimal(0)))}/{fmt(res, nominal)}"
        + (f" ({flavor})" if len({f for f, _ in nominal_quotas(cq)}) > 1 else "")
        for (flavor, res), nominal in nominal_quotas(cq).items()
    ]
    return ", ".join(parts) or "-"


def cluster_queue_rows(config: Config, decision: Decision) -> list[list[str]]:
    rows = []
    for name, cq in sorted(config.cluster_queues.items()):
        status = decision.cluster_queue_status.get(name) or {}
        rows.append(
            [
                name,
                cohort_of(cq) or "-",
                str((cq.get("spec") or {}).get("queueingStrategy") or "BestEffortFIFO"),
                str(status.get("pendingWorkloads", 0)),
                str(status.get("admittedWorkloads", 0)),
                usage_cell(cq, status),
            ]
        )
    return rows


def local_queue_rows(config: Config, decision: Decision, namespace: str | None) -> list[list[str]]:
    rows = []
    for key, lq in sorted(config.local_queues.items()):
        if namespace is not None and key[0] != namespace:
            continue
        status = decision.local_queue_status.get(key) or {}
        rows.append(
            [
                key[0],
                key[1],
                str((lq.get("spec") or {}).get("clusterQueue") or ""),
                str(status.get("pendingWorkloads", 0)),
                str(status.get("admittedWorkloads", 0)),
            ]
        )
    return rows


def _lacking(config: Config, decision: Decision, cq_name: str, wl: Obj) -> list[str]:
    cq = config.cluster_queues.get(cq_name)
    if cq is None:
        return []
    nominal = nominal_quotas(cq)
    used = _used(decision.cluster_queue_status.get(cq_name) or {})
    needs: dict[str, Decimal] = {}
    for podset in (wl.get("spec") or {}).get("podSets") or []:
        for res, value in podset_totals(podset).items():
            needs[res] = needs.get(res, Decimal(0)) + value
    out = []
    for res, need in needs.items():
        flavors = [(f, q) for (f, r), q in nominal.items() if r == res]
        if not flavors:
            continue
        flavor, quota = flavors[0]
        in_use = used.get((flavor, res), Decimal(0))
        if in_use + need > quota:
            out.append(
                f"waiting for {fmt(res, need)} {res} in ClusterQueue {cq_name}: "
                f"{fmt(res, in_use)} of {fmt(res, quota)} in use"
            )
    return out


def waiting_lines(config: Config, decision: Decision, wl: Obj) -> list[tuple[str, str]]:
    """``describe``'s lines about a job's Workload: queue, place in line, what it waits for."""
    spec = wl.get("spec") or {}
    meta = wl.get("metadata") or {}
    key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
    lines = [("Workload", key[1])]
    lq = config.local_queues.get((key[0], str(spec.get("queueName") or "")))
    cq_name = str((lq or {}).get("spec", {}).get("clusterQueue") or "")
    queue = str(spec.get("queueName") or "")
    lines.append(("Queue", f"{queue} (ClusterQueue {cq_name})" if cq_name else queue))
    if admission.is_true(wl, "Finished"):
        return lines
    found = next((w for w in decision.waiting if w.key == key), None)
    if found is None:
        reserved = ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")
        if reserved or any(a.key == key for a in decision.admit):
            lines.append(("Admission", f"admitted by ClusterQueue {reserved or cq_name}"))
        return lines
    if found.position:
        pending = (decision.cluster_queue_status.get(found.cluster_queue) or {}).get("pendingWorkloads", 0)
        lines.append(("Position", f"{found.position} of {pending} pending in ClusterQueue {found.cluster_queue}"))
    lacking = _lacking(config, decision, found.cluster_queue, wl) if found.cluster_queue else []
    lines.append(("Waiting", "; ".join(lacking) if lacking else found.message))
    return lines
