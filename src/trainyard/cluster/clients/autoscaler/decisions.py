"""One HPA's pass, as kube-controller-manager v1.32's ``reconcileAutoscaler``: status, conditions, events.

The shell reads the target's ``/scale`` and, for each metric of the spec, a ``Reading`` (the
values the metrics APIs gave, or why they gave none); ``decide`` turns them into the replica count
(the highest any valid metric asks for; ``replicas``), normalizes it (``behavior``) and says
whether to rescale; ``rescaled`` finishes the status once the shell tried. Conditions and their
reasons and messages are upstream's:

* ``AbleToScale``: ``SucceededGetScale`` / ``FailedGetScale``, then ``ReadyForNewScale``,
  ``ScaleUpStabilized``, ``ScaleDownStabilized``, and ``SucceededRescale`` / ``FailedUpdateScale``;
* ``ScalingActive``: ``ValidMetricFound``, ``ScalingDisabled`` (target at 0 replicas),
  ``InvalidSelector``, ``FailedGet{Resource,Pods,Object,External}Metric``;
* ``ScalingLimited``: ``DesiredWithinRange``, ``TooFewReplicas``, ``TooManyReplicas``,
  ``ScaleUpLimit``, ``ScaleDownLimit``;

and events ``SuccessfulRescale`` ("New size: 3; reason: PyTorchJob metric throughput above
target"), ``FailedRescale``, ``FailedGetScale``, ``FailedComputeMetricsReplicas`` and the metric's
own ``FailedGet...Metric``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from trainyard.api.quantity import parse_quantity
from trainyard.cluster.clients.autoscaler import behavior, replicas
from trainyard.cluster.clients.autoscaler.replicas import MetricError, PodState
from trainyard.kit.conditions import set_condition
from trainyard.kit.plans import Event

Obj = dict[str, Any]
ABLE, ACTIVE, LIMITED = "AbleToScale", "ScalingActive", "ScalingLimited"
_FAILED = {
    "Resource": "FailedGetResourceMetric",
    "ContainerResource": "FailedGetContainerResourceMetric",
    "Pods": "FailedGetPodsMetric",
    "Object": "FailedGetObjectMetric",
    "External": "FailedGetExternalMetric",
}


@dataclass(frozen=True)
class Reading:
    """What the metrics APIs gave for one metric of the spec: per-pod values (Resource: millicores or
    bytes, Pods: milli-units) or one value (Object, External; summed), else ``error``."""

    per_pod: dict[str, Decimal] | None = None
    value: Decimal | None = None
    pods: tuple[PodState, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class Pass:
    status: Obj
    scale_to: int | None = None
    reason: str = ""
    events: list[Event] = field(default_factory=list)
    history: behavior.History = field(default_factory=behavior.History)


def _milli(text: Any) -> Decimal:
    return parse_quantity(text) * 1000


def quantity(milli: Decimal) -> str:
    """A milli-value as ``resource.NewMilliQuantity(..., DecimalSI)`` prints it: ``3``, ``2500m``."""
    whole = milli.to_integral_value(rounding="ROUND_CEILING")
    if whole % 1000 == 0:
        return str(int(whole // 1000))
    return f"{int(whole)}m"


def _selector_text(selector: Any) -> str:
    if not selector:
        return "nil"
    labels = " ".join(f"{k}:{v}" for k, v in sorted((selector.get("matchLabels") or {}).items()))
    return f"&LabelSelector{{MatchLabels:map[{labels}],MatchExpressions:[]LabelSelectorRequirement{{}},}}"


def metric_replicas(
    spec: Obj, reading: Reading, *, spec_replicas: int, status_replicas: int, tolerance: float
) -> tuple[int, str, Obj]:
    """(replicas, the metric's name in upstream's words, its ``currentMetrics`` entry); MetricError."""
    kind = spec.get("type")
    if reading.error is not None:
        raise MetricError(reading.error)
    if kind == "Resource":
        source = spec["resource"]
        name, target = source["name"], source.get("target") or {}
        if target.get("averageValue") is not None:
            count, _, raw = replicas.per_pod_replicas(
                status_replicas,
                reading.per_pod or {},
                reading.pods,
                average=_milli(target["averageValue"]),
                cpu=name == "cpu",
                tolerance=tolerance,
            )
            current: Obj = {"averageValue": quantity(raw)}
            return count, f"{name} resource", {"type": kind, "resource": {"name": name, "current": current}}
        if target.get("averageUtilization") is None:
            raise MetricError("invalid resource metric source: neither a utilization target nor a value target was set")
        count, shown, raw = replicas.per_pod_replicas(
            status_replicas,
            reading.per_pod or {},
            reading.pods,
            utilization=int(target["averageUtilization"]),
            cpu=name == "cpu",
            tolerance=tolerance,
        )
        current = {"averageUtilization": shown, "averageValue": quantity(raw)}
        entry = {"type": kind, "resource": {"name": name, "current": current}}
        return count, f"{name} resource utilization (percentage of request)", entry
    if kind == "Pods":
        source = spec["pods"]
        target = source.get("target") or {}
        count, _, raw = replicas.per_pod_replicas(
            status_replicas,
            reading.per_pod or {},
            reading.pods,
            average=_milli(target.get("averageValue") or 0) or Decimal(1),
            tolerance=tolerance,
        )
        metric = {"name": source["metric"]["name"]}
        entry = {"type": kind, "pods": {"metric": metric, "current": {"averageValue": quantity(raw)}}}
        return count, f"pods metric {metric['name']}", entry
    if kind in ("Object", "External"):
        key = kind.lower()
        source = spec[key]
        target = source.get("target") or {}
        metric = {k: v for k, v in source["metric"].items() if k in ("name", "selector")}
        usage = reading.value if reading.value is not None else Decimal(0)
        if kind == "Object":
            described = source.get("describedObject") or {}
            words = f"{described.get('kind', '')} metric {metric['name']}"
        else:
            words = f"external metric {metric['name']}({_selector_text(metric.get('selector'))})"
        status: Obj = {"metric": metric}
        if kind == "Object":
            status["describedObject"] = source.get("describedObject") or {}
        if target.get("value") is not None:
            ratio = float(usage / _milli(target["value"])) if _milli(target["value"]) else 0.0
            base = spec_replicas if kind == "External" else status_replicas
            count = replicas.ratio_replicas(base, ratio, reading.pods, tolerance=tolerance)
            status["current"] = {"value": quantity(usage)}
        elif target.get("averageValue") is not None:
            count, per = replicas.average_replicas(
                status_replicas, usage, _milli(target["averageValue"]), tolerance=tolerance
            )
            status["current"] = {"averageValue": quantity(per)}
            if kind == "Object":
                # upstream names an Object metric with an AverageValue target this way too
                words = f"external metric {metric['name']}({_selector_text(metric.get('selector'))})"
        else:
            raise MetricError(
                f"invalid {key} metric source: neither a value target nor an average value target was set"
            )
        return count, words, {"type": kind, key: status}
    raise MetricError(f"unknown metric source type {kind!r}")


def _failure_text(spec: Obj, error: str) -> str:
    """How upstream wraps a metric's error in ``FailedComputeMetricsReplicas``."""
    kind = spec.get("type")
    if kind == "Resource":
        return f"failed to get {spec['resource']['name']} utilization: {error}"
    if kind == "Object":
        if ((spec["object"].get("target") or {}).get("value")) is not None:
            return f"failed to get object metric value: {error}"
        return f"failed to get {spec['object']['metric']['name']} object metric: {error}"
    if kind == "External":
        if ((spec["external"].get("target") or {}).get("value")) is not None:
            return f"failed to get external metric {spec['external']['metric']['name']}: {error}"
        return f"failed to get {spec['external']['metric']['name']} external metric: {error}"
    return error


@dataclass(frozen=True)
class Proposals:
    """What the spec's metrics ask for: the highest count and its metric's name, each metric's
    ``currentMetrics`` entry (an empty one for a metric without a value, as upstream), the invalid
    ones with their errors, and the metrics' own warnings."""

    replicas: int
    name: str
    statuses: list[Obj]
    invalid: list[tuple[Obj, str]]
    events: list[Event]


def proposals(
    metric_specs: Sequence[Obj], readings: Sequence[Reading], current: int, status_replicas: int, tolerance: float
) -> Proposals:
    """Upstream's ``computeReplicasForMetrics`` loop: every metric's proposal, the highest wins."""
    best, best_name = 0, ""
    statuses: list[Obj] = []
    invalid: list[tuple[Obj, str]] = []
    events: list[Event] = []
    for metric_spec, reading in zip(metric_specs, readings, strict=True):
        try:
            count, name, entry = metric_replicas(
                metric_spec, reading, spec_replicas=current, status_replicas=status_replicas, tolerance=tolerance
            )
        except MetricError as exc:
            invalid.append((metric_spec, str(exc)))
            events.append(Event.warning(_FAILED.get(str(metric_spec.get("type")), "FailedGetMetric"), str(exc)))
            statuses.append({"type": ""})  # upstream's empty MetricStatus: the entries stay in the spec's order
            continue
        statuses.append(entry)
        if best == 0 or count > best:
            best, best_name = count, name
    return Proposals(best, best_name, statuses, invalid, events)


def decide(
    hpa: Obj,
    scale: Obj | None,
    scale_error: str | None,
    readings: Sequence[Reading],
    history: behavior.History,
    *,
    now: float,
    stamp: str,
    tolerance: float = replicas.TOLERANCE,
    downscale_window: float = behavior.DEFAULT_DOWNSCALE_STABILIZATION,
) -> Pass:
    spec = hpa.get("spec") or {}
    old = hpa.get("status") or {}
    conditions: list[Obj] = [dict(c) for c in old.get("conditions") or []]
    events: list[Event] = []

    def cond(type_: str, status: bool, reason: str, message: str) -> None:
        nonlocal conditions
        conditions, _ = set_condition(conditions, type_, "True" if status else "False", reason, message, stamp)

    def status_with(current: int, desired: int, metrics: list[Obj] | None) -> Obj:
        out: Obj = {"currentReplicas": current, "desiredReplicas": desired}
        if old.get("lastScaleTime"):
            out["lastScaleTime"] = old["lastScaleTime"]
        if metrics:
            out["currentMetrics"] = metrics
        out["conditions"] = conditions
        return out

    def held(metrics: list[Obj] | None) -> Pass:
        """No new count: the current replicas recorded, the last desired count kept (upstream's
        ``setCurrentReplicasInStatus``)."""
        return Pass(status_with(current, int(old.get("desiredReplicas") or 0), metrics), events=events, history=history)

    if scale is None:
        message = scale_error or "unknown error"
        events.append(Event.warning("FailedGetScale", message))
        cond(
            ABLE, False, "FailedGetScale", f"the HPA controller was unable to get the target's current scale: {message}"
        )
        return Pass({**old, "conditions": conditions}, events=events, history=history)
    cond(ABLE, True, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
    current = int((scale.get("spec") or {}).get("replicas") or 0)
    status_replicas = int((scale.get("status") or {}).get("replicas") or 0)
    if not history.recommendations:
        history = behavior.History(recommendations=((current, now),))
    minimum = int(spec.get("minReplicas") or 1)
    maximum = int(spec.get("maxReplicas") or 0)
    metric_specs = spec.get("metrics") or []
    reason = ""
    statuses: list[Obj] = []
    if current == 0 and minimum != 0:
        cond(ACTIVE, False, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
        return Pass(status_with(current, 0, None), events=events, history=history)
    if current > maximum:
        desired, reason = maximum, "Current number of replicas above Spec.MaxReplicas"
    elif current < minimum:
        desired, reason = minimum, "Current number of replicas below Spec.MinReplicas"
    else:
        if not (scale.get("status") or {}).get("selector"):
            events.append(Event.warning("SelectorRequired", "selector is required"))
            cond(ACTIVE, False, "InvalidSelector", "the HPA target's scale is missing a selector")
            failure = "invalid metrics (1 invalid out of 1), first error is: selector is required"
            events.append(Event.warning("FailedComputeMetricsReplicas", failure))
            return held(old.get("currentMetrics"))
        found = proposals(metric_specs, readings, current, status_replicas, tolerance)
        events += found.events
        statuses = found.statuses
        if found.invalid and (len(found.invalid) >= len(metric_specs) or found.replicas < current):
            first_spec, first = found.invalid[0]
            kind = str(first_spec.get("type"))
            message = f"the HPA was unable to compute the replica count: {first}"
            cond(ACTIVE, False, _FAILED.get(kind, "FailedGetMetric"), message)
            failure = (
                f"invalid metrics ({len(found.invalid)} invalid out of {len(metric_specs)}), "
                f"first error is: {_failure_text(first_spec, first)}"
            )
            events.append(Event.warning("FailedComputeMetricsReplicas", failure))
            metrics = statuses or old.get("currentMetrics")
            return Pass(
                status_with(current, int(old.get("desiredReplicas") or 0), metrics), events=events, history=history
            )
        best, best_name = found.replicas, found.name
        cond(
            ACTIVE,
            True,
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {best_name}",
        )
        desired = best
        if desired > current:
            reason = f"{best_name} above target"
        if desired < current:
            reason = "All metrics below target"
        outcome = behavior.normalize(
            spec.get("behavior"),
            history,
            current=current,
            desired=desired,
            minimum=minimum,
            maximum=maximum,
            now=now,
            downscale_window=downscale_window,
        )
        history = outcome.history
        cond(ABLE, True, *outcome.able)
        cond(LIMITED, outcome.limited[0], outcome.limited[1], outcome.limited[2])
        desired = outcome.replicas
    status = status_with(current, desired, statuses)
    if desired == current:
        return Pass(status, events=events, history=history)
    return Pass(status, scale_to=desired, reason=reason, events=events, history=history)


def rescaled(plan: Pass, hpa: Obj, *, error: str | None, now: float, stamp: str) -> Pass:
    """The pass after the shell's attempt to set the scale to ``plan.scale_to``."""
    assert plan.scale_to is not None
    desired, status = plan.scale_to, dict(plan.status)
    conditions: list[Obj] = list(status.get("conditions") or [])
    events = list(plan.events)
    current = int(status.get("currentReplicas") or 0)
    if error is not None:
        events.append(Event.warning("FailedRescale", f"New size: {desired}; reason: {plan.reason}; error: {error}"))
        conditions, _ = set_condition(
            conditions,
            ABLE,
            "False",
            "FailedUpdateScale",
            f"the HPA controller was unable to update the target scale: {error}",
            stamp,
        )
        old = hpa.get("status") or {}
        status |= {"desiredReplicas": int(old.get("desiredReplicas") or 0), "conditions": conditions}
        if old.get("currentMetrics"):
            status["currentMetrics"] = old["currentMetrics"]
        return Pass(status, events=events, history=plan.history)
    conditions, _ = set_condition(
        conditions,
        ABLE,
        "True",
        "SucceededRescale",
        f"the HPA controller was able to update the target scale to {desired}",
        stamp,
    )
    events.append(Event.normal("SuccessfulRescale", f"New size: {desired}; reason: {plan.reason}"))
    history = behavior.record_scale((hpa.get("spec") or {}).get("behavior"), plan.history, current, desired, now)
    status |= {"lastScaleTime": stamp, "conditions": conditions}
    return Pass(status, events=events, history=history)
