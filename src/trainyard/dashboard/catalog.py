"""The dashboard's pages beside the jobs: Kueue's queues and their usage, the training runtimes.

Read from the objects as the API serves them, whoever wrote their status (the plane's Kueue, or a
cluster's real one): a ClusterQueue's pending and admitted counts and its reservation per flavor
and resource against the nominal quota; each LocalQueue's counts. A cluster without Kueue's or
Trainer's CRDs has none (an empty page, not an error).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.api import kueue
from trainyard.api.kueue.admission import cohort_of
from trainyard.api.kueue.books import nominal_quotas
from trainyard.api.kueue.workloads import amount, fmt
from trainyard.api.meta import Obj
from trainyard.api.trainer import FRAMEWORK_LABEL
from trainyard.client.resources import global_resource, plain_resource, to_dict
from trainyard.dashboard.views import Json

TRAINER = ("trainer.kubeflow.org", "v1alpha1")


async def _list(client: AsyncClient, res: Any, **scope: Any) -> list[Obj]:
    try:
        return [to_dict(item) async for item in client.list(res, **scope)]
    except ApiError as exc:
        if exc.status.code == 404:  # the CRD is not installed
            return []
        raise


def _reserved(status: Obj) -> dict[tuple[str, str], Decimal]:
    return {
        (str(f.get("name")), str(r.get("name"))): amount(r.get("total"))
        for f in status.get("flavorsReservation") or status.get("flavorsUsage") or []
        for r in f.get("resources") or []
    }


def cluster_queue(cq: Obj) -> Json:
    status = cq.get("status") or {}
    used = _reserved(status)
    usage = [
        {
            "flavor": flavor,
            "resource": resource,
            "used": fmt(resource, used.get((flavor, resource), Decimal(0))),
            "nominal": fmt(resource, nominal),
            "fraction": float(used.get((flavor, resource), Decimal(0)) / nominal) if nominal else None,
        }
        for (flavor, resource), nominal in nominal_quotas(cq).items()
    ]
    return {
        "name": cq["metadata"]["name"],
        "cohort": cohort_of(cq),
        "pending": int(status.get("pendingWorkloads") or 0),
        "admitted": int(status.get("admittedWorkloads") or 0),
        "usage": usage,
    }


def local_queue(lq: Obj) -> Json:
    status = lq.get("status") or {}
    return {
        "namespace": lq["metadata"].get("namespace"),
        "name": lq["metadata"]["name"],
        "clusterQueue": (lq.get("spec") or {}).get("clusterQueue"),
        "pending": int(status.get("pendingWorkloads") or 0),
        "admitted": int(status.get("admittedWorkloads") or 0),
    }


async def queues(client: AsyncClient) -> Json:
    version = kueue.STORAGE_VERSION
    cqs = await _list(client, global_resource(kueue.GROUP, version, "ClusterQueue", "clusterqueues"))
    lqs = await _list(client, plain_resource(kueue.GROUP, version, "LocalQueue", "localqueues"), namespace=ALL_NS)
    return {
        "clusterQueues": [cluster_queue(cq) for cq in sorted(cqs, key=lambda o: o["metadata"]["name"])],
        "localQueues": [
            local_queue(lq)
            for lq in sorted(lqs, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        ],
    }


def runtime(obj: Obj) -> Json:
    meta = obj["metadata"]
    return {
        "kind": obj.get("kind"),
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "framework": (meta.get("labels") or {}).get(FRAMEWORK_LABEL),
        "created": meta.get("creationTimestamp"),
    }


async def runtimes(client: AsyncClient) -> Json:
    group, version = TRAINER
    everywhere = global_resource(group, version, "ClusterTrainingRuntime", "clustertrainingruntimes")
    cluster = await _list(client, everywhere)
    per_namespace = plain_resource(group, version, "TrainingRuntime", "trainingruntimes")
    spaced = await _list(client, per_namespace, namespace=ALL_NS)
    found = [runtime(o) for o in (*cluster, *spaced)]
    return {"items": sorted(found, key=lambda r: (r["namespace"] or "", r["name"]))}
