"""Kueue's queues as a user reads them: one listing of queues and Workloads, one decision.

``snapshot`` lists the ClusterQueues, LocalQueues, ResourceFlavors, namespaces and Workloads
(a cluster without Kueue's CRDs has none: an empty snapshot) and runs Kueue's decision over them
(``api.kueue.admission``), from which ``yard get queues`` and ``yard describe`` read (``api.kueue.views``).
On a real cluster the real Kueue admits; the listing then shows its Workloads and the decision
only explains them (the places in line are computed the same way).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lightkube import ALL_NS, Client
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Namespace

from trainyard.api import kueue
from trainyard.api.kueue import admission
from trainyard.api.kueue.admission import Config, Decision
from trainyard.api.meta import Obj
from trainyard.client.resources import global_resource, is_status, plain_resource, to_dict


def _global(kind: str, plural: str) -> Any:
    return global_resource(kueue.GROUP, kueue.STORAGE_VERSION, kind, plural)


@dataclass(frozen=True)
class Snapshot:
    config: Config
    workloads: list[Obj] = field(default_factory=list)
    decision: Decision = field(default_factory=Decision)

    def workload_of(self, job: Obj) -> Obj | None:
        """The Workload a job owns (Kueue's controller reference to it)."""
        uid = (job.get("metadata") or {}).get("uid")
        for wl in self.workloads:
            for ref in (wl.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("controller") and ref.get("uid") == uid:
                    return wl
        return None


def _list(client: Client, res: Any, **scope: Any) -> list[Obj]:
    try:
        return [to_dict(o) for o in client.list(res, **scope)]
    except ApiError as exc:
        if is_status(exc, 404):  # Kueue's API is not served here
            return []
        raise


def snapshot(client: Client) -> Snapshot:
    cqs = _list(client, _global("ClusterQueue", "clusterqueues"))
    lqs = _list(
        client, plain_resource(kueue.GROUP, kueue.STORAGE_VERSION, "LocalQueue", "localqueues"), namespace=ALL_NS
    )
    flavors = _list(client, _global("ResourceFlavor", "resourceflavors"))
    workloads = _list(
        client, plain_resource(kueue.GROUP, kueue.STORAGE_VERSION, "Workload", "workloads"), namespace=ALL_NS
    )
    namespaces = _list(client, Namespace) if cqs else []
    config = Config(
        cluster_queues={c["metadata"]["name"]: c for c in cqs},
        local_queues={(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in lqs},
        flavors=frozenset(f["metadata"]["name"] for f in flavors),
        namespace_labels={n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in namespaces},
    )
    return Snapshot(config, workloads, admission.decide(config, workloads))
