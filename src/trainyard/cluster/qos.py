"""A pod's quality-of-service class and the per-container limits the local node enforces.

``qos_class`` follows Kubernetes' ``GetPodQOS``: only ``cpu`` and ``memory`` count; a pod whose
containers (init containers included) request and limit nothing is ``BestEffort``; one where
every container limits both and the summed requests equal the summed limits is ``Guaranteed``;
anything else is ``Burstable``. A request left out next to a limit counts as equal to the limit,
as the API server's defaulting makes it. Pure: no I/O. Callers: the API server on pod creation,
the node agent in each status it reports and for the limits it enforces, and ``node.threads``
(a container's CPU share).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any

from trainyard.api.meta import Obj
from trainyard.api.quantity import parse_quantity

COMPUTE = ("cpu", "memory")


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse_quantity(value)
    except ValueError:
        return None


def _positive(resources: Any) -> dict[str, Decimal]:
    out: dict[str, Decimal] = {}
    if not isinstance(resources, dict):
        return out
    for name in COMPUTE:
        value = _quantity(resources[name]) if name in resources else None
        if value is not None and value > 0:
            out[name] = value
    return out


def _containers(spec: Any) -> list[Obj]:
    if not isinstance(spec, dict):
        return []
    found: list[Obj] = []
    for key in ("initContainers", "containers"):
        listed = spec.get(key)
        if isinstance(listed, list):
            found += [c for c in listed if isinstance(c, dict)]
    return found


def qos_class(spec: Any) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort`` for a pod ``spec``."""
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    for container in _containers(spec):
        resources = container.get("resources")
        resources = resources if isinstance(resources, dict) else {}
        found_limits = _positive(resources.get("limits"))
        asked = resources.get("requests")
        asked = asked if isinstance(asked, dict) else {}
        defaulted = {name: value for name, value in found_limits.items() if name not in asked}
        found_requests = {**defaulted, **_positive(asked)}
        for name, value in found_requests.items():
            requests[name] = requests.get(name, Decimal(0)) + value
        for name, value in found_limits.items():
            limits[name] = limits.get(name, Decimal(0)) + value
        if set(found_limits) != set(COMPUTE):
            guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    matching = all(limits.get(name) == value for name, value in requests.items())
    if guaranteed and matching and len(requests) == len(limits):
        return "Guaranteed"
    return "Burstable"


def memory_limit(container: Obj) -> int | None:
    """``resources.limits.memory`` in bytes (rounded up, as Kubernetes does), or None when unlimited."""
    value = _quantity(((container.get("resources") or {}).get("limits") or {}).get("memory", ""))
    return math.ceil(value) if value is not None and value > 0 else None


def _cpu_millis(container: Obj, kind: str) -> int | None:
    value = _quantity(((container.get("resources") or {}).get(kind) or {}).get("cpu", ""))
    return math.ceil(value * 1000) if value is not None and value > 0 else None


def cpu_limit_millis(container: Obj) -> int | None:
    """``resources.limits.cpu`` in millicores (rounded up), or None when unlimited."""
    return _cpu_millis(container, "limits")


def cpu_request_millis(container: Obj) -> int | None:
    """``resources.requests.cpu`` in millicores (rounded up), or None when nothing is requested."""
    return _cpu_millis(container, "requests")


def format_bytes(value: int) -> str:
    """A byte count the way a user would write it in a limit (``300Mi``), rounded to one decimal."""
    for unit, size in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if value >= size:
            amount = value / size
            return f"{amount:.0f}{unit}" if amount == int(amount) else f"{amount:.1f}{unit}"
    return str(value)
