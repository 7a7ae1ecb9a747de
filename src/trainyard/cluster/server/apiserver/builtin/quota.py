"""ResourceQuota and LimitRange (core/v1) as kube-apiserver's admission plugins decide them. Pure.

* **Usage** (``usage``: kube's quota evaluators): every object counts ``count/<plural>[.<group>]``
  (``count/pods``, ``count/pytorchjobs.kubeflow.org``) for as long as it is stored; the legacy
  object counts (``pods``, ``services``, ``secrets``, ``configmaps``, ``persistentvolumeclaims``,
  ``replicationcontrollers``, ``resourcequotas``) too, except that a pod in a terminal phase
  counts neither as ``pods`` nor for compute (``cpu``/``requests.cpu``, ``memory``/
  ``requests.memory``, ``limits.cpu``, ``limits.memory``, ``ephemeral-storage``, extended
  resources as ``requests.<name>``: the pod's requests, its largest init container counted by
  kube's rule); a claim counts ``requests.storage``.
* **Admission** (``charge``): for each quota of the namespace whose ``hard`` names something the
  new object uses, ``used + requested ≤ hard`` or 403 with kube-apiserver's words (``exceeded
  quota: <name>, requested: ..., used: ..., limited: ...``, only the exceeded resources, sorted);
  a quota on cpu or memory also requires every container to say its requests (or limits) for
  them (``failed quota: <name>: must specify limits.cpu for: c; ...``). The caller writes the
  charged ``status.used`` in the same request, as kube's admission does.
* **Validation** (``hard_problems``): a ``hard`` key is a standard quota resource, an extended
  ``requests.<domain>/<name>``, or a fully qualified ``count/...``; anything else is refused as
  kube-apiserver refuses it. A quota on a resource nothing serves (``count/foos.example.com``)
  is accepted, as upstream, and simply never counts.
* **LimitRange** (``limit_defaults``, ``limit_problems``): a pod's containers get the ``default``
  limits and ``defaultRequest`` requests of the namespace's ``Container`` limits (the
  ``kubernetes.io/limit-ranger`` annotation says what was set), then ``min``/``max``/
  ``maxLimitRequestRatio`` are checked in the LimitRanger plugin's words.

Not implemented: quota scopes and ``scopeSelector`` (a scoped quota is not enforced), the
``services.nodeports``/``services.loadbalancers`` counts, LimitRange ``Pod`` and
``PersistentVolumeClaim`` items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from trainyard.api.meta import Obj
from trainyard.api.quantity import BINARY_SUFFIXES, SUFFIXES, parse_quantity
from trainyard.cluster.server.apiserver import causes, errors
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "core/resourcequotas"
LIMITS_KEY = "core/limitranges"
LEGACY_COUNTS = {
    "core/pods": "pods",
    "core/services": "services",
    "core/secrets": "secrets",
    "core/configmaps": "configmaps",
    "core/persistentvolumeclaims": "persistentvolumeclaims",
    "core/replicationcontrollers": "replicationcontrollers",
    "core/resourcequotas": "resourcequotas",
}
COMPUTE = ("cpu", "memory", "ephemeral-storage")
STANDARD = frozenset(
    {
        *LEGACY_COUNTS.values(),
        "services.nodeports",
        "services.loadbalancers",
        *COMPUTE,
        *(f"requests.{r}" for r in COMPUTE),
        *(f"limits.{r}" for r in COMPUTE),
        "requests.storage",
    }
)
MUST_SPECIFY = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
"""Kube's "mistake" it keeps: a quota on these requires every container to set them."""
Amounts = dict[str, Decimal]


def amount(value: Any) -> Decimal:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError, ArithmeticError):
        return Decimal(0)


def count_name(group: str, plural: str) -> str:
    return f"count/{plural}" if not group else f"count/{plural}.{group}"


def terminal(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _container_usage(container: Mapping[str, Any]) -> tuple[Amounts, Amounts]:
    resources = container.get("resources") or {}
    requests = {k: amount(v) for k, v in (resources.get("requests") or {}).items()}
    limits = {k: amount(v) for k, v in (resources.get("limits") or {}).items()}
    for k, v in limits.items():
        requests.setdefault(k, v)  # the API server defaults a missing request to its limit
    return requests, limits


def _pod_totals(spec: Mapping[str, Any]) -> tuple[Amounts, Amounts]:
    requests: Amounts = {}
    limits: Amounts = {}
    for container in spec.get("containers") or []:
        req, lim = _container_usage(container)
        for k, v in req.items():
            requests[k] = requests.get(k, Decimal(0)) + v
        for k, v in lim.items():
            limits[k] = limits.get(k, Decimal(0)) + v
    for container in spec.get("initContainers") or []:
        req, lim = _container_usage(container)
        for k, v in req.items():
            requests[k] = max(requests.get(k, Decimal(0)), v)
        for k, v in lim.items():
            limits[k] = max(limits.get(k, Decimal(0)), v)
    for k, v in (spec.get("overhead") or {}).items():
        requests[k] = requests.get(k, Decimal(0)) + amount(v)
    return requests, limits


def usage(rt_key: str, group: str, plural: str, obj: Obj) -> Amounts:
    """What ``obj`` counts against a quota (kube's evaluators, above)."""
    out: Amounts = {count_name(group, plural): Decimal(1)}
    legacy = LEGACY_COUNTS.get(rt_key)
    if rt_key == "core/pods":
        if terminal(obj):
            return out
        requests, limits = _pod_totals(obj.get("spec") or {})
        for name, value in requests.items():
            if name in COMPUTE:
                out[name] = value
            out[f"requests.{name}"] = value
        for name, value in limits.items():
            if name in COMPUTE:
                out[f"limits.{name}"] = value
    if rt_key == "core/persistentvolumeclaims":
        storage = (((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
        if storage is not None:
            out["requests.storage"] = amount(storage)
    if legacy is not None:
        out[legacy] = Decimal(1)
    return out


def fmt(name: str, value: Decimal) -> str:
    """A quantity as kube prints it in quota messages: ``500m``, ``2``, ``16Gi``."""
    if value == value.to_integral_value():
        whole = int(value)
        if whole and ("memory" in name or "storage" in name):
            for suffix in BINARY_SUFFIXES:
                unit = int(SUFFIXES[suffix])
                if whole % unit == 0:
                    return f"{whole // unit}{suffix}"
        return str(whole)
    millis = value * 1000
    return f"{int(millis)}m" if millis == millis.to_integral_value() else str(value.normalize())


def _pretty(amounts: Mapping[str, Decimal]) -> str:
    return ",".join(f"{k}={fmt(k, amounts[k])}" for k in sorted(amounts))


def _missing(pod: Obj, required: set[str]) -> str:
    """Kube's pod Constraints: which containers leave a required cpu/memory figure unset."""
    wanted = required & set(MUST_SPECIFY)
    missing: dict[str, set[str]] = {}
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        _, limits = _container_usage(container)
        has = set()
        for r in ("cpu", "memory"):
            if r in (((container.get("resources") or {}).get("requests")) or {}):
                has |= {r, f"requests.{r}"}
            if r in limits:
                has.add(f"limits.{r}")
                has |= {r, f"requests.{r}"}  # the request defaults to the limit
        for name in wanted - has:
            missing.setdefault(name, set()).add(str(container.get("name", "")))
    return "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))


def charge(
    quotas: Iterable[Obj], rt_key: str, group: str, plural: str, obj: Obj, name: str
) -> list[tuple[str, Amounts]]:
    """The quotas ``obj``'s create charges (name, new ``status.used``); 403 when one would be exceeded."""
    delta = usage(rt_key, group, plural, obj)
    out = []
    for quota in sorted(quotas, key=lambda q: q["metadata"]["name"]):
        qname = quota["metadata"]["name"]
        hard = {
            k: amount(v)
            for k, v in (
                ((quota.get("status") or {}).get("hard")) or (quota.get("spec") or {}).get("hard") or {}
            ).items()
        }
        touched = {k for k in delta if k in hard}
        if rt_key == "core/pods" and (missing := _missing(obj, set(hard))):
            raise _forbidden(rt_key, plural, name, f"failed quota: {qname}: must specify {missing}")
        if not touched:
            continue
        used = {k: amount(v) for k, v in ((quota.get("status") or {}).get("used") or {}).items()}
        exceeded = {k for k in touched if used.get(k, Decimal(0)) + delta[k] > hard[k]}
        if exceeded:
            why = (
                f"exceeded quota: {qname}, requested: {_pretty({k: delta[k] for k in exceeded})}, "
                f"used: {_pretty({k: used.get(k, Decimal(0)) for k in exceeded})}, "
                f"limited: {_pretty({k: hard[k] for k in exceeded})}"
            )
            raise _forbidden(rt_key, plural, name, why)
        out.append((qname, {**used, **{k: used.get(k, Decimal(0)) + delta[k] for k in touched}}))
    return out


def _forbidden(rt_key: str, plural: str, name: str, why: str) -> errors.ApiError:
    resource = plural if rt_key.startswith("core/") else f"{plural}.{rt_key.split('/')[0]}"
    return errors.ApiError(403, "Forbidden", f'{resource} "{name}" is forbidden: {why}', {"name": name, "kind": plural})


def status(hard: Mapping[str, Any], used: Mapping[str, Decimal]) -> Obj:
    """``status`` of a quota: ``hard`` as written, ``used`` for each of its keys."""
    return {"hard": dict(hard), "used": {k: fmt(k, used.get(k, Decimal(0))) for k in hard}}


def hard_problems(quota: Obj) -> list[Cause]:
    """kube-apiserver's ResourceQuota validation of ``spec.hard`` keys and values."""
    out: list[Cause] = []
    for key, value in ((quota.get("spec") or {}).get("hard") or {}).items():
        path = f"spec.hard[{key}]"
        qualified = "/" in key
        if not qualified and key not in STANDARD and not key.startswith(("hugepages-", "requests.hugepages-")):
            out.append(causes.invalid(path, key, "must be a standard resource type or fully qualified"))
            out.append(causes.invalid(path, key, "must be a standard resource for quota"))
        try:
            amount = parse_quantity(value)
        except (ValueError, TypeError, ArithmeticError):
            continue  # the quantity's own format error is the schema's
        if amount < 0:
            out.append(causes.invalid(path, str(value), "must be greater than or equal to 0"))
    return out


# -- LimitRange ----------------------------------------------------------------------------------


def _container_items(ranges: Iterable[Obj]) -> list[Obj]:
    return [
        item
        for lr in sorted(ranges, key=lambda r: r["metadata"]["name"])
        for item in (lr.get("spec") or {}).get("limits") or []
        if item.get("type") == "Container"
    ]


def limit_defaults(pod: Obj, ranges: Iterable[Obj]) -> None:
    """Give the pod's containers the namespace's default limits and requests, in place."""
    items = _container_items(ranges)
    if not items:
        return
    notes: list[str] = []
    spec = pod.get("spec") or {}
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        resources = container.setdefault("resources", {})
        set_requests: list[str] = []
        set_limits: list[str] = []
        given_limits = dict(resources.get("limits") or {})
        limits = dict(given_limits)
        requests = dict(resources.get("requests") or {})
        for item in items:
            default = dict(item.get("default") or item.get("max") or {})
            default_request = dict(item.get("defaultRequest") or default)
            for r, v in default.items():
                if r not in limits:
                    limits[r] = v
                    set_limits.append(r)
            for r, v in default_request.items():
                if r not in requests:
                    # a limit the pod gave is its request too (the API server's pod defaulting)
                    requests[r] = given_limits.get(r, v)
                    set_requests.append(r)
        if limits:
            resources["limits"] = limits
        if requests:
            resources["requests"] = requests
        name = container.get("name", "")
        if set_requests:
            notes.append(f"{', '.join(sorted(set(set_requests)))} request for container {name}")
        if set_limits:
            notes.append(f"{', '.join(sorted(set(set_limits)))} limit for container {name}")
    if notes:
        annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
        annotations["kubernetes.io/limit-ranger"] = "LimitRanger plugin set: " + "; ".join(notes)


def limit_problems(pod: Obj, ranges: Iterable[Obj]) -> list[str]:
    """The LimitRanger plugin's min/max/ratio checks of the pod's containers, in its words."""
    out = []
    spec = pod.get("spec") or {}
    for item in _container_items(ranges):
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            resources = container.get("resources") or {}
            requests = {k: amount(v) for k, v in (resources.get("requests") or {}).items()}
            limits = {k: amount(v) for k, v in (resources.get("limits") or {}).items()}
            for r, v in (item.get("min") or {}).items():
                low = amount(v)
                if r in requests and requests[r] < low:
                    out.append(f"minimum {r} usage per Container is {v}, but request is {fmt(r, requests[r])}")
                elif r not in requests:
                    out.append(f"minimum {r} usage per Container is {v}.  No request is specified")
            for r, v in (item.get("max") or {}).items():
                high = amount(v)
                if r in limits and limits[r] > high:
                    out.append(f"maximum {r} usage per Container is {v}, but limit is {fmt(r, limits[r])}")
                elif r not in limits:
                    out.append(f"maximum {r} usage per Container is {v}.  No limit is specified")
            for r, v in (item.get("maxLimitRequestRatio") or {}).items():
                if r in limits and requests.get(r):
                    ratio = limits[r] / requests[r]
                    if ratio > amount(v):
                        out.append(
                            f"{r} max limit to request ratio per Container is {v}, but provided ratio is {ratio:.6f}"
                        )
    return out


def limits_forbidden(pod_name: str, problems: list[str]) -> errors.ApiError:
    why = problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]"
    return errors.ApiError(
        403, "Forbidden", f'pods "{pod_name}" is forbidden: {why}', {"name": pod_name, "kind": "pods"}
    )
