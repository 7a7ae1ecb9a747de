"""``custom.metrics.k8s.io/v1beta2`` and ``external.metrics.k8s.io/v1beta1``, as a metrics adapter serves them.

The sources, which are what the plane knows (no Prometheus here):

* **Object metrics**: ``/namespaces/<ns>/<resource>.<group>/<name>/<metric>`` is the metric of
  that object that its training code reported: ``status.trainingProgress.metrics`` of the
  ``kubeflow.org/v1`` jobs, ``status.trainerStatus.metrics`` of a TrainJob (``api.training``
  reads both), e.g. ``pytorchjobs.kubeflow.org/<job>/throughput``; ``timestamp`` is the report's
  ``lastUpdateTime``. Any custom resource's kind is found from its CRD; a non-numeric or absent
  metric is "not found", in the words of custom-metrics-apiserver.
* **Pods metrics** (``/namespaces/<ns>/pods/*/<metric>``): there is no per-pod source (training
  code reports per job), so every such metric is "not found" and an HPA's Pods metric says so in
  its ``ScalingActive`` condition.
* **External metrics**: ``kueue_pending_workloads`` is a queue's depth: the Kueue Workloads of
  the namespace that hold no quota reservation and have not finished, one item per LocalQueue
  (``metricLabels: {queue_name: <LocalQueue>}``; ``labelSelector`` picks queues by that label).
  The autoscaler sums the items, so "scale workers based on queue depth" is an External metric
  ``kueue_pending_workloads`` with selector ``queue_name=<queue>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition

from trainyard.api import kueue
from trainyard.api.meta import Obj, format_time
from trainyard.api.training import from_trainer_status, from_training_progress
from trainyard.client.resources import is_status, plain_resource, to_dict
from trainyard.kit.informer import Informer

CUSTOM_GROUP = "custom.metrics.k8s.io"
CUSTOM_VERSION = "v1beta2"
EXTERNAL_GROUP = "external.metrics.k8s.io"
EXTERNAL_VERSION = "v1beta1"
QUEUE_DEPTH = "kueue_pending_workloads"
QUEUE_LABEL = "queue_name"


def quantity(value: Decimal) -> str:
    """A number as a Quantity: whole numbers plain, others in milli-units (``2500m``), as the adapters write."""
    if value == value.to_integral_value():
        return str(int(value))
    return f"{int((value * 1000).to_integral_value())}m"


def metric_not_found(metric: str, resource: str, name: str | None = None) -> LookupError:
    """custom-metrics-apiserver's ``NewMetricNotFoundError`` / ``NewMetricNotFoundForError``."""
    if name is None:
        return LookupError(f"the server could not find the metric {metric} for {resource}")
    return LookupError(f"the server could not find the metric {metric} for {resource} {name}")


def reported(obj: Obj, metric: str) -> Decimal | None:
    """The numeric metric ``metric`` an object's training code last reported, or None."""
    training = from_training_progress(obj) or from_trainer_status(obj)
    if training is None:
        return None
    value = training.metrics.get(metric)
    if isinstance(value, bool) or value is None:
        return None
    try:
        return Decimal(str(value))
    except ArithmeticError:
        return None


class CustomMetrics:
    group = CUSTOM_GROUP
    version = CUSTOM_VERSION

    def __init__(self, client: AsyncClient, clock: Callable[[], datetime], reporting: Sequence[str] = ()) -> None:
        self.client = client
        self.clock = clock
        # The "<plural>.<group>" of the kinds whose training code reports metrics: discovery's entries.
        self.reporting = tuple(reporting)
        # "<plural>.<group>" → (resource, apiVersion, kind), from the CRD; None: no such kind.
        self._kinds: dict[str, tuple[Any, str, str] | None] = {}

    def resources(self) -> Sequence[Obj]:
        """One entry per reporting kind, ``<resource>/*`` standing for any metric its jobs report
        (an adapter lists each metric it found; here they are whatever the training code sends)."""
        return [
            {"name": f"{r}/*", "singularName": "", "namespaced": True, "kind": "MetricValueList", "verbs": ["get"]}
            for r in self.reporting
        ]

    async def get(self, query: Any) -> Obj:
        path, namespace = query.path, query.namespace
        if namespace is None or len(path) != 3:
            raise LookupError("the server could not find the requested resource")
        resource, name, metric = path
        if resource == "pods":
            raise metric_not_found(metric, "pods", None if name == "*" else name)
        if name == "*":
            raise metric_not_found(metric, resource)
        found = await self._kind(resource)
        if found is None:
            raise metric_not_found(metric, resource, name)
        res, api_version, kind = found
        try:
            obj = to_dict(await self.client.get(res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                raise metric_not_found(metric, resource, name) from exc
            raise
        value = reported(obj, metric)
        if value is None:
            raise metric_not_found(metric, resource, name)
        training = from_training_progress(obj) or from_trainer_status(obj)
        stamp = (training.updated if training else None) or format_time(self.clock())
        item = {
            "describedObject": {"kind": kind, "namespace": namespace, "name": name, "apiVersion": api_version},
            "metric": {"name": metric},
            "timestamp": stamp,
            "value": quantity(value),
        }
        return {
            "kind": "MetricValueList",
            "apiVersion": f"{CUSTOM_GROUP}/{CUSTOM_VERSION}",
            "metadata": {},
            "items": [item],
        }

    async def _kind(self, resource: str) -> tuple[Any, str, str] | None:
        if resource not in self._kinds:
            try:
                crd = to_dict(await self.client.get(CustomResourceDefinition, resource))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
                return None  # not remembered: the CRD may come later
            spec = crd.get("spec") or {}
            names = spec.get("names") or {}
            served = [v for v in spec.get("versions") or [] if v.get("served")]
            version = next((v["name"] for v in served if v.get("storage")), served[0]["name"] if served else "")
            group = spec.get("group", "")
            res = plain_resource(group, version, names.get("kind", ""), names.get("plural", ""))
            self._kinds[resource] = (res, f"{group}/{version}", names.get("kind", ""))
        return self._kinds[resource]


class ExternalMetrics:
    group = EXTERNAL_GROUP
    version = EXTERNAL_VERSION

    def __init__(self, workloads: Informer | None, clock: Callable[[], datetime]) -> None:
        self.workloads = workloads
        self.clock = clock

    def resources(self) -> Sequence[Obj]:
        entry = {"singularName": "", "namespaced": True, "kind": "ExternalMetricValueList", "verbs": ["get"]}
        return [{"name": QUEUE_DEPTH, **entry}]

    async def get(self, query: Any) -> Obj:
        if query.namespace is None or len(query.path) != 1:
            raise LookupError("the server could not find the requested resource")
        metric = query.path[0]
        if metric != QUEUE_DEPTH or self.workloads is None:
            raise metric_not_found(metric, "external metrics")
        depth: dict[str, int] = {}
        for wl in self.workloads.items():
            if (wl.get("metadata") or {}).get("namespace") != query.namespace:
                continue
            queue = str((wl.get("spec") or {}).get("queueName") or "")
            if query.labels is not None and not query.labels.matches({QUEUE_LABEL: queue}):
                continue
            depth.setdefault(queue, 0)
            if pending(wl):
                depth[queue] += 1
        now = format_time(self.clock())
        items = [
            {"metricName": metric, "metricLabels": {QUEUE_LABEL: q}, "timestamp": now, "value": str(n)}
            for q, n in sorted(depth.items())
        ]
        if not items:
            items = [{"metricName": metric, "metricLabels": {}, "timestamp": now, "value": "0"}]
        return {
            "kind": "ExternalMetricValueList",
            "apiVersion": f"{EXTERNAL_GROUP}/{EXTERNAL_VERSION}",
            "metadata": {},
            "items": items,
        }


def pending(workload: Obj) -> bool:
    """A Workload waiting in its queue: no quota reserved, not finished."""
    conditions = (workload.get("status") or {}).get("conditions") or []
    held = {c.get("type") for c in conditions if c.get("status") == "True"}
    return not held & {kueue.QUOTA_RESERVED, kueue.FINISHED}
