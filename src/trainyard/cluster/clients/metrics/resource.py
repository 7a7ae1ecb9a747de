"""``metrics.k8s.io/v1beta1`` as metrics-server serves it: PodMetrics and NodeMetrics.

metrics-server scrapes every kubelet's resource metrics and serves the last points it has; here
``scrape`` returns each running node's last pass (``node.resourcestats``, in the kubelet's
``/stats/summary`` shape) and nothing is stored. A pod is served while its node measured it and
the pod still exists (its labels, for ``labelSelector``, are the pod informer's); a node while
its agent runs. Usage is written as metrics-server writes it: CPU in nano-cores (``12345n``),
memory in bytes with the largest exact binary suffix (``1234Ki``); ``window`` is the measured
interval (``15s``), ``timestamp`` when it ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.quantity import MEMORY, format_amount
from trainyard.kit.informer import Informer

GROUP = "metrics.k8s.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"


def cpu(nano_cores: int) -> str:
    return f"{nano_cores}n" if nano_cores else "0"


def memory(size: int) -> str:
    return format_amount(MEMORY, size) if size else "0"


def window(seconds: float) -> str:
    """A Go duration as metav1.Duration writes it: ``15s``, ``14.998s``."""
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


class ResourceMetrics:
    group = GROUP
    version = VERSION

    def __init__(self, scrape: Callable[[], Iterable[Obj]], pods: Informer, nodes: Informer | None = None) -> None:
        self.scrape = scrape
        self.pods_informer = pods
        self.nodes_informer = nodes

    def resources(self) -> Sequence[Obj]:
        return [
            {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]},
            {"name": "pods", "singularName": "", "namespaced": True, "kind": "PodMetrics", "verbs": ["get", "list"]},
        ]

    async def get(self, query: Any) -> Obj:
        path = query.path
        if path and path[0] == "pods" and len(path) <= 2:
            items = self.pod_metrics(query.namespace, query.labels)
            if len(path) == 2:
                return _one(items, path[1], "podmetrics")
            return _list("PodMetricsList", items)
        if path and path[0] == "nodes" and len(path) <= 2 and query.namespace is None:
            items = self.node_metrics(query.labels)
            if len(path) == 2:
                return _one(items, path[1], "nodemetrics")
            return _list("NodeMetricsList", items)
        raise LookupError("the server could not find the requested resource")

    def pod_metrics(self, namespace: str | None, labels: Any) -> list[Obj]:
        out = []
        for summary in self.scrape():
            for pod in summary.get("pods") or []:
                ref = pod["podRef"]
                if namespace is not None and ref["namespace"] != namespace:
                    continue
                obj = self.pods_informer.get(ref["namespace"], ref["name"])
                if obj is None or obj["metadata"].get("uid") != ref["uid"]:
                    continue
                pod_labels = obj["metadata"].get("labels") or {}
                if labels is not None and not labels.matches(pod_labels):
                    continue
                containers = pod.get("containers") or []
                if not containers:
                    continue
                first = containers[0]
                out.append(
                    {
                        "kind": "PodMetrics",
                        "apiVersion": API_VERSION,
                        "metadata": {
                            "name": ref["name"],
                            "namespace": ref["namespace"],
                            "creationTimestamp": first["cpu"]["time"],
                            "labels": pod_labels,
                        },
                        "timestamp": first["cpu"]["time"],
                        "window": window(max(c["cpu"]["window"] for c in containers)),
                        "containers": [
                            {
                                "name": c["name"],
                                "usage": {
                                    "cpu": cpu(c["cpu"]["usageNanoCores"]),
                                    "memory": memory(c["memory"]["workingSetBytes"]),
                                },
                            }
                            for c in containers
                        ],
                    }
                )
        out.sort(key=lambda o: (o["metadata"]["namespace"], o["metadata"]["name"]))
        return out

    def node_metrics(self, labels: Any) -> list[Obj]:
        out = []
        for summary in self.scrape():
            node = summary["node"]
            if node["cpu"]["time"] is None:
                continue
            obj = self.nodes_informer.get("", node["nodeName"]) if self.nodes_informer is not None else None
            node_labels = (obj or {}).get("metadata", {}).get("labels") or {}
            if labels is not None and not labels.matches(node_labels):
                continue
            out.append(
                {
                    "kind": "NodeMetrics",
                    "apiVersion": API_VERSION,
                    "metadata": {
                        "name": node["nodeName"],
                        "creationTimestamp": node["cpu"]["time"],
                        "labels": node_labels,
                    },
                    "timestamp": node["cpu"]["time"],
                    "window": window(node["cpu"]["window"]),
                    "usage": {
                        "cpu": cpu(node["cpu"]["usageNanoCores"]),
                        "memory": memory(node["memory"]["workingSetBytes"]),
                    },
                }
            )
        out.sort(key=lambda o: o["metadata"]["name"])
        return out


def _list(kind: str, items: list[Obj]) -> Obj:
    return {"kind": kind, "apiVersion": API_VERSION, "metadata": {}, "items": items}


def _one(items: list[Obj], name: str, what: str) -> Obj:
    for item in items:
        if item["metadata"]["name"] == name:
            return item
    raise LookupError(f'{what}.{GROUP} "{name}" not found')
