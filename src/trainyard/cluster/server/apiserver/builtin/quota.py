"""``v1`` ResourceQuota: its validation, what an object charges to it, and the admission verdict.

As kube-apiserver (v1.32) and kube-controller-manager's resourcequota controller count:

* **What counts.** A pod charges ``pods``, ``count/pods``, ``cpu``/``requests.cpu``,
  ``memory``/``requests.memory``, ``limits.cpu``, ``limits.memory``, the ``ephemeral-storage``
  trio and ``requests.<name>`` for an extended resource (``requests.nvidia.com/gpu``), summed over
  its containers (the larger of that and any one init container, as ``PodRequests``), but only
  while it is not terminal (phase ``Succeeded``/``Failed``); ``count/pods`` counts it until it is
  gone, as upstream's pod evaluator. A request left out next to a limit counts as the limit (the
  API server's pod defaulting). Any other object charges ``count/<plural>[.<group>]`` (any
  resource, served or not, as upstream builds an object-count evaluator on demand) and, for
  ``configmaps``, ``secrets``, ``services``, ``persistentvolumeclaims``, ``resourcequotas`` and
  ``replicationcontrollers``, the legacy name too.
* **Validation** (``ValidateResourceQuota``): each ``spec.hard`` key must be a qualified name; a
  key without ``/`` must be a standard resource and a standard quota resource; values are
  non-negative, integers for the object counts and extended names (``count/...``). Field paths
  are ``spec.hard[<key>]``. A key upstream accepts but nothing here can count (``count/`` of a
  resource we do not serve, ``requests.storage``) is accepted, as upstream does, and stays 0.
* **Admission** (``check``): a create whose charge would take any hard key over its limit is 403
  ``<resource> "<name>" is forbidden: exceeded quota: <quota>, requested: k=v, used: k=v,
  limited: k=v`` (keys sorted, joined by commas); a pod that leaves out a request or limit a
  quota restricts (cpu and memory only, upstream's backward-compatibility rule) is 403
  ``failed quota: <quota>: must specify limits.cpu for: a,b; requests.memory for: a``.

Not evaluated: ``spec.scopes`` and ``scopeSelector`` (accepted and stored; a scoped quota counts
as unscoped), and pod updates (pod resources cannot change here). Pure; callers: ``quotas`` (the
write path's bookkeeping), ``admission`` (validation), ``tables``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import ROUND_CEILING, Decimal
from typing import Any

from trainyard.api.meta import Obj
from trainyard.api.podresources import container_resources, pod_resources
from trainyard.api.quantity import BINARY_SUFFIXES, SUFFIXES, parse
from trainyard.cluster.server.apiserver import causes, errors
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "core/resourcequotas"
Usage = dict[str, Decimal]

LEGACY_COUNTS = (
    "configmaps",
    "persistentvolumeclaims",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "services",
)
_STANDARD_QUOTA = frozenset(
    {
        "cpu",
        "memory",
        "ephemeral-storage",
        "requests.cpu",
        "requests.memory",
        "requests.storage",
        "requests.ephemeral-storage",
        "limits.cpu",
        "limits.memory",
        "limits.ephemeral-storage",
        "pods",
        "resourcequotas",
        "services",
        "replicationcontrollers",
        "secrets",
        "persistentvolumeclaims",
        "configmaps",
        "services.nodeports",
        "services.loadbalancers",
    }
)
_STANDARD = (_STANDARD_QUOTA - {"configmaps"}) | {"storage"}
_INTEGER = frozenset(
    {"pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps", "persistentvolumeclaims"}
    | {"services.nodeports", "services.loadbalancers"}
)
# Only these make a quota insist that every container states them (pods.go's validationSet).
_MUST_SPECIFY = frozenset({"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"})
_NATIVE_TRIOS = ("cpu", "memory", "ephemeral-storage")

SHAPE: dict[str, Any] = {
    "spec": {"hard": {"*": "quantity"}, "scopes": ["string"], "scopeSelector": "object"},
    "status": {"hard": {"*": "quantity"}, "used": {"*": "quantity"}},
}


# -- names --------------------------------------------------------------------------------------


def _huge_pages(name: str) -> bool:
    return name.startswith(("hugepages-", "requests.hugepages-"))


def _extended(name: str) -> bool:
    """``IsExtendedResourceName``: a qualified name outside ``kubernetes.io`` that is not ``requests.*``."""
    if "/" not in name or "kubernetes.io/" in name or name.startswith("requests."):
        return False
    return not causes.is_qualified_name("requests." + name)


def validate(obj: Obj) -> list[Cause]:
    """The 422 causes of a ResourceQuota's ``spec.hard``, as ``ValidateResourceQuotaSpec`` words them."""
    out: list[Cause] = []
    hard = (obj.get("spec") or {}).get("hard") or {}
    for key in sorted(hard):
        path = f"spec.hard[{key}]"
        problems = causes.is_qualified_name(key)
        out += [causes.invalid(path, key, p) for p in problems]
        if not problems and "/" not in key:
            if key not in _STANDARD and not _huge_pages(key):
                out.append(causes.invalid(path, key, "must be a standard resource type or fully qualified"))
            if key not in _STANDARD_QUOTA and not _huge_pages(key):
                out.append(causes.invalid(path, key, "must be a standard resource for quota"))
        try:
            value, _ = parse(hard[key])
        except ValueError:
            continue  # the shape check already refused it
        if value < 0:
            out.append(causes.invalid(path, str(hard[key]), "must be greater than or equal to 0"))
        if (key in _INTEGER or _extended(key)) and (value * 1000) % 1000:
            out.append(causes.invalid(path, str(hard[key]), "must be an integer"))
    return out


def count_name(plural: str, group: str) -> str:
    """``count/configmaps``, ``count/pytorchjobs.kubeflow.org``."""
    return f"count/{plural}.{group}" if group else f"count/{plural}"


def counted_resource(key: str) -> str | None:
    """The storage key (``kubeflow.org/pytorchjobs``) a hard key counts objects of, or None."""
    if key.startswith("count/"):
        plural, _, group = key[len("count/") :].partition(".")
        return f"{group or 'core'}/{plural}"
    if key in LEGACY_COUNTS:
        return f"core/{key}"
    return None


# -- usage -----------------------------------------------------------------------------------------


def _quantity(value: Any) -> Decimal | None:
    try:
        return parse(value)[0]
    except ValueError:
        return None


def _compute(requests: Mapping[str, Decimal], limits: Mapping[str, Decimal]) -> Usage:
    """``podComputeUsageHelper``: what one set of requests and limits charges."""
    out: Usage = {"pods": Decimal(1)}
    for name in _NATIVE_TRIOS:
        if name in requests:
            out[name] = out[f"requests.{name}"] = requests[name]
        if name in limits:
            out[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            out[name] = out[f"requests.{name}"] = value
        elif _extended(name):
            out[f"requests.{name}"] = value
    return out


def terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def pod_usage(pod: Obj) -> Usage:
    """What ``pod`` charges now: ``count/pods`` always, its compute resources while not terminal."""
    if terminal(pod):
        return {"count/pods": Decimal(1)}
    requests, limits = pod_resources(pod.get("spec"))
    return {**_compute(requests, limits), "count/pods": Decimal(1)}


def object_usage(key: str, plural: str, group: str, obj: Obj) -> Usage:
    """What creating ``obj`` (of storage key ``key``) charges."""
    if key == "core/pods":
        return pod_usage(obj)
    out = {count_name(plural, group): Decimal(1)}
    if not group and plural in LEGACY_COUNTS:
        out[plural] = Decimal(1)
    return out


def add(into: Usage, usage: Mapping[str, Decimal], sign: int = 1) -> None:
    for k, v in usage.items():
        into[k] = into.get(k, Decimal(0)) + sign * v


# -- admission -----------------------------------------------------------------------------------


def missing(pod: Obj, hard: Iterable[str]) -> str | None:
    """``must specify ...`` when a container leaves out what the quota restricts, else None."""
    required = _MUST_SPECIFY.intersection(hard)
    if not required:
        return None
    lacking: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for c in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        has = set(_compute(*container_resources(c)))
        for name in required - has:
            lacking.setdefault(name, set()).add(str(c.get("name", "")) if isinstance(c, dict) else "")
    if not lacking:
        return None
    return "must specify " + "; ".join(f"{k} for: {','.join(sorted(lacking[k]))}" for k in sorted(lacking))


def _hard(quota: Obj) -> dict[str, Decimal]:
    hard = (quota.get("status") or {}).get("hard") or (quota.get("spec") or {}).get("hard") or {}
    return {k: q for k, v in hard.items() if (q := _quantity(v)) is not None}


def exceeded(quota: Obj, requested: Mapping[str, Decimal], used: Mapping[str, Decimal]) -> str | None:
    """``exceeded quota: ...`` when ``requested`` on top of ``used`` passes ``quota``'s hard limits."""
    hard = _hard(quota)
    over = sorted(k for k, v in requested.items() if k in hard and used.get(k, Decimal(0)) + v > hard[k])
    if not over:
        return None
    raw_hard = (quota.get("spec") or {}).get("hard") or {}

    def listed(values: Mapping[str, Decimal], binary_of: Mapping[str, Any]) -> str:
        return ",".join(f"{k}={format_quantity(values.get(k, Decimal(0)), _binary(binary_of.get(k)))}" for k in over)

    return (
        f"exceeded quota: {quota['metadata']['name']}, requested: {listed(requested, raw_hard)}, "
        f"used: {listed(used, raw_hard)}, limited: {listed(hard, raw_hard)}"
    )


def forbidden(qualified: str, group: str, plural: str, name: str, why: str) -> errors.ApiError:
    """The 403 of an admission plugin, as ``admission.NewForbidden`` builds it."""
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return errors.ApiError(403, "Forbidden", f'{qualified} "{name}" is forbidden: {why}', details)


# -- status ------------------------------------------------------------------------------------------


def _binary(written: Any) -> bool:
    try:
        return parse(written)[1] in BINARY_SUFFIXES
    except ValueError:
        return False


def format_quantity(value: Decimal, binary: bool = False) -> str:
    """A quantity in resource.Quantity's canonical form: ``1500m``, ``2``, ``16Gi``, ``1536Mi``, ``1k``."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = abs(value)
    if binary and value == value.to_integral_value() and value >= 1024:
        for suffix in BINARY_SUFFIXES:
            unit = SUFFIXES[suffix]
            if value % unit == 0:
                return f"{sign}{int(value / unit)}{suffix}"
    milli = (value * 1000).to_integral_value(rounding=ROUND_CEILING)
    for suffix, exponent in (("E", 21), ("P", 18), ("T", 15), ("G", 12), ("M", 9), ("k", 6), ("", 3)):
        unit = Decimal(10) ** exponent
        if milli % unit == 0:
            return f"{sign}{int(milli / unit)}{suffix}"
    return f"{sign}{int(milli)}m"


def status(quota: Obj, used: Mapping[str, Decimal]) -> Obj:
    """``status.hard`` (as ``spec.hard``) and ``status.used`` for every hard key, formatted."""
    hard = dict((quota.get("spec") or {}).get("hard") or {})
    return {
        "hard": hard,
        "used": {k: format_quantity(used.get(k, Decimal(0)), _binary(hard[k])) for k in sorted(hard)},
    }


def columns_cells(quota: Obj) -> tuple[str, str]:
    """kubectl's REQUEST and LIMIT cells: ``key: used/hard`` pairs, the ``limits.*`` ones apart."""
    st = quota.get("status") or {}
    hard, used = st.get("hard") or {}, st.get("used") or {}
    request: list[str] = []
    limit: list[str] = []
    for key in sorted((quota.get("spec") or {}).get("hard") or {}):
        cell = f"{key}: {used.get(key, '0')}/{hard.get(key, '0')}"
        (limit if key.split(".")[0] == "limits" and "." in key else request).append(cell)
    return ", ".join(request), ", ".join(limit)
