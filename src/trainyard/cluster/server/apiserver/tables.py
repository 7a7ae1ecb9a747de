"""Server-side printing: ``meta.k8s.io/v1`` Tables for ``kubectl get`` (reference §7).

Built-in kinds get kubectl's familiar columns; custom resources get their CRD's
``additionalPrinterColumns`` (or Name and Age). Ages are computed against the injected clock.

Lists are served by ``table_encoded``: the same Table straight from the encoded objects, decoding
of each only what its columns read (a custom resource's printer columns name their fields; a
pod is read into the few fields of ``builtin.pods``; other built-in kinds skip
``managedFields``) and copying each row's metadata through undecoded. Tests hold it to ``table``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

import msgspec

from trainyard.api.meta import Obj, parse_time
from trainyard.cluster.server.apiserver.builtin import autoscaling, disruptionbudgets, jobs, leases, limits, pods, quota
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.requests.jsonpath import JSONPathError, evaluate, leading_fields
from trainyard.cluster.server.storage import codec

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
    return pods.reason(pods.as_pod(pod), bool((pod.get("metadata") or {}).get("deletionTimestamp")))


def _pod_ready(pod: Obj) -> str:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    total = len((pod.get("spec") or {}).get("containers") or [])
    return f"{sum(1 for s in statuses if s.get('ready'))}/{total}"


def _pod_restarts(pod: Obj, now: datetime) -> str:
    count, finished = pods.restart_counts(pods.as_pod(pod))
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


def _node_status(node: Obj) -> str:
    """kubectl's node STATUS: Ready or NotReady (Unknown without a Ready condition), and
    SchedulingDisabled when it is cordoned (``printNode``)."""
    ready = next(
        (c.get("status") for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None
    )
    shown = ["Unknown" if ready is None else "Ready" if ready == "True" else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        shown.append("SchedulingDisabled")
    return ",".join(shown)


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
        ("Status", "string", 0, lambda o, _: _node_status(o)),
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
    quota.KEY: [
        ("Name", "string", 0, _name),
        ("Age", "string", 0, _age),
        ("Request", "string", 0, lambda o, _: quota.columns_cells(o)[0]),
        ("Limit", "string", 0, lambda o, _: quota.columns_cells(o)[1]),
    ],
    limits.KEY: [
        ("Name", "string", 0, _name),
        ("Created At", "date", 0, lambda o, _: o.get("metadata", {}).get("creationTimestamp", "")),
    ],
    leases.KEY: [
        ("Name", "string", 0, _name),
        ("Holder", "string", 0, lambda o, _: leases.holder(o)),
        ("Age", "string", 0, _age),
    ],
    autoscaling.KEY: autoscaling.columns(_name, _age),
    disruptionbudgets.KEY: disruptionbudgets.columns(_name, _age),
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


def _pod_cells(pod: pods.Pod, meta: pods.PodMeta, now: datetime) -> list[Any]:
    """The cells of ``BUILTIN_COLUMNS["core/pods"]``, computed from the decoded subset."""
    spec = pod.spec or pods.PodSpec()
    status = pod.status or pods.PodStatus()
    statuses = status.containerStatuses or []
    gates = "<none>"
    if spec.readinessGates:
        true = {c.type for c in status.conditions or [] if c.status == "True"}
        gates = f"{sum(1 for g in spec.readinessGates if g.conditionType in true)}/{len(spec.readinessGates)}"
    return [
        meta.name or "",
        f"{sum(1 for cs in statuses if cs.ready)}/{len(spec.containers or [])}",
        pods.reason(pod, bool(meta.deletionTimestamp)),
        restarts_cell(*pods.restart_counts(pod), now),
        human_age(meta.creationTimestamp, now),
        status.podIP or "<none>",
        spec.nodeName or "<none>",
        status.nominatedNodeName or "<none>",
        gates,
    ]


# A stored object's top-level members (or one member's), each left as its encoded bytes.
_members = msgspec.json.Decoder(dict[str, msgspec.Raw])
_values = msgspec.json.Decoder()


@dataclass(frozen=True)
class Reads:
    """What a kind's cells read of an object: ``fields`` maps a top-level field to the fields under
    it they read (None: all of it); ``fields`` None: every field but ``metadata.managedFields``,
    which no built-in column reads (half of a typical object's bytes)."""

    fields: Mapping[str, frozenset[str] | None] | None = None


def reads(rt: ResourceType) -> Reads | None:
    """What the cells of ``rt``'s columns can read of an object; None: anything."""
    if rt.key in BUILTIN_COLUMNS:
        return Reads()
    wanted: dict[str, set[str] | None] = {"metadata": {"name"} if rt.printer_columns else {"name", "creationTimestamp"}}
    for pc in rt.printer_columns or ():
        try:
            lead = leading_fields(pc["jsonPath"], 2)
        except JSONPathError:
            continue  # its cell is <invalid>, whatever it reads
        if not lead:
            return None
        below = wanted.setdefault(lead[0], set())
        if len(lead) == 1 or below is None:
            wanted[lead[0]] = None
        else:
            below.add(lead[1])
    return Reads({root: None if below is None else frozenset(below) for root, below in wanted.items()})


def _part(body: bytes, wanted: Reads) -> tuple[Obj, msgspec.Raw]:
    """The part of an encoded object that ``wanted`` names, decoded, and its metadata as encoded."""
    members = _members.decode(body)
    obj: Obj = {}
    for key, raw in members.items():
        if wanted.fields is None:
            if key == "metadata":
                obj[key] = {k: _values.decode(v) for k, v in _members.decode(raw).items() if k != "managedFields"}
            else:
                obj[key] = _values.decode(raw)
        elif key in wanted.fields:
            below = wanted.fields[key]
            if below is None:
                obj[key] = _values.decode(raw)
            else:
                obj[key] = {k: _values.decode(v) for k, v in _members.decode(raw).items() if k in below}
    return obj, members.get("metadata", msgspec.Raw(b"{}"))


def _row(
    rt: ResourceType, cols: list[Column], wanted: Reads | None, body: bytes, now: datetime
) -> tuple[list[Any], msgspec.Raw] | None:
    """A row's cells and the object's metadata as encoded, from the part of it the cells read;
    None when they must be computed from the whole object."""
    if wanted is None:
        return None
    try:
        if rt.key == "core/pods":
            pod = pods.decoder.decode(body)
            return _pod_cells(pod, pods.meta_decoder.decode(pod.metadata), now), pod.metadata
        obj, meta = _part(body, wanted)
    except msgspec.MsgspecError:
        return None  # a field of an unexpected type (or text msgspec will not read)
    return [cell(obj, now) for *_, cell in cols], meta


def table_encoded(
    rt: ResourceType,
    encoded: Iterable[bytes],
    *,
    now: datetime,
    list_meta: Obj,
    include_object: str = "Metadata",
) -> bytes:
    """``table`` from objects given as served JSON (``Objects.list_encoded``), already encoded.

    Each object is decoded only as far as its cells read (``reads``; a pod into the fields of
    ``builtin.pods``), and its metadata, or itself, is copied into its row as it came.
    """
    cols = columns_for(rt)
    wanted = reads(rt)
    rows = []
    for body in encoded:
        row = _row(rt, cols, wanted, body, now)
        if row is None:
            whole = codec.loads(body)
            rows.append(
                {"cells": [cell(whole, now) for *_, cell in cols], "object": _row_object(whole, include_object)}
            )
            continue
        cells, meta = row
        row_object: Any
        if include_object == "None":
            row_object = None
        elif include_object == "Object":
            row_object = msgspec.Raw(body)
        else:
            row_object = {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta}
        rows.append({"cells": cells, "object": row_object})
    doc = table(rt, [], now=now, resource_version="", include_object=include_object)
    doc["metadata"] = list_meta
    doc["rows"] = rows
    return codec.dumps(doc)
