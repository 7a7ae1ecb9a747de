"""``autoscaling/v2`` HorizontalPodAutoscaler as a stored built-in: shape, defaults, validation, columns.

The plane stores and serves HPAs (the operator writes one per elastic PyTorchJob with metrics)
the way kube-apiserver v1.32 does: ``minReplicas`` defaults to 1, an HPA without metrics gets
the 80% CPU utilization metric, and a ``behavior`` that is given gets its unset rules and fields
filled (``api.autoscaling.scale_up_rules``/``scale_down_rules``: scale up at once by 4 pods or
100% per 15 s, scale down by 100% per 15 s after the controller's stabilization window); the spec
rules of ``ValidateHorizontalPodAutoscaler`` are checked in its words (bounds, target reference,
metric sources, behavior's windows and policies); ``kubectl get hpa`` prints the server's columns
(NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE), TARGETS from the spec's targets and the
``status.currentMetrics`` the autoscaler writes (``cpu: 45%/80%``, ``8334m/10 (avg)``) and
REPLICAS from ``status.currentReplicas``, as upstream's printer.

The plane's horizontal pod autoscaler (``cluster.clients.autoscaler``) writes ``status`` and
scales the target through its ``/scale``, from the metrics APIs (``cluster.clients.metrics``);
docs/autoscaling.md says how metrics flow.

Pure; callers: ``shapes`` (types), ``defaulting``, ``admission`` and ``tables`` (by ``KEY``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from trainyard.api.autoscaling import scale_down_rules, scale_up_rules
from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import causes
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "autoscaling/horizontalpodautoscalers"
DEFAULT_CPU_UTILIZATION = 80
_METRIC_TYPES = ("ContainerResource", "External", "Object", "Pods", "Resource")
# The MetricSpec member each metric type names its source in.
_SOURCE = {
    "ContainerResource": "containerResource",
    "External": "external",
    "Object": "object",
    "Pods": "pods",
    "Resource": "resource",
}

_TARGET = {"type": "string", "averageUtilization": "integer"}
_REFERENCE = {"apiVersion": "string", "kind": "string", "name": "string"}
SHAPE: dict[str, Any] = {
    "spec": {
        "scaleTargetRef": _REFERENCE,
        "minReplicas": "integer",
        "maxReplicas": "integer",
        "metrics": [
            {
                "type": "string",
                "resource": {"name": "string", "target": _TARGET},
                "containerResource": {"name": "string", "container": "string", "target": _TARGET},
                "pods": {"metric": {"name": "string"}, "target": _TARGET},
                "object": {"metric": {"name": "string"}, "describedObject": _REFERENCE, "target": _TARGET},
                "external": {"metric": {"name": "string"}, "target": _TARGET},
            }
        ],
        "behavior": "object",
    },
    "status": {
        "currentReplicas": "integer",
        "desiredReplicas": "integer",
        "observedGeneration": "integer",
        "lastScaleTime": "string",
        "currentMetrics": ["object"],
        "conditions": ["object"],
    },
}


def default(obj: Obj) -> None:
    """kube-apiserver's ``SetDefaults_HorizontalPodAutoscaler`` (with ``...Behavior``: only a given one is filled)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        target = {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": target}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        behavior["scaleUp"] = scale_up_rules(behavior.get("scaleUp"))
        behavior["scaleDown"] = scale_down_rules(behavior.get("scaleDown"))


def validate(obj: Obj) -> list[Cause]:
    """The spec rules of ``ValidateHorizontalPodAutoscaler`` (scale to zero off, as by default)."""
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    low, high = spec.get("minReplicas"), spec.get("maxReplicas") or 0
    if low is not None and low < 1:
        out.append(causes.invalid("spec.minReplicas", low, "must be greater than or equal to 1"))
    if high < 1:
        out.append(causes.invalid("spec.maxReplicas", high, "must be greater than 0"))
    if low is not None and high < low:
        out.append(causes.invalid("spec.maxReplicas", high, "must be greater than or equal to `minReplicas`"))
    ref = spec.get("scaleTargetRef") or {}
    for field in ("kind", "name"):
        value = ref.get(field)
        where = f"spec.scaleTargetRef.{field}"
        if not value:
            out.append(causes.required(where))
        else:
            out += [causes.invalid(where, value, m) for m in _path_segment(str(value))]
    for i, metric in enumerate(spec.get("metrics") or []):
        kind = metric.get("type")
        where = f"spec.metrics[{i}]"
        if not kind:
            out.append(causes.required(f"{where}.type", "must specify a metric source type"))
        elif kind not in _METRIC_TYPES:
            out.append(causes.not_supported(f"{where}.type", kind, _METRIC_TYPES))
        elif not isinstance(metric.get(_SOURCE[kind]), dict):
            detail = "must populate information for the given metric source"
            out.append(causes.required(f"{where}.{_SOURCE[kind]}", detail))
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        for direction in ("scaleUp", "scaleDown"):
            if isinstance(behavior.get(direction), dict):
                out += _rules(behavior[direction], f"spec.behavior.{direction}")
    return out


_SELECT = ("Disabled", "Max", "Min")
_POLICY_TYPES = ("Percent", "Pods")
MAX_WINDOW_SECONDS = 3600
MAX_PERIOD_SECONDS = 1800


def _rules(rules: Obj, where: str) -> list[Cause]:
    """``validateScalingRules``: the window, the select policy and each policy, in upstream's words."""
    out: list[Cause] = []
    window = rules.get("stabilizationWindowSeconds")
    if isinstance(window, int):
        if window < 0:
            out.append(
                causes.invalid(f"{where}.stabilizationWindowSeconds", window, "must be greater than or equal to zero")
            )
        elif window > MAX_WINDOW_SECONDS:
            detail = f"must be less than or equal to {MAX_WINDOW_SECONDS}"
            out.append(causes.invalid(f"{where}.stabilizationWindowSeconds", window, detail))
    select = rules.get("selectPolicy")
    if select is not None and select not in _SELECT:
        out.append(causes.not_supported(f"{where}.selectPolicy", select, _SELECT))
    for i, policy in enumerate(rules.get("policies") or []):
        at = f"{where}.policies[{i}]"
        if policy.get("type") not in _POLICY_TYPES:
            out.append(causes.not_supported(f"{at}.type", policy.get("type"), _POLICY_TYPES))
        value, period = policy.get("value"), policy.get("periodSeconds")
        if not isinstance(value, int) or value <= 0:
            out.append(causes.invalid(f"{at}.value", value, "must be greater than zero"))
        if not isinstance(period, int) or period <= 0:
            out.append(causes.invalid(f"{at}.periodSeconds", period, "must be greater than zero"))
        elif period > MAX_PERIOD_SECONDS:
            detail = f"must be less than or equal to {MAX_PERIOD_SECONDS}"
            out.append(causes.invalid(f"{at}.periodSeconds", period, detail))
    return out


def _path_segment(name: str) -> list[str]:
    """apimachinery's ``IsValidPathSegmentName``: the name must be usable in a URL path."""
    if name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in name]


# -- kubectl get hpa -------------------------------------------------------------------------------

_MAX_SHOWN = 2


def targets(obj: Obj) -> str:
    """kube-apiserver's ``formatHPAMetrics``: ``cpu: <unknown>/80%``, two shown then ``+ N more...``."""
    spec_metrics = (obj.get("spec") or {}).get("metrics") or []
    if not spec_metrics:
        return "<none>"
    statuses = (obj.get("status") or {}).get("currentMetrics") or []
    shown = [_target(m, statuses[i] if i < len(statuses) else {}) for i, m in enumerate(spec_metrics)]
    text = ", ".join(shown[:_MAX_SHOWN])
    return f"{text} + {len(shown) - _MAX_SHOWN} more..." if len(shown) > _MAX_SHOWN else text


def _target(metric: Obj, status: Obj) -> str:
    kind = metric.get("type")
    source = _SOURCE.get(str(kind))
    if source is None or not isinstance(metric.get(source), dict):
        return "<unknown type>"
    spec = metric[source]
    want = spec.get("target") or {}
    have = ((status.get(source) or {}).get("current") or {}) if isinstance(status, dict) else {}
    if kind in ("Resource", "ContainerResource"):
        name = spec.get("name", "")
        if want.get("averageValue") is not None:
            return f"{name}: {have.get('averageValue', '<unknown>')}/{want['averageValue']}"
        current = f"{have['averageUtilization']}%" if have.get("averageUtilization") is not None else "<unknown>"
        goal = f"{want['averageUtilization']}%" if want.get("averageUtilization") is not None else "<auto>"
        return f"{name}: {current}/{goal}"
    if kind == "Pods":
        return f"{have.get('averageValue', '<unknown>')}/{want.get('averageValue', '')}"
    if want.get("averageValue") is not None:
        return f"{have.get('averageValue', '<unknown>')}/{want['averageValue']} (avg)"
    return f"{have.get('value', '<unknown>')}/{want.get('value', '')}"


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def columns(name: Callable[[Obj, datetime], Any], age: Callable[[Obj, datetime], Any]) -> list[Any]:
    """The Table columns of kube-apiserver's HPA printer, given ``tables``' name and age cells."""

    def reference(obj: Obj, _: datetime) -> str:
        ref = _spec(obj).get("scaleTargetRef") or {}
        return f"{ref.get('kind', '')}/{ref.get('name', '')}"

    def min_pods(obj: Obj, _: datetime) -> str:
        low = _spec(obj).get("minReplicas")
        return "<unset>" if low is None else str(low)

    return [
        ("Name", "string", 0, name),
        ("Reference", "string", 0, reference),
        ("Targets", "string", 0, lambda o, _: targets(o)),
        ("MinPods", "string", 0, min_pods),
        ("MaxPods", "integer", 0, lambda o, _: int(_spec(o).get("maxReplicas") or 0)),
        ("Replicas", "integer", 0, lambda o, _: int((o.get("status") or {}).get("currentReplicas") or 0)),
        ("Age", "string", 0, age),
    ]
