"""A job's Workload, as Kueue's jobframework builds it, and what a Workload asks for.

``workload_name`` is Kueue's ``GetWorkloadNameForOwnerWithGVK`` (``<kind>-<job>-<hash>``, the
hash over the job's kind, group, name and uid, so two kinds' jobs of one name never share one);
``workload_for`` the Workload of a job (its pod sets, queue, priority, owner); ``requests`` what
one pod of a pod set requests (its containers' requests, a limit standing in for a missing
request as the API server defaults it, the largest init container, the pod's overhead), the
numbers Kueue counts against a ClusterQueue's quota. Pure.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from trainyard.api.kueue import GROUP, JOB_UID_LABEL, STORAGE_VERSION
from trainyard.api.kueue.integration import Integration
from trainyard.api.meta import Obj
from trainyard.api.podresources import pod_resources
from trainyard.api.quantity import BINARY_SUFFIXES, SUFFIXES, parse_quantity

MAX_NAME = 253
HASH_LENGTH = 5
Amounts = dict[str, Decimal]


def workload_name(job_name: str, uid: str, kind: str, group: str) -> str:
    prefix = f"{kind.lower()}-{job_name}"[: MAX_NAME - 1 - HASH_LENGTH]
    digest = hashlib.sha1(f"{kind}\n{group}\n{job_name}\n{uid}".encode()).hexdigest()
    return f"{prefix}-{digest[:HASH_LENGTH]}"


def workload_for(
    job: Obj, integration: Integration, queue: str, priority: tuple[str, int, str] | None, podsets: list[Obj]
) -> Obj:
    """The Workload Kueue creates for ``job``: owned by it, one pod set per replica type.

    ``priority``: (class name, value, source) when a WorkloadPriorityClass or PriorityClass applies.
    """
    m = job["metadata"]
    spec: Obj = {"queueName": queue, "podSets": podsets, "active": True}
    if priority is not None:
        spec["priorityClassName"], spec["priority"], spec["priorityClassSource"] = priority
    return {
        "apiVersion": f"{GROUP}/{STORAGE_VERSION}",
        "kind": "Workload",
        "metadata": {
            "name": workload_name(m["name"], m["uid"], integration.kind, integration.group),
            "namespace": m["namespace"],
            "labels": {JOB_UID_LABEL: m["uid"]},
            "ownerReferences": [
                {
                    "apiVersion": integration.api_version,
                    "kind": integration.kind,
                    "name": m["name"],
                    "uid": m["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def amount(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        return Decimal(0)


def requests(template: Mapping[str, Any]) -> Amounts:
    """What one pod of ``template`` requests, as kube-scheduler and Kueue count it."""
    return {k: v for k, v in pod_resources(template.get("spec"))[0].items() if v > 0}


def podset_totals(podset: Mapping[str, Any]) -> Amounts:
    count = podset.get("count", 1)
    count = count if isinstance(count, int) else 1
    return {k: v * count for k, v in requests(podset.get("template") or {}).items()}


def fmt(resource: str, value: Decimal) -> str:
    """A quantity as Kueue prints it: ``2``, ``500m`` CPU, ``16Gi`` memory."""
    if value == value.to_integral_value():
        whole = int(value)
        if resource != "cpu" and whole:
            for suffix in BINARY_SUFFIXES:
                unit = int(SUFFIXES[suffix])
                if whole % unit == 0 and whole >= unit:
                    return f"{whole // unit}{suffix}"
        return str(whole)
    millis = value * 1000
    if millis == millis.to_integral_value():
        return f"{int(millis)}m"
    return str(value.normalize())
