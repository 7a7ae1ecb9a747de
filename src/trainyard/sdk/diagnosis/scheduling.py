"""Rules about a job that cannot start: its pods fit no node, a ResourceQuota refuses them, Kueue
has not admitted it, a claim is not bound, or the node under its pods is gone.

Each rule reads the scheduler's and the plane's own words (``PodScheduled=False``/``Unschedulable``
and ``FailedScheduling``, ``FailedCreatePod``'s ``exceeded quota``, the Workload's
``QuotaReserved`` condition, the node's ``Ready`` condition) and adds the figures a person would
look up next: how much the gang asks, how much each node has free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

from trainyard.api.meta import Obj
from trainyard.api.podresources import pod_resources
from trainyard.api.quantity import parse_quantity
from trainyard.sdk.diagnosis.model import (
    Finding,
    Snapshot,
    event_line,
    events_about,
    field_path,
    is_terminal,
    pod_field_path,
    pod_name,
    who,
)

BYTES = ("memory", "ephemeral-storage")


def amount(resource: str, value: Decimal) -> str:
    """``2``, ``500m``, ``1.5Gi``: a resource figure as people write it."""
    if resource in BYTES or resource.startswith("hugepages-"):
        for suffix, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if abs(value) >= size:
                return f"{(value / size).quantize(Decimal('0.1')).normalize():f}{suffix}"
        return f"{value:f}"
    if value != value.to_integral_value():
        return f"{(value * 1000).to_integral_value():f}m"
    return f"{value.normalize():f}"


def _requests(pod: Obj) -> dict[str, Decimal]:
    return pod_resources(pod.get("spec") or {})[0]


def _ready(node: Obj) -> tuple[bool, str]:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            ok = c.get("status") == "True"
            return ok, "" if ok else f"{c.get('reason') or 'NotReady'}: {c.get('message') or ''}".rstrip(": ")
    return False, "no Ready condition"


def free_by_node(snap: Snapshot) -> dict[str, dict[str, Decimal]]:
    """Each schedulable, Ready node's allocatable less what its running pods request."""
    used: dict[str, dict[str, Decimal]] = {}
    for pod in snap.node_pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or is_terminal(pod):
            continue
        into = used.setdefault(str(node), {})
        for res, value in _requests(pod).items():
            into[res] = into.get(res, Decimal(0)) + value
    free: dict[str, dict[str, Decimal]] = {}
    for node in snap.nodes:
        name = str(node["metadata"]["name"])
        if (node.get("spec") or {}).get("unschedulable") or not _ready(node)[0]:
            continue
        have: dict[str, Decimal] = {}
        for res, text in ((node.get("status") or {}).get("allocatable") or {}).items():
            try:
                have[res] = parse_quantity(text) - used.get(name, {}).get(res, Decimal(0))
            except ValueError:
                continue
        free[name] = have
    return free


def _unschedulable(pod: Obj) -> str | None:
    if (pod.get("spec") or {}).get("nodeName") or is_terminal(pod):
        return None
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
            return str(c.get("message") or "")
    return None


_SHORT = re.compile(r"Insufficient ([\w./-]+)|resource gap: ([^.]+)")


def _short_resources(message: str) -> list[str]:
    """The resources the scheduler says are short: ``Insufficient cpu``, ``resource gap: cpu 126, memory 1Gi``."""
    out: list[str] = []
    for insufficient, gap in _SHORT.findall(message):
        names = [insufficient] if insufficient else [part.split()[0] for part in gap.split(",") if part.strip()]
        out += [n for n in names if n not in out and n != "pods"]
    return out


def unschedulable(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """The gang (or a pod) fits no node: which resource, how much asked, how much free where."""
    stuck = [(p, m) for p in snap.pods if pod_name(p) not in claimed and (m := _unschedulable(p)) is not None]
    if not stuck:
        return []
    first, message = stuck[0]
    names = tuple(pod_name(p) for p, _ in stuck)
    evidence = [f"{who(first)} is Unschedulable: {message}"]
    events = events_about(snap, pod_name(first), "FailedScheduling")
    if events:
        evidence.append(event_line(events[-1]))
    gang = f"the gang of {len(stuck)} pods" if len(stuck) > 1 else who(first)
    subject = f"The gang of {len(stuck)} pods" if len(stuck) > 1 else who(first)
    short = _short_resources(message)
    if short:
        free = free_by_node(snap)
        asked = {r: sum((_requests(p).get(r, Decimal(0)) for p, _ in stuck), Decimal(0)) for r in short}
        parts = []
        for res in short:
            where = ", ".join(f"{n} {amount(res, max(f.get(res, Decimal(0)), Decimal(0)))}" for n, f in free.items())
            total = sum((max(f.get(res, Decimal(0)), Decimal(0)) for f in free.values()), Decimal(0))
            per_pod = max((_requests(p).get(res, Decimal(0)) for p, _ in stuck), default=Decimal(0))
            parts.append(
                f"{res}: {amount(res, asked[res])} requested ({amount(res, per_pod)} per pod), "
                f"{amount(res, total)} free ({where or 'no Ready schedulable node'})"
            )
        path = field_path(snap, first, f"resources.requests.{short[0]}")
        return [
            Finding(
                "GangDoesNotFit",
                "error",
                f"{subject} does not fit the nodes: " + "; ".join(parts) + ".",
                f"lower the job's resource requests ({path}) or the replica count, or free the nodes "
                "(`yard status` and `kubectl describe nodes` show their capacity; on a cluster add nodes)",
                tuple(evidence),
                names,
            )
        ]
    if "didn't match Pod's node affinity/selector" in message:
        selector = (first.get("spec") or {}).get("nodeSelector") or {}
        wanted = ", ".join(f"{k}={v}" for k, v in selector.items()) or "its node affinity"
        first_label = next(iter(selector.items()), ("KEY", "VALUE"))
        return [
            Finding(
                "NoNodeMatches",
                "error",
                f"No node matches the node selector of {gang} ({wanted}).",
                f"fix {pod_field_path(snap, first, 'nodeSelector')}"
                f" or label a node (`kubectl label node NODE {first_label[0]}={first_label[1]}`)",
                tuple(evidence),
                names,
            )
        ]
    if "untolerated taint" in message or "were unschedulable" in message:
        return [
            Finding(
                "NodesUnavailable",
                "error",
                f"{subject} cannot be placed: the nodes are cordoned or tainted.",
                "uncordon the node (`yard node uncordon NODE`), remove the taint "
                "(`kubectl taint node NODE KEY-`), or add a toleration to the pod template",
                tuple(evidence),
                names,
            )
        ]
    return [
        Finding(
            "Unschedulable",
            "error",
            f"{subject} is Unschedulable: {message}",
            "lower the job's resource requests or free the node (`yard status` shows the node's capacity)",
            tuple(evidence),
            names,
        )
    ]


_QUOTA = re.compile(r"exceeded quota: ([^,]+), requested: (.*?), used: (.*?), limited: (.*)$")


def quota(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """A ResourceQuota refuses the job's pods (the operator's ``FailedCreatePod``)."""
    refused = [
        e
        for e in events_about(snap, snap.name)
        if str(e.get("reason", "")).startswith("FailedCreate") and "exceeded quota: " in str(e.get("message", ""))
    ]
    if not refused:
        return []
    last = refused[-1]
    found = _QUOTA.search(str(last.get("message", "")))
    if found is None:
        cause = f"a ResourceQuota refuses the job's pods: {last.get('message')}"
        name = "QUOTA"
    else:
        name, requested, used, limited = found.groups()
        cause = (
            f"ResourceQuota {name} in namespace {snap.namespace} refuses the job's pods: "
            f"they request {requested}, {used} is in use, the quota allows {limited}."
        )
    return [
        Finding(
            "QuotaExceeded",
            "error",
            cause,
            "lower the replicas' resource requests, wait for other pods of the namespace to finish, or raise "
            f"the quota's spec.hard (`kubectl describe resourcequota {name} -n {snap.namespace}`)",
            (event_line(last),),
        )
    ]


def _condition(obj: Obj, kind: str) -> Obj | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def queue(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """Kueue has not admitted the job's Workload: which queue, what is short."""
    wl = snap.workload
    if wl is None or _condition(wl, "Finished") is not None:
        return []
    reserved = _condition(wl, "QuotaReserved")
    admitted = _condition(wl, "Admitted")
    if (admitted or {}).get("status") == "True" or (reserved or {}).get("status") == "True":
        return []
    told = dict(snap.queue_lines)
    queue_name = told.get("Queue") or str((wl.get("spec") or {}).get("queueName") or "")
    why = told.get("Waiting") or str((reserved or {}).get("message") or "not admitted yet")
    where = f"; {told['Position']}" if "Position" in told else ""
    evidence = [f"workload {wl['metadata']['name']}: QuotaReserved={(reserved or {}).get('status', 'unset')}"]
    if reserved and reserved.get("message"):
        evidence[0] += f" ({reserved.get('reason')}): {reserved.get('message')}"
    missing = "doesn't exist" in why
    cluster_queue = re.search(r"ClusterQueue ([\w.-]+)", queue_name)
    cq = cluster_queue.group(1) if cluster_queue else "CLUSTERQUEUE"
    remedy = (
        "create the LocalQueue (or fix the job's kueue.x-k8s.io/queue-name label); `yard get queues` lists them"
        if missing
        else "wait for the queue's quota to free up, lower the job's requests, or raise the ClusterQueue's "
        f"nominalQuota (`kubectl edit clusterqueue {cq}`); `yard get queues` shows the usage"
    )
    return [
        Finding(
            "QueueWait",
            "warning",
            f"The job waits in Kueue queue {queue_name}: {why}{where}.",
            remedy,
            tuple(evidence),
        )
    ]


def _claim_names(pod: Obj) -> Iterable[str]:
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        if claim:
            yield str(claim)


def claims(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """A pod waits for a PersistentVolumeClaim that is missing or not bound."""
    by_name = {str(c["metadata"]["name"]): c for c in snap.claims}
    out = []
    for pod in snap.pods:
        if pod_name(pod) in claimed or is_terminal(pod) or (pod.get("status") or {}).get("phase") == "Running":
            continue
        for name in _claim_names(pod):
            claim = by_name.get(name)
            phase = str((claim or {}).get("status", {}).get("phase") or ("missing" if claim is None else "Pending"))
            if phase == "Bound":
                continue
            evidence = [e for e in events_about(snap, name) if e.get("type") == "Warning"][-1:]
            evidence += events_about(snap, pod_name(pod), "FailedMount")[-1:]
            out.append(
                Finding(
                    "ClaimNotBound",
                    "error",
                    f"{who(pod)} waits for PersistentVolumeClaim {name}, which is {phase}.",
                    f"create the claim or a PersistentVolume it can bind (`kubectl describe pvc {name}`); "
                    "check its storageClassName and size",
                    tuple(event_line(e) for e in evidence),
                    (pod_name(pod),),
                )
            )
            break
    return out


def nodes(snap: Snapshot, claimed: frozenset[str]) -> list[Finding]:
    """The job's pods are bound to a node that is NotReady or gone."""
    known = {str(n["metadata"]["name"]): n for n in snap.nodes}
    bad: dict[str, list[Obj]] = {}
    said: dict[str, str] = {}
    for pod in snap.pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or is_terminal(pod) or pod_name(pod) in claimed:
            continue
        if node not in known:
            said[node] = "gone (no Node object)"
        else:
            ok, why = _ready(known[node])
            if ok:
                continue
            said[node] = f"NotReady ({why})" if why else "NotReady"
        bad.setdefault(str(node), []).append(pod)
    return [
        Finding(
            "NodeNotReady",
            "error",
            f"Node {node} under {', '.join(who(p) for p in pods)} is {said[node]}.",
            "bring the node back (`yard status`; on a cluster, its kubelet); its pods are evicted after their "
            "not-ready toleration and the operator recreates them elsewhere, or delete them to hurry it",
            tuple(f"{pod_name(p)} is bound to {node}" for p in pods),
            tuple(pod_name(p) for p in pods),
        )
        for node, pods in bad.items()
    ]
