"""What a pod requests and limits, by kube's rule (``resourcehelper.PodRequests``/``PodLimits``).

A container's missing request is its limit (the API server's pod defaulting); the pod's figure is
its containers' sum, raised to any init container's larger one, plus the pod's ``overhead``.
ResourceQuota admission and Kueue's Workloads count with it. Quantities that do not parse count
as absent. Pure.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainyard.api.quantity import parse

Amounts = dict[str, Decimal]


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse(value)[0]
    except ValueError:
        return None


def container_resources(container: Any) -> tuple[Amounts, Amounts]:
    """A container's (requests, limits), a missing request standing in for by its limit."""
    res = (container.get("resources") or {}) if isinstance(container, dict) else {}
    requests = {k: q for k, v in (res.get("requests") or {}).items() if (q := _quantity(v)) is not None}
    limits = {k: q for k, v in (res.get("limits") or {}).items() if (q := _quantity(v)) is not None}
    for name, value in limits.items():
        requests.setdefault(name, value)
    return requests, limits


def _maximum(a: Amounts, b: Amounts) -> Amounts:
    return {k: max(a.get(k, Decimal(0)), b.get(k, Decimal(0))) for k in set(a) | set(b)}


def pod_resources(spec: Any) -> tuple[Amounts, Amounts]:
    """A pod spec's (requests, limits)."""
    spec = spec if isinstance(spec, dict) else {}
    requests: Amounts = {}
    limits: Amounts = {}
    for c in spec.get("containers") or []:
        r, lim = container_resources(c)
        for k, v in r.items():
            requests[k] = requests.get(k, Decimal(0)) + v
        for k, v in lim.items():
            limits[k] = limits.get(k, Decimal(0)) + v
    for c in spec.get("initContainers") or []:
        r, lim = container_resources(c)
        requests, limits = _maximum(requests, r), _maximum(limits, lim)
    overhead = spec.get("overhead")
    for k, v in (overhead if isinstance(overhead, dict) else {}).items():
        if (q := _quantity(v)) is not None:
            requests[k] = requests.get(k, Decimal(0)) + q
            if k in limits:
                limits[k] += q
    return requests, limits
