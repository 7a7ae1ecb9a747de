"""``v1`` LimitRange: its defaults and the LimitRanger admission of new pods.

As kube-apiserver (v1.32): a stored LimitRange's ``Container`` items default ``default`` from
``max`` and ``defaultRequest`` from ``default`` then ``min`` (``SetDefaults_LimitRangeItem``).
When a pod is created, each LimitRange of its namespace, in name order, first fills in the
containers' (and init containers') missing limits from ``default`` and requests from
``defaultRequest``, recording what it set in the ``kubernetes.io/limit-ranger`` annotation
(``LimitRanger plugin set: cpu, memory request for container x; cpu limit for container x``),
then checks ``min``, ``max`` and ``maxLimitRequestRatio`` per ``Container`` and, summed over
containers, per ``Pod``; a pod that breaks one is 403 ``pods "p" is forbidden: Maximum cpu
usage per Container is 1, but limit is 2.`` (several problems: ``[a, b]``, Go's aggregate).
This runs before quota admission, so a defaulted pod is what the quota charges.

Not done: ``PersistentVolumeClaim`` items (nothing here provisions storage by size). Pure;
callers: ``objects`` (pod create), ``defaulting``.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import Any

from trainyard.api.meta import Obj
from trainyard.api.quantity import parse
from trainyard.cluster.server.apiserver.builtin.quota import format_quantity

KEY = "core/limitranges"
ANNOTATION = "kubernetes.io/limit-ranger"
_LIST = {"*": "quantity"}
SHAPE: dict[str, Any] = {
    "spec": {
        "limits": [
            {
                "type": "string",
                "max": _LIST,
                "min": _LIST,
                "default": _LIST,
                "defaultRequest": _LIST,
                "maxLimitRequestRatio": _LIST,
            }
        ]
    }
}


def default(obj: Obj) -> None:
    """``SetDefaults_LimitRangeItem`` for every ``Container`` item, in place."""
    for item in (obj.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") != "Container":
            continue
        defaults = dict(item.get("default") or {})
        requests = dict(item.get("defaultRequest") or {})
        for key, value in (item.get("max") or {}).items():
            defaults.setdefault(key, value)
        for key, value in defaults.items():
            requests.setdefault(key, value)
        for key, value in (item.get("min") or {}).items():
            requests.setdefault(key, value)
        if defaults:
            item["default"] = defaults
        if requests:
            item["defaultRequest"] = requests


def _q(value: Any) -> Decimal:
    try:
        return parse(value)[0]
    except ValueError:
        return Decimal(0)


def _text(value: Any) -> str:
    try:
        amount, suffix = parse(value)
    except ValueError:
        return str(value)
    return format_quantity(amount, suffix in ("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))


def _merge_defaults(pod: Obj, limit_range: Obj) -> None:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if isinstance(item, dict) and item.get("type") == "Container":
            requests.update(item.get("defaultRequest") or {})
            limits.update(item.get("default") or {})
    if not requests and not limits:
        return
    notes: list[str] = []
    spec = pod.get("spec") or {}
    for field, word in (("containers", "container"), ("initContainers", "init container")):
        for c in spec.get(field) or []:
            if not isinstance(c, dict):
                continue
            res = c.get("resources")
            if not isinstance(res, dict):
                res = c["resources"] = {}
            have_limits: dict[str, Any] = res["limits"] if isinstance(res.get("limits"), dict) else {}
            have_requests: dict[str, Any] = res["requests"] if isinstance(res.get("requests"), dict) else {}
            set_limits = sorted(k for k in limits if k not in have_limits)
            set_requests = sorted(k for k in requests if k not in have_requests)
            if set_limits:
                res["limits"] = {**have_limits, **{k: limits[k] for k in set_limits}}
            if set_requests:
                res["requests"] = {**have_requests, **{k: requests[k] for k in set_requests}}
            if set_requests:
                notes.append(f"{', '.join(set_requests)} request for {word} {c.get('name', '')}")
            if set_limits:
                notes.append(f"{', '.join(set_limits)} limit for {word} {c.get('name', '')}")
    if notes:
        annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)


def _min(kind: str, name: str, enforced: Any, request: dict[str, Any], limit: dict[str, Any]) -> str | None:
    bound = _text(enforced)
    if name not in request:
        return f"Minimum {name} usage per {kind} is {bound}.  No request is specified."
    if _q(request[name]) < _q(enforced):
        return f"Minimum {name} usage per {kind} is {bound}, but request is {_text(request[name])}."
    if name in limit and _q(limit[name]) < _q(enforced):
        return f"Minimum {name} usage per {kind} is {bound}, but limit is {_text(limit[name])}."
    return None


def _max(kind: str, name: str, enforced: Any, request: dict[str, Any], limit: dict[str, Any]) -> str | None:
    bound = _text(enforced)
    if name not in limit:
        return f"Maximum {name} usage per {kind} is {bound}.  No limit is specified."
    if _q(limit[name]) > _q(enforced):
        return f"Maximum {name} usage per {kind} is {bound}, but limit is {_text(limit[name])}."
    if name in request and _q(request[name]) > _q(enforced):
        return f"Maximum {name} usage per {kind} is {bound}, but request is {_text(request[name])}."
    return None


def _ratio(kind: str, name: str, enforced: Any, request: dict[str, Any], limit: dict[str, Any]) -> str | None:
    bound = _text(enforced)
    req, lim = _q(request.get(name, 0)), _q(limit.get(name, 0))
    if name not in request or req == 0:
        return f"{name} max limit to request ratio per {kind} is {bound}, but no request is specified or request is 0."
    if name not in limit or lim == 0:
        return f"{name} max limit to request ratio per {kind} is {bound}, but no limit is specified or limit is 0."
    ratio = lim / req
    if ratio > _q(enforced):
        return f"{name} max limit to request ratio per {kind} is {bound}, but provided ratio is {float(ratio):f}."
    return None


def _sum(lists: list[dict[str, Any]]) -> dict[str, Any]:
    """Upstream's ``sum``: a resource only when every container states it."""
    keys = {k for entry in lists for k in entry}
    return {k: sum((_q(e[k]) for e in lists), Decimal(0)) for k in keys if all(k in e for e in lists)}


def _problems(pod: Obj, limit_range: Obj) -> list[str]:
    out: list[str] = []
    containers = [c for c in (pod.get("spec") or {}).get("containers") or [] if isinstance(c, dict)]

    def parts(c: Obj) -> tuple[dict[str, Any], dict[str, Any]]:
        res = c.get("resources") or {}
        return dict(res.get("requests") or {}), dict(res.get("limits") or {})

    for item in (limit_range.get("spec") or {}).get("limits") or []:
        if not isinstance(item, dict) or item.get("type") not in ("Container", "Pod"):
            continue
        kind = item["type"]
        if kind == "Container":
            targets = [parts(c) for c in containers]
        else:
            pairs = [parts(c) for c in containers]
            targets = [(_sum([r for r, _ in pairs]), _sum([lim for _, lim in pairs]))]
        for request, limit in targets:
            for rule, field in ((_min, "min"), (_max, "max"), (_ratio, "maxLimitRequestRatio")):
                for name, enforced in (item.get(field) or {}).items():
                    if (problem := rule(kind, name, enforced, request, limit)) is not None:
                        out.append(problem)
    return out


def admit_pod(pod: Obj, ranges: Iterable[Obj]) -> str | None:
    """Default ``pod`` in place from each LimitRange and check it; the first refusal's words, or None."""
    for limit_range in sorted(ranges, key=lambda r: r["metadata"]["name"]):
        _merge_defaults(pod, limit_range)
        problems = _problems(pod, limit_range)
        if problems:
            return problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return None
