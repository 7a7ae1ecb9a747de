"""The horizontal pod autoscaler's I/O shell: kube-controller-manager's podautoscaler on the kit.

Every HPA is synced on its own key every ``sync_period`` seconds (15 s, the plane's
``--horizontal-pod-autoscaler-sync-period``) and when it changes. A pass reads the target's
``/scale`` (the kind's resource from its CRD), the pods its ``status.selector`` selects, and each
metric through the metrics APIs, over the API as kube-controller-manager reads them:
``metrics.k8s.io`` (Resource), ``custom.metrics.k8s.io`` (Pods, Object) and
``external.metrics.k8s.io`` (External); ``decisions`` decides; a rescale is a PATCH of the
target's ``/scale``; the status is written whole when it changed, then the events (a warning
the previous pass gave already is not posted again while it lasts).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.core.generic_client import BasicRequest
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.types import PatchType

from trainyard.api.meta import Obj, format_time
from trainyard.api.quantity import parse_quantity
from trainyard.client.events import reference
from trainyard.client.resources import plain_resource, to_dict
from trainyard.cluster.clients.autoscaler import behavior, decisions
from trainyard.cluster.clients.autoscaler.replicas import PodState
from trainyard.kit.applier import Applier
from trainyard.kit.informer import Informer
from trainyard.kit.plans import EventType
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

log = logging.getLogger(__name__)

COMPONENT = "horizontal-pod-autoscaler"
HPA = plain_resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
DEFAULT_SYNC_PERIOD = 15.0
NO_EXTERNAL = "no metrics returned from external metrics API"
Key = tuple[str, str]


def _error_text(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    return str(getattr(status, "message", None) or exc)


class HorizontalController:
    def __init__(
        self,
        client: AsyncClient,
        *,
        sync_period: float = DEFAULT_SYNC_PERIOD,
        downscale_window: float = behavior.DEFAULT_DOWNSCALE_STABILIZATION,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.sync_period = sync_period
        self.downscale_window = downscale_window
        self.clock = clock
        self.monotonic = monotonic
        self.applier = Applier(client, component=COMPONENT, clock=clock)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.hpas = Informer(client, HPA, lambda _, obj: self.queue.add(self._key(obj)))
        self.histories: dict[Key, behavior.History] = {}
        # The warnings each HPA's last pass gave: a failure that lasts is told once, not every sync
        # (client-go's event correlator counts repeats into one event; our recorder does not).
        self._warned: dict[Key, set[tuple[str, str]]] = {}
        # (group, kind) → (resource, plural), from the CRDs
        self._kinds: dict[tuple[str, str], tuple[Any, str] | None] = {}

    @staticmethod
    def _key(obj: Obj) -> Key:
        m = obj.get("metadata") or {}
        return m.get("namespace") or "", m.get("name") or ""

    async def run(self) -> None:
        task = self.hpas.start("autoscaler informer horizontalpodautoscalers")
        try:
            await self.hpas.synced.wait()
            await work(self.queue, self.reconcile, name=COMPONENT)
        finally:
            self.queue.close()
            task.cancel()

    async def reconcile(self, key: Key) -> float | None:
        hpa = self.hpas.get(*key)
        if hpa is None:
            self.histories.pop(key, None)
            self._warned.pop(key, None)
            return None
        namespace = key[0]
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        scale: Obj | None = None
        scale_error: str | None = None
        res = None
        try:
            res, _ = await self._kind(str(ref.get("apiVersion") or ""), str(ref.get("kind") or ""))
            scale = to_dict(await self.client.get(res.Scale, ref["name"], namespace=namespace))
        except (ApiError, LookupError) as exc:
            scale_error = _error_text(exc)
        readings: list[decisions.Reading] = []
        if scale is not None:
            selector = str((scale.get("status") or {}).get("selector") or "")
            pods = await self._pods(namespace, selector) if selector else []
            for metric in spec.get("metrics") or []:
                readings.append(await self._reading(namespace, metric, pods, selector))
        stamp = format_time(self.clock())
        now = self.monotonic()
        history = self.histories.get(key, behavior.History())
        plan = decisions.decide(
            hpa, scale, scale_error, readings, history, now=now, stamp=stamp, downscale_window=self.downscale_window
        )
        if plan.scale_to is not None and res is not None:
            error = None
            try:
                body = {"spec": {"replicas": plan.scale_to}}
                await self.client.patch(res.Scale, ref["name"], body, namespace=namespace, patch_type=PatchType.MERGE)
            except ApiError as exc:
                error = _error_text(exc)
            plan = decisions.rescaled(plan, hpa, error=error, now=now, stamp=stamp)
        self.histories[key] = plan.history
        if plan.status != (hpa.get("status") or {}):
            hpa = await self.applier.write_status(HPA, hpa, plan.status, self.hpas, whole=True)
        warned = {(e.reason, e.message) for e in plan.events if e.type == EventType.WARNING}
        told = self._warned.get(key, set())
        fresh = [e for e in plan.events if e.type != EventType.WARNING or (e.reason, e.message) not in told]
        self._warned[key] = warned
        await self.applier.emit(reference(hpa, "autoscaling/v2", "HorizontalPodAutoscaler"), fresh)
        return self.sync_period

    async def _kind(self, api_version: str, kind: str) -> tuple[Any, str]:
        group, _, version = api_version.rpartition("/")
        wanted = (group, kind)
        if self._kinds.get(wanted) is None:
            async for item in self.client.list(CustomResourceDefinition):
                crd = to_dict(item)
                cspec = crd.get("spec") or {}
                if cspec.get("group") != group or (cspec.get("names") or {}).get("kind") != kind:
                    continue
                for served in cspec.get("versions") or []:
                    if served.get("name") == version and "scale" in (served.get("subresources") or {}):
                        plural = cspec["names"]["plural"]
                        self._kinds[wanted] = (plain_resource(group, version, kind, plural), plural)
        found = self._kinds.get(wanted)
        if found is None:
            raise LookupError(f'no matches for kind "{kind}" in group "{group}"')
        return found

    async def _raw(self, path: str, params: dict[str, str]) -> Obj:
        """GET a path of the API (the aggregated metrics groups have no typed resources)."""
        request = BasicRequest(method="GET", url=path, params={k: v for k, v in params.items() if v})
        send: Any = getattr(self.client, "send_prepared", None)
        if send is None:
            raise RuntimeError("the autoscaler needs trainyard's client (client.transport.Client)")
        answer = await send(request)
        body = getattr(answer, "content", b"") or b"{}"
        if getattr(answer, "status_code", 200) >= 400:
            adapter: Any = self.client._client
            adapter.raise_for_status(answer)
        return dict(json.loads(body))

    async def _pods(self, namespace: str, selector: str) -> list[Obj]:
        listed = await self._raw(f"api/v1/namespaces/{namespace}/pods", {"labelSelector": selector})
        return list(listed.get("items") or [])

    async def _reading(self, namespace: str, metric: Obj, pods: list[Obj], pod_selector: str) -> decisions.Reading:
        kind = metric.get("type")
        try:
            if kind == "Resource":
                return await self._resource(namespace, metric["resource"]["name"], pods, pod_selector)
            if kind == "Pods":
                name = metric["pods"]["metric"]["name"]
                try:
                    found = await self._raw(
                        f"apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/pods/*/{name}",
                        {"labelSelector": pod_selector},
                    )
                except ApiError as exc:
                    why = _error_text(exc)
                    raise LookupError(
                        f"unable to get metric {name}: unable to fetch metrics from custom metrics API: {why}"
                    ) from exc
                values = {
                    i["describedObject"]["name"]: parse_quantity(i["value"]) * 1000 for i in found.get("items") or []
                }
                return decisions.Reading(per_pod=values, pods=_states(pods, None))
            if kind == "Object":
                source = metric["object"]
                described = source.get("describedObject") or {}
                name = source["metric"]["name"]
                group = str(described.get("apiVersion") or "").rpartition("/")[0]
                try:
                    _, plural = await self._kind(
                        str(described.get("apiVersion") or ""), str(described.get("kind") or "")
                    )
                    resource = f"{plural}.{group}" if group else plural
                    found = await self._raw(
                        f"apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/{resource}/{described.get('name')}/{name}",
                        {"metricSelector": _selector(source["metric"].get("selector"))},
                    )
                except (ApiError, LookupError) as exc:
                    raise LookupError(
                        f"unable to get metric {name}: {described.get('kind')} on {namespace} {described.get('name')}/"
                        f"unable to fetch metrics from custom metrics API: {_error_text(exc)}"
                    ) from exc
                items = found.get("items") or []
                if not items:
                    raise LookupError(f"unable to get metric {name}: no metrics returned from custom metrics API")
                return decisions.Reading(value=parse_quantity(items[0]["value"]) * 1000, pods=_states(pods, None))
            if kind == "External":
                source = metric["external"]
                name = source["metric"]["name"]
                selector = _selector(source["metric"].get("selector"))
                try:
                    found = await self._raw(
                        f"apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{name}",
                        {"labelSelector": selector},
                    )
                except ApiError as exc:
                    raise LookupError(
                        f"unable to get external metric {namespace}/{name}/{selector}: "
                        f"unable to fetch metrics from external metrics API: {_error_text(exc)}"
                    ) from exc
                items = found.get("items") or []
                if not items:
                    where = f"{namespace}/{name}"
                    raise LookupError(
                        f"unable to get external metric {where}: no metrics returned from external metrics API"
                    )
                total = sum((parse_quantity(i["value"]) * 1000 for i in items), Decimal(0))
                return decisions.Reading(value=total, pods=_states(pods, None))
        except LookupError as exc:
            return decisions.Reading(error=str(exc.args[0] if exc.args else exc))
        return decisions.Reading(error=f"metric type {kind} is not served by this plane")

    async def _resource(self, namespace: str, resource: str, pods: list[Obj], selector: str) -> decisions.Reading:
        try:
            found = await self._raw(
                f"apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods", {"labelSelector": selector}
            )
        except ApiError as exc:
            raise LookupError(
                f"unable to get metrics for resource {resource}: unable to fetch metrics from resource metrics API: "
                f"{_error_text(exc)}"
            ) from exc
        names = {p["metadata"]["name"] for p in pods}
        values: dict[str, Decimal] = {}
        for item in found.get("items") or []:
            name = item["metadata"]["name"]
            if name not in names:
                continue
            usage = [c.get("usage", {}).get(resource) for c in item.get("containers") or []]
            if any(u is None for u in usage):
                continue
            values[name] = sum((parse_quantity(u) * 1000 for u in usage), Decimal(0))
        if not values:
            raise LookupError(
                f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
            )
        return decisions.Reading(per_pod=values, pods=_states(pods, resource))


def _selector(selector: Any) -> str:
    """A metav1.LabelSelector as the ``labelSelector`` query parameter."""
    if not selector:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for req in selector.get("matchExpressions") or []:
        op, values = req.get("operator"), ",".join(req.get("values") or [])
        if op == "In":
            parts.append(f"{req['key']} in ({values})")
        elif op == "NotIn":
            parts.append(f"{req['key']} notin ({values})")
        elif op == "Exists":
            parts.append(req["key"])
        elif op == "DoesNotExist":
            parts.append(f"!{req['key']}")
    return ",".join(parts)


def _states(pods: list[Obj], resource: str | None) -> tuple[PodState, ...]:
    out = []
    for pod in pods:
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
        request: Decimal | None = None
        if resource is not None:
            request = Decimal(0)
            for container in (pod.get("spec") or {}).get("containers") or []:
                wanted = ((container.get("resources") or {}).get("requests") or {}).get(resource)
                if wanted is None:
                    request = None
                    break
                request += parse_quantity(wanted) * 1000
        out.append(
            PodState(
                pod["metadata"]["name"],
                str(status.get("phase") or "Pending"),
                ready,
                deleting=bool(pod["metadata"].get("deletionTimestamp")),
                request=request,
            )
        )
    return tuple(out)
