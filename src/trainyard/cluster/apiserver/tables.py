"""Server-side printing: ``meta.k8s.io/v1`` Tables for ``kubectl get`` (reference §7).

Built-in kinds get kubectl's familiar columns; custom resources get their CRD's
``additionalPrinterColumns`` (or Name and Age). Ages are computed against the injected clock.

Pods, the one kind listed by the thousand, also have a fast path (``table_encoded``): the same
Table straight from the encoded objects, decoding only the fields the columns read and copying
each row's metadata through undecoded. A test holds it to the generic ``table``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from functools import lru_cache
from typing import Any

import msgspec

from trainyard.api.meta import parse_time
from trainyard.cluster.apiserver.builtin import autoscaling, jobs, leases
from trainyard.cluster.apiserver.registry import ResourceType
from trainyard.cluster.apiserver.requests.jsonpath import JSONPathError, evaluate
from trainyard.cluster.storage import codec
from trainyard.cluster.storage.store import Obj

Column = tuple[str, str, int, Callable[[Obj, datetime], Any]]  # name, type, priority, cell


def human_age(since: str | None, now: datetime) -> str:
    """kubectl's ``HumanDuration``: 45s, 5m, 3h12m, 4d, 2y..."""
    if not since:
        return "<unknown>"
    try:
        seconds = int((now - _parsed(since)).total_seconds())
    except (ValueError, TypeError, OverflowError):
        return "<invalid>"  # a client wrote a timestamp that is not RFC 3339; kubectl shows the same
    if seconds < 0:
        return "0s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if hours < 3:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


@lru_cache(maxsize=4096)
def _parsed(since: str) -> datetime:
    # Objects created together share their timestamp (second precision): parse each once.
    return parse_time(since)


def _age(obj: Obj, now: datetime) -> str:
    return human_age(obj.get("metadata", {}).get("creationTimestamp"), now)


def _pod_status(pod: Obj) -> str:
    return _pod_reason(_as_pod(pod), bool((pod.get("metadata") or {}).get("deletionTimestamp")))


def _pod_ready(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_restarts(pod: Obj, now: datetime) -> str:
    count, finished = _pod_restart_counts(_as_pod(pod))
    return restarts_cell(count, finished, now)


def restarts_cell(count: int, last_finished: list[str | None], now: datetime) -> str:
    """kubectl's RESTARTS cell: the count, and how long ago the last restarted run ended (``3 (5s ago)``)."""
    latest = max((t for t in last_finished if t), default=None)
    return f"{count} ({human_age(latest, now)} ago)" if count and latest else str(count)


def _readiness_gates(pod: Obj) -> str:
    gates = (pod.get("spec") or {}).get("readinessGates") or []
    if not gates:
        return "<none>"
    true = {c.get("type") for c in (pod.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    return f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"


def _node_address(node: Obj, kind: str) -> str:
    found = [a.get("address", "") for a in (node.get("status") or {}).get("addresses") or [] if a.get("type") == kind]
    return found[0] if found else "<none>"


def _node_roles(node: Obj) -> str:
    """Roles from ``node-role.kubernetes.io/<role>`` and ``kubernetes.io/role`` labels, as kubectl prints them."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    roles = {k.partition("/")[2] for k in labels if k.startswith("node-role.kubernetes.io/")} - {""}
    if labels.get("kubernetes.io/role"):
        roles.add(labels["kubernetes.io/role"])
    return ",".join(sorted(roles)) or "<none>"


def _node_info(node: Obj, key: str) -> str:
    return str(((node.get("status") or {}).get("nodeInfo") or {}).get(key) or "<unknown>")


def _svc_ports(svc: Obj) -> str:
    ports = (svc.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _involved(event: Obj) -> str:
    ref = event.get("involvedObject") or {}
    return f"{ref.get('kind', '').lower()}/{ref.get('name', '')}"


def _event_source(event: Obj) -> str:
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    return ", ".join(part for part in (component, instance) if part)


def _name(obj: Obj, _: datetime) -> str:
    return str(obj.get("metadata", {}).get("name", ""))


_ACCESS_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _at(obj: Any, *path: str) -> Any:
    """The value at ``path``, or None where any step is missing or not an object (stored objects vary)."""
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _text(obj: Obj, *path: str, default: str = "") -> str:
    value = _at(obj, *path)
    return default if value is None or value == "" or isinstance(value, (dict, list)) else str(value)


def _access_modes(modes: Any) -> str:
    return ",".join(_ACCESS_MODES.get(str(m), str(m)) for m in modes) if isinstance(modes, list) else ""


def _storage_phase(obj: Obj) -> str:
    if _at(obj, "metadata", "deletionTimestamp"):
        return "Terminating"
    return _text(obj, "status", "phase")


def _claim_ref(pv: Obj) -> str:
    name = _text(pv, "spec", "claimRef", "name")
    return f"{_text(pv, 'spec', 'claimRef', 'namespace')}/{name}" if name else ""


def _storage_class_name(sc: Obj, _: datetime) -> str:
    default = _at(sc, "metadata", "annotations", "storageclass.kubernetes.io/is-default-class")
    return _name(sc, _) + (" (default)" if default == "true" else "")


BUILTIN_COLUMNS: dict[str, list[Column]] = {
    "core/pods": [
        ("Name", "string", 0, _name),
        ("Ready", "string", 0, lambda o, _: _pod_ready(o)),
        ("Status", "string", 0, lambda o, _: _pod_status(o)),
        ("Restarts", "string", 0, _pod_restarts),
        ("Age", "string", 0, _age),
        ("IP", "string", 1, lambda o, _: (o.get("status") or {}).get("podIP") or "<none>"),
        ("Node", "string", 1, lambda o, _: (o.get("spec") or {}).get("nodeName") or "<none>"),
        ("Nominated Node", "string", 1, lambda o, _: (o.get("status") or {}).get("nominatedNodeName") or "<none>"),
        ("Readiness Gates", "string", 1, lambda o, _: _readiness_gates(o)),
    ],
    "core/services": [
        ("Name", "string", 0, _name),
        ("Type", "string", 0, lambda o, _: (o.get("spec") or {}).get("type", "ClusterIP")),
        ("Cluster-IP", "string", 0, lambda o, _: (o.get("spec") or {}).get("clusterIP") or "<none>"),
        ("External-IP", "string", 0, lambda o, _: "<none>"),
        ("Port(s)", "string", 0, lambda o, _: _svc_ports(o)),
        ("Age", "string", 0, _age),
        (
            "Selector",
            "string",
            1,
            lambda o, _: (
                ",".join(f"{k}={v}" for k, v in ((o.get("spec") or {}).get("selector") or {}).items()) or "<none>"
            ),
        ),
    ],
    "core/namespaces": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, lambda o, _: (o.get("status") or {}).get("phase", "Active")),
        ("Age", "string", 0, _age),
    ],
    "core/events": [
        (
            "Last Seen",
            "string",
            0,
            lambda o, now: human_age(
                o.get("lastTimestamp") or o.get("eventTime") or o.get("metadata", {}).get("creationTimestamp"),
                now,
            ),
        ),
        ("Type", "string", 0, lambda o, _: o.get("type", "")),
        ("Reason", "string", 0, lambda o, _: o.get("reason", "")),
        (
            "Object",
            "string",
            0,
            lambda o, _: _involved(o),
        ),
        ("Subobject", "string", 1, lambda o, _: (o.get("involvedObject") or {}).get("fieldPath", "")),
        ("Source", "string", 1, lambda o, _: _event_source(o)),
        ("Message", "string", 0, lambda o, _: o.get("message", "")),
        (
            "First Seen",
            "string",
            1,
            lambda o, now: human_age(o.get("firstTimestamp") or o.get("eventTime"), now),
        ),
        ("Count", "integer", 1, lambda o, _: int(o.get("count") or 1)),
        ("Name", "string", 1, _name),
    ],
    "core/configmaps": [
        ("Name", "string", 0, _name),
        ("Data", "integer", 0, lambda o, _: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
        ("Age", "string", 0, _age),
    ],
    "core/secrets": [
        ("Name", "string", 0, _name),
        ("Type", "string", 0, lambda o, _: o.get("type", "Opaque")),
        ("Data", "integer", 0, lambda o, _: len(o.get("data") or {})),
        ("Age", "string", 0, _age),
    ],
    "core/serviceaccounts": [
        ("Name", "string", 0, _name),
        ("Secrets", "integer", 0, lambda o, _: len(o.get("secrets") or [])),
        ("Age", "string", 0, _age),
    ],
    "core/nodes": [
        ("Name", "string", 0, _name),
        (
            "Status",
            "string",
            0,
            lambda o, _: next(
                (
                    "Ready" if c.get("status") == "True" else "NotReady"
                    for c in (o.get("status") or {}).get("conditions") or []
                    if c.get("type") == "Ready"
                ),
                "Unknown",
            ),
        ),
        ("Roles", "string", 0, lambda o, _: _node_roles(o)),
        ("Age", "string", 0, _age),
        (
            "Version",
            "string",
            0,
            lambda o, _: ((o.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion", ""),
        ),
        ("Internal-IP", "string", 1, lambda o, _: _node_address(o, "InternalIP")),
        ("External-IP", "string", 1, lambda o, _: _node_address(o, "ExternalIP")),
        ("OS-Image", "string", 1, lambda o, _: _node_info(o, "osImage")),
        ("Kernel-Version", "string", 1, lambda o, _: _node_info(o, "kernelVersion")),
        ("Container-Runtime", "string", 1, lambda o, _: _node_info(o, "containerRuntimeVersion")),
    ],
    "core/persistentvolumeclaims": [
        ("Name", "string", 0, _name),
        ("Status", "string", 0, lambda o, _: _storage_phase(o)),
        ("Volume", "string", 0, lambda o, _: _text(o, "spec", "volumeName")),
        ("Capacity", "string", 0, lambda o, _: _text(o, "status", "capacity", "storage")),
        ("Access Modes", "string", 0, lambda o, _: _access_modes(_at(o, "status", "accessModes"))),
        ("StorageClass", "string", 0, lambda o, _: _text(o, "spec", "storageClassName")),
        ("VolumeAttributesClass", "string", 0, lambda o, _: _text(o, "spec", "volumeAttributesClassName", "<unset>")),
        ("Age", "string", 0, _age),
        ("VolumeMode", "string", 1, lambda o, _: _text(o, "spec", "volumeMode", "Filesystem")),
    ],
    "core/persistentvolumes": [
        ("Name", "string", 0, _name),
        ("Capacity", "string", 0, lambda o, _: _text(o, "spec", "capacity", "storage")),
        ("Access Modes", "string", 0, lambda o, _: _access_modes(_at(o, "spec", "accessModes"))),
        ("Reclaim Policy", "string", 0, lambda o, _: _text(o, "spec", "persistentVolumeReclaimPolicy")),
        ("Status", "string", 0, lambda o, _: _storage_phase(o)),
        ("Claim", "string", 0, lambda o, _: _claim_ref(o)),
        ("StorageClass", "string", 0, lambda o, _: _text(o, "spec", "storageClassName")),
        ("VolumeAttributesClass", "string", 0, lambda o, _: _text(o, "spec", "volumeAttributesClassName", "<unset>")),
        ("Reason", "string", 0, lambda o, _: _text(o, "status", "reason")),
        ("Age", "string", 0, _age),
        ("VolumeMode", "string", 1, lambda o, _: _text(o, "spec", "volumeMode", "Filesystem")),
    ],
    "storage.k8s.io/storageclasses": [
        ("Name", "string", 0, _storage_class_name),
        ("Provisioner", "string", 0, lambda o, _: _text(o, "provisioner")),
        ("ReclaimPolicy", "string", 0, lambda o, _: _text(o, "reclaimPolicy", default="Delete")),
        ("VolumeBindingMode", "string", 0, lambda o, _: _text(o, "volumeBindingMode", default="Immediate")),
        ("AllowVolumeExpansion", "string", 0, lambda o, _: str(_at(o, "allowVolumeExpansion") is True).lower()),
        ("Age", "string", 0, _age),
    ],
    "scheduling.k8s.io/priorityclasses": [
        ("Name", "string", 0, _name),
        ("Value", "integer", 0, lambda o, _: int(o.get("value") or 0)),
        ("Global-Default", "boolean", 0, lambda o, _: bool(o.get("globalDefault"))),
        ("Age", "string", 0, _age),
        ("PreemptionPolicy", "string", 0, lambda o, _: o.get("preemptionPolicy") or ""),
    ],
    leases.KEY: [
        ("Name", "string", 0, _name),
        ("Holder", "string", 0, lambda o, _: leases.holder(o)),
        ("Age", "string", 0, _age),
    ],
    autoscaling.KEY: autoscaling.columns(_name, _age),
    jobs.KEY: jobs.columns(_name, _age, human_age),
    "apiextensions.k8s.io/customresourcedefinitions": [
        ("Name", "string", 0, _name),
        ("Created At", "date", 0, lambda o, _: o.get("metadata", {}).get("creationTimestamp", "")),
    ],
}


def _cell_from_path(path: str, ctype: str) -> Callable[[Obj, datetime], Any]:
    def cell(obj: Obj, now: datetime) -> Any:
        try:
            values = evaluate(path, obj)
        except JSONPathError:
            return "<invalid>"
        if not values:
            return "<none>" if ctype != "date" else "<unknown>"
        if ctype == "date":
            return human_age(str(values[0]), now)
        if len(values) == 1:
            return values[0]
        return ",".join(str(v) for v in values)

    return cell


def columns_for(rt: ResourceType) -> list[Column]:
    if rt.key in BUILTIN_COLUMNS:
        return BUILTIN_COLUMNS[rt.key]
    cols: list[Column] = [("Name", "string", 0, _name)]
    if rt.printer_columns:
        for pc in rt.printer_columns:
            # Dates print as ages, like kubectl does client-side for `date` columns.
            ctype = pc.get("type", "string")
            cols.append(
                (
                    pc["name"],
                    "string" if ctype == "date" else ctype,
                    int(pc.get("priority", 0)),
                    _cell_from_path(pc["jsonPath"], ctype),
                )
            )
    else:
        cols.append(("Age", "string", 0, _age))
    return cols


def table(
    rt: ResourceType,
    items: list[Obj],
    *,
    now: datetime,
    resource_version: str,
    include_object: str = "Metadata",
) -> Obj:
    cols = columns_for(rt)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": ctype,
                "format": "name" if name == "Name" else "",
                "description": "",
                "priority": prio,
            }
            for name, ctype, prio, _ in cols
        ],
        "rows": [
            {"cells": [cell(o, now) for *_, cell in cols], "object": _row_object(o, include_object)} for o in items
        ],
    }


def _row_object(obj: Obj, include: str) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return obj
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


# -- pods, from their encoded form -------------------------------------------------------------
# Just the fields the pod columns read (field names as on the wire); the decoder skips the rest
# without building it. ``gc=False``: these hold no cycles, and tracking 10,000 of them would cost
# more in collector passes than decoding them.


class _Waiting(msgspec.Struct, gc=False):
    reason: str | None = None


class _Terminated(msgspec.Struct, gc=False):
    reason: str | None = None
    exitCode: int | None = None
    signal: int | None = None


class _Running(msgspec.Struct, gc=False):
    pass


class _State(msgspec.Struct, gc=False):
    waiting: _Waiting | None = None
    running: _Running | None = None
    terminated: _Terminated | None = None


class _LastTerminated(msgspec.Struct, gc=False):
    finishedAt: str | None = None


class _LastState(msgspec.Struct, gc=False):
    terminated: _LastTerminated | None = None


class _ContainerStatus(msgspec.Struct, gc=False):
    ready: bool | None = None
    restartCount: int | None = None
    state: _State | None = None
    lastState: _LastState | None = None


class _Condition(msgspec.Struct, gc=False):
    type: str | None = None
    status: str | None = None
    reason: str | None = None


class _PodStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    reason: str | None = None
    podIP: str | None = None
    nominatedNodeName: str | None = None
    initContainerStatuses: list[_ContainerStatus] | None = None
    containerStatuses: list[_ContainerStatus] | None = None
    conditions: list[_Condition] | None = None


class _Gate(msgspec.Struct, gc=False):
    conditionType: str | None = None


class _PodSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    initContainers: list[msgspec.Raw] | None = None
    containers: list[msgspec.Raw] | None = None
    readinessGates: list[_Gate] | None = None


class _PodMeta(msgspec.Struct, gc=False):
    name: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class _Pod(msgspec.Struct, gc=False):
    metadata: msgspec.Raw = msgspec.Raw(b"{}")  # Raw cannot be in a union: absent is {}
    spec: _PodSpec | None = None
    status: _PodStatus | None = None


_pod_decoder = msgspec.json.Decoder(_Pod)
_meta_decoder = msgspec.json.Decoder(_PodMeta)


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _as_status(cs: Any) -> _ContainerStatus:
    """A container status read leniently from a decoded object (the generic path takes any shape)."""
    cs = _dict(cs)
    state, last = _dict(cs.get("state")), _dict(_dict(cs.get("lastState")).get("terminated"))
    waiting, terminated = state.get("waiting"), state.get("terminated")
    return _ContainerStatus(
        ready=bool(cs.get("ready")),
        restartCount=int(cs.get("restartCount") or 0),
        state=_State(
            waiting=_Waiting(_dict(waiting).get("reason")) if isinstance(waiting, dict) else None,
            running=_Running() if isinstance(state.get("running"), dict) else None,
            terminated=(
                _Terminated(terminated.get("reason"), terminated.get("exitCode"), terminated.get("signal"))
                if isinstance(terminated, dict)
                else None
            ),
        ),
        lastState=_LastState(_LastTerminated(last.get("finishedAt"))) if last else None,
    )


def _as_pod(pod: Obj) -> _Pod:
    spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
    return _Pod(
        spec=_PodSpec(initContainers=[msgspec.Raw(b"{}")] * len(spec.get("initContainers") or [])),
        status=_PodStatus(
            phase=status.get("phase"),
            reason=status.get("reason"),
            initContainerStatuses=[_as_status(cs) for cs in status.get("initContainerStatuses") or []],
            containerStatuses=[_as_status(cs) for cs in status.get("containerStatuses") or []],
            conditions=[
                _Condition(c.get("type"), c.get("status"), c.get("reason"))
                for c in status.get("conditions") or []
                if isinstance(c, dict)
            ],
        ),
    )


def _initializing(status: _PodStatus) -> bool:
    """Whether kubectl's STATUS column speaks of init containers (``Init:0/2``, ``Init:Error``...)."""
    for cs in status.initContainerStatuses or []:
        state = cs.state or _State()
        if state.terminated is not None and state.terminated.exitCode == 0:
            continue
        return not any(c.type == "Initialized" and c.status == "True" for c in status.conditions or [])
    return False


def _pod_reason(pod: _Pod, deleting: bool) -> str:
    """kubectl's STATUS column (its ``printPod``): phase or reason, refined by init then main containers."""
    spec, status = pod.spec or _PodSpec(), pod.status or _PodStatus()
    reason = status.reason or status.phase or "Pending"
    if any(c.type == "PodScheduled" and c.reason == "SchedulingGated" for c in status.conditions or []):
        reason = "SchedulingGated"
    initializing = False
    for index, cs in enumerate(status.initContainerStatuses or []):
        state = cs.state or _State()
        term = state.terminated
        if term is not None and term.exitCode == 0:
            continue
        initializing = True
        if term is not None:
            if term.reason:
                reason = f"Init:{term.reason}"
            else:
                reason = f"Init:Signal:{term.signal}" if term.signal else f"Init:ExitCode:{term.exitCode}"
        elif state.waiting is not None and state.waiting.reason and state.waiting.reason != "PodInitializing":
            reason = f"Init:{state.waiting.reason}"
        else:
            reason = f"Init:{index}/{len(spec.initContainers or [])}"
        break
    initialized = any(c.type == "Initialized" and c.status == "True" for c in status.conditions or [])
    if not initializing or initialized:
        running = False
        for cs in reversed(status.containerStatuses or []):
            state = cs.state or _State()
            if state.waiting is not None and state.waiting.reason:
                reason = state.waiting.reason
            elif state.terminated is not None:
                term = state.terminated
                reason = term.reason or (f"Signal:{term.signal}" if term.signal else f"ExitCode:{term.exitCode}")
            elif cs.ready and state.running is not None:
                running = True
        if reason == "Completed" and running:
            ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
            reason = "Running" if ready else "NotReady"
    if deleting and status.reason == "NodeLost":
        return "Unknown"
    if deleting and status.phase not in ("Succeeded", "Failed"):
        return "Terminating"
    return str(reason)


def _pod_restart_counts(pod: _Pod) -> tuple[int, list[str | None]]:
    """RESTARTS of init containers while the pod initializes, else of its main containers (as kubectl)."""
    status = pod.status or _PodStatus()
    counted = status.initContainerStatuses if _initializing(status) else status.containerStatuses
    statuses = counted or []
    finished = [cs.lastState.terminated.finishedAt for cs in statuses if cs.lastState and cs.lastState.terminated]
    return sum(cs.restartCount or 0 for cs in statuses), finished


def _pod_cells(pod: _Pod, meta: _PodMeta, now: datetime) -> list[Any]:
    """The cells of ``BUILTIN_COLUMNS["core/pods"]``, computed from the decoded subset."""
    spec = pod.spec or _PodSpec()
    status = pod.status or _PodStatus()
    statuses = status.containerStatuses or []
    gates = "<none>"
    if spec.readinessGates:
        true = {c.type for c in status.conditions or [] if c.status == "True"}
        gates = f"{sum(1 for g in spec.readinessGates if g.conditionType in true)}/{len(spec.readinessGates)}"
    return [
        meta.name or "",
        f"{sum(1 for cs in statuses if cs.ready)}/{len(spec.containers or [])}",
        _pod_reason(pod, bool(meta.deletionTimestamp)),
        restarts_cell(*_pod_restart_counts(pod), now),
        human_age(meta.creationTimestamp, now),
        status.podIP or "<none>",
        spec.nodeName or "<none>",
        status.nominatedNodeName or "<none>",
        gates,
    ]


def table_encoded(
    rt: ResourceType,
    encoded: Iterable[bytes],
    *,
    now: datetime,
    list_meta: Obj,
    include_object: str = "Metadata",
) -> bytes | None:
    """``table`` from objects given as served JSON (``Objects.list_encoded``), already encoded.

    None when ``rt`` has no fast path; the caller decodes and uses ``table``.
    """
    if rt.key != "core/pods":
        return None
    rows = []
    for body in encoded:
        try:
            pod = _pod_decoder.decode(body)
            meta = _meta_decoder.decode(pod.metadata)
        except msgspec.MsgspecError:
            # A field of an unexpected type (or text msgspec will not read): the generic path copes.
            obj = codec.loads(body)
            cells = [cell(obj, now) for *_, cell in BUILTIN_COLUMNS["core/pods"]]
            rows.append({"cells": cells, "object": _row_object(obj, include_object)})
            continue
        row_object: Any
        if include_object == "None":
            row_object = None
        elif include_object == "Object":
            row_object = msgspec.Raw(body)
        else:
            row_object = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": pod.metadata,
            }
        rows.append({"cells": _pod_cells(pod, meta, now), "object": row_object})
    doc = table(rt, [], now=now, resource_version="", include_object=include_object)
    doc["metadata"] = list_meta
    doc["rows"] = rows
    return codec.dumps(doc)
