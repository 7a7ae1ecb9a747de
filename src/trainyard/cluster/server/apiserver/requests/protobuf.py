"""Kubernetes protobuf request bodies, decoded into the JSON dict the JSON path would carry.

``kubectl create configmap|secret|namespace|serviceaccount|service|token ...`` POSTs
``application/vnd.kubernetes.protobuf`` and has no JSON fallback (reference §3.6); client-go's
typed clients may send a ``pods/eviction`` the same way. A body is the magic ``k8s\\x00`` and a
``runtime.Unknown`` envelope whose ``raw`` is the typed message of ``k8s.io/api/*/generated.proto``.
This module owns a small generic wire decoder and the field maps of those kinds (plus
``policy/v1`` Eviction); anything else is for the caller to refuse with 415.

Zero values follow Go's JSON encoding of the same object: gogo-protobuf writes every non-pointer
field (so empty strings and zero ints arrive on the wire) while ``encoding/json`` drops the
``omitempty`` ones, so scalars are kept only when non-zero or marked ``keep`` (pointer fields and
fields without ``omitempty``); nested messages are kept whenever present, as Go writes structs.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


class ProtobufError(ValueError):
    """The body is not a well-formed Kubernetes protobuf message of a kind we can decode."""


# -- the wire format ---------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated message: a varint runs past the end of the body")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 64:
            raise ProtobufError("malformed message: a varint is longer than 10 bytes")


def length_delimited(field: int, payload: bytes) -> bytes:
    """One length-delimited field (wire type 2), the only kind the server ever encodes."""
    out = bytearray()
    for n in (field << 3 | 2, len(payload)):
        while n > 0x7F:
            out.append(n & 0x7F | 0x80)
            n >>= 7
        out.append(n)
    return bytes(out) + payload


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """Yield ``(field number, wire type, value)``: an int for varints and fixed, bytes otherwise."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("malformed message: field number 0")
        value: int | bytes
        if wire == VARINT:
            value, pos = _varint(buf, pos)
        elif wire in (FIXED64, FIXED32):
            size = 8 if wire == FIXED64 else 4
            if pos + size > len(buf):
                raise ProtobufError(f"truncated message: field {number} needs {size} bytes")
            value, pos = int.from_bytes(buf[pos : pos + size], "little"), pos + size
        elif wire == LENGTH:
            size, pos = _varint(buf, pos)
            if pos + size > len(buf):
                raise ProtobufError(f"truncated message: field {number} is longer than the rest of the body")
            value, pos = buf[pos : pos + size], pos + size
        else:
            raise ProtobufError(f"malformed message: unsupported wire type {wire} for field {number}")
        yield number, wire, value


# -- field maps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Map:
    """``map<string, value>``: repeated entries ``{1: key, 2: value}``."""

    value: str


Message = dict[int, "Field"]
# a scalar name ("string", "bytes", "int", "bool", "time", "intstr", "quantity"), a map or a message
Type = str | Map | dict[int, Any]


@dataclass(frozen=True)
class Field:
    name: str
    type: Type = "string"
    repeated: bool = False
    keep: bool = False  # emit zero values too: pointer fields, and Go fields without omitempty


def _f(name: str, type: Type = "string", **kw: Any) -> Field:
    return Field(name, type, **kw)


OWNER_REFERENCE: Message = {
    1: _f("kind"),
    3: _f("name"),
    4: _f("uid"),
    5: _f("apiVersion"),
    6: _f("controller", "bool", keep=True),
    7: _f("blockOwnerDeletion", "bool", keep=True),
}
OBJECT_META: Message = {
    1: _f("name"),
    2: _f("generateName"),
    3: _f("namespace"),
    4: _f("selfLink"),
    5: _f("uid"),
    6: _f("resourceVersion"),
    7: _f("generation", "int"),
    8: _f("creationTimestamp", "time"),
    9: _f("deletionTimestamp", "time"),
    10: _f("deletionGracePeriodSeconds", "int", keep=True),
    11: _f("labels", Map("string")),
    12: _f("annotations", Map("string")),
    13: _f("ownerReferences", OWNER_REFERENCE, repeated=True),
    14: _f("finalizers", repeated=True),
}
OBJECT_REFERENCE: Message = {
    1: _f("kind"),
    2: _f("namespace"),
    3: _f("name"),
    4: _f("uid"),
    5: _f("apiVersion"),
    6: _f("resourceVersion"),
    7: _f("fieldPath"),
}
CONDITION: Message = {
    1: _f("type", keep=True),
    2: _f("status", keep=True),
    3: _f("observedGeneration", "int"),
    4: _f("lastTransitionTime", "time"),
    5: _f("reason", keep=True),
    6: _f("message", keep=True),
}
NAMESPACE_CONDITION: Message = {
    1: _f("type", keep=True),
    2: _f("status", keep=True),
    4: _f("lastTransitionTime", "time"),
    5: _f("reason"),
    6: _f("message"),
}
SERVICE_PORT: Message = {
    1: _f("name"),
    2: _f("protocol"),
    3: _f("port", "int", keep=True),
    4: _f("targetPort", "intstr"),
    5: _f("nodePort", "int"),
    6: _f("appProtocol", keep=True),
}
SERVICE_SPEC: Message = {
    1: _f("ports", SERVICE_PORT, repeated=True),
    2: _f("selector", Map("string")),
    3: _f("clusterIP"),
    4: _f("type"),
    5: _f("externalIPs", repeated=True),
    7: _f("sessionAffinity"),
    8: _f("loadBalancerIP"),
    9: _f("loadBalancerSourceRanges", repeated=True),
    10: _f("externalName"),
    11: _f("externalTrafficPolicy"),
    12: _f("healthCheckNodePort", "int"),
    13: _f("publishNotReadyAddresses", "bool"),
    14: _f("sessionAffinityConfig", {1: _f("clientIP", {1: _f("timeoutSeconds", "int", keep=True)})}),
    17: _f("ipFamilyPolicy", keep=True),
    18: _f("clusterIPs", repeated=True),
    19: _f("ipFamilies", repeated=True),
    20: _f("allocateLoadBalancerNodePorts", "bool", keep=True),
    21: _f("loadBalancerClass", keep=True),
    22: _f("internalTrafficPolicy", keep=True),
    23: _f("trafficDistribution", keep=True),
}
PORT_STATUS: Message = {1: _f("port", "int", keep=True), 2: _f("protocol", keep=True), 3: _f("error", keep=True)}
LOAD_BALANCER_INGRESS: Message = {
    1: _f("ip"),
    2: _f("hostname"),
    3: _f("ipMode", keep=True),
    4: _f("ports", PORT_STATUS, repeated=True),
}

DELETE_OPTIONS: Message = {
    1: _f("gracePeriodSeconds", "int", keep=True),
    2: _f("preconditions", {1: _f("uid", keep=True), 2: _f("resourceVersion", keep=True)}),
    3: _f("orphanDependents", "bool", keep=True),
    4: _f("propagationPolicy", keep=True),
    5: _f("dryRun", repeated=True),
    6: _f("ignoreStoreReadErrorWithClusterBreakingPotential", "bool", keep=True),
}

METADATA = _f("metadata", OBJECT_META)
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "ConfigMap"): {
        1: METADATA,
        2: _f("data", Map("string")),
        3: _f("binaryData", Map("bytes")),
        4: _f("immutable", "bool", keep=True),
    },
    ("v1", "Secret"): {
        1: METADATA,
        2: _f("data", Map("bytes")),
        3: _f("type"),
        4: _f("stringData", Map("string")),
        5: _f("immutable", "bool", keep=True),
    },
    ("v1", "Namespace"): {
        1: METADATA,
        2: _f("spec", {1: _f("finalizers", repeated=True)}),
        3: _f("status", {1: _f("phase"), 2: _f("conditions", NAMESPACE_CONDITION, repeated=True)}),
    },
    ("v1", "ServiceAccount"): {
        1: METADATA,
        2: _f("secrets", OBJECT_REFERENCE, repeated=True),
        3: _f("imagePullSecrets", {1: _f("name")}, repeated=True),
        4: _f("automountServiceAccountToken", "bool", keep=True),
    },
    ("v1", "Service"): {
        1: METADATA,
        2: _f("spec", SERVICE_SPEC),
        3: _f(
            "status",
            {
                1: _f("loadBalancer", {1: _f("ingress", LOAD_BALANCER_INGRESS, repeated=True)}),
                2: _f("conditions", CONDITION, repeated=True),
            },
        ),
    },
    ("policy/v1", "Eviction"): {1: METADATA, 2: _f("deleteOptions", DELETE_OPTIONS)},
    # `kubectl create priorityclass`; value has no omitempty, preemptionPolicy is a pointer.
    ("scheduling.k8s.io/v1", "PriorityClass"): {
        1: METADATA,
        2: _f("value", "int", keep=True),
        3: _f("globalDefault", "bool"),
        4: _f("description"),
        5: _f("preemptionPolicy", keep=True),
    },
    ("policy/v1beta1", "Eviction"): {1: METADATA, 2: _f("deleteOptions", DELETE_OPTIONS)},
    # `kubectl create quota --hard=... --scopes=...`.
    ("v1", "ResourceQuota"): {
        1: METADATA,
        2: _f(
            "spec",
            {
                1: _f("hard", Map("quantity")),
                2: _f("scopes", repeated=True),
                3: _f(
                    "scopeSelector",
                    {
                        1: _f(
                            "matchExpressions",
                            {1: _f("scopeName"), 2: _f("operator"), 3: _f("values", repeated=True)},
                            repeated=True,
                        )
                    },
                ),
            },
        ),
        3: _f("status", {1: _f("hard", Map("quantity")), 2: _f("used", Map("quantity"))}),
    },
    # `kubectl create token`; audiences has no omitempty, expirationSeconds and boundObjectRef are pointers.
    ("authentication.k8s.io/v1", "TokenRequest"): {
        1: METADATA,
        2: _f(
            "spec",
            {
                1: _f("audiences", repeated=True),
                3: _f("boundObjectRef", {1: _f("kind"), 2: _f("apiVersion"), 3: _f("name"), 4: _f("uid")}),
                4: _f("expirationSeconds", "int", keep=True),
            },
        ),
        3: _f("status", {1: _f("token", keep=True), 2: _f("expirationTimestamp", "time", keep=True)}),
    },
}


def supports(api_version: str, kind: str) -> bool:
    return (api_version, kind) in KINDS


# -- decoding ----------------------------------------------------------------------------------

_SCALAR_WIRE = {"string": LENGTH, "bytes": LENGTH, "int": VARINT, "bool": VARINT}


def _signed(value: int) -> int:
    # int32 and int64 negatives are ten-byte two's-complement varints.
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise ProtobufError(f"{what} is not valid UTF-8") from exc


def _time(raw: bytes) -> str | None:
    seconds = nanos = 0
    for number, wire, value in fields(raw):
        if wire != VARINT:
            raise ProtobufError("malformed Time")
        if number == 1:
            seconds = _signed(int(value))
        elif number == 2:
            nanos = _signed(int(value))
    if seconds == 0 and nanos == 0:
        return None  # Go's zero Time, which JSON writes as null
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError) as exc:
        raise ProtobufError(f"Time out of range: {seconds}s") from exc


def _int_or_string(raw: bytes) -> int | str:
    kind, number_value, text = 0, 0, ""
    for number, wire, value in fields(raw):
        if number == 1 and wire == VARINT:
            kind = int(value)
        elif number == 2 and wire == VARINT:
            number_value = _signed(int(value))
        elif number == 3 and wire == LENGTH:
            text = _text(bytes(value), "IntOrString")
    return text if kind == 1 else number_value


def _scalar(type_: str, wire: int, value: int | bytes, name: str) -> Any:
    expected = _SCALAR_WIRE.get(type_, LENGTH)
    if wire != expected:
        raise ProtobufError(f"malformed message: field {name} has wire type {wire}, expected {expected}")
    if isinstance(value, int):
        return bool(value) if type_ == "bool" else _signed(value)
    if type_ == "string":
        return _text(value, name)
    if type_ == "bytes":
        return base64.b64encode(value).decode()
    if type_ == "time":
        return _time(value)
    if type_ == "quantity":  # resource.Quantity: {1: its string}
        return next((_text(v, name) for n, _, v in fields(value) if n == 1 and isinstance(v, bytes)), "0")
    return _int_or_string(value)


def _map_entry(raw: bytes, value_type: str, name: str) -> tuple[str, Any]:
    key, val = "", ""  # an absent value is the empty string, or empty bytes (base64 "")
    for number, wire, value in fields(raw):
        if number == 1:
            key = _scalar("string", wire, value, f"{name} key")
        elif number == 2:
            val = _scalar(value_type, wire, value, f"{name}[{key}]")
    return key, val


def message(raw: bytes, schema: Message) -> dict[str, Any]:
    """Decode one message by its field map; unknown fields are skipped, as proto2 readers do."""
    out: dict[str, Any] = {}
    for number, wire, value in fields(raw):
        field = schema.get(number)
        if field is None:
            continue
        decoded: Any
        if isinstance(field.type, Map):
            if wire != LENGTH:
                raise ProtobufError(f"malformed message: map {field.name} is not length-delimited")
            assert isinstance(value, bytes)
            k, v = _map_entry(value, field.type.value, field.name)
            out.setdefault(field.name, {})[k] = v
            continue
        if isinstance(field.type, dict):
            if wire != LENGTH or not isinstance(value, bytes):
                raise ProtobufError(f"malformed message: field {field.name} is not a message")
            decoded = message(value, field.type)
        else:
            decoded = _scalar(field.type, wire, value, field.name)
            if field.type in _SCALAR_WIRE and not (decoded or field.keep or field.repeated):
                continue
        if field.repeated:
            out.setdefault(field.name, []).append(decoded)
        else:
            out[field.name] = decoded
    return out


def envelope(body: bytes) -> tuple[str, str, bytes]:
    """``(apiVersion, kind, raw)`` of a ``k8s\\x00`` + ``runtime.Unknown`` body."""
    if not body.startswith(MAGIC):
        raise ProtobufError("provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]")
    api_version = kind = encoding = ""
    raw = b""
    for number, wire, value in fields(body[len(MAGIC) :]):
        if wire != LENGTH or not isinstance(value, bytes):
            continue
        if number == 1:
            type_meta = message(value, {1: _f("apiVersion"), 2: _f("kind")})
            api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
        elif number == 2:
            raw = value
        elif number == 3:
            encoding = _text(value, "contentEncoding")
    if encoding:
        raise ProtobufError(f"unsupported content encoding {encoding!r}")
    if not kind or not api_version:
        raise ProtobufError("the protobuf envelope names no apiVersion and kind")
    return api_version, kind, raw


def decode(body: bytes) -> dict[str, Any]:
    """The object of a protobuf request body as a JSON-ready dict, ``kind`` and ``apiVersion`` first."""
    api_version, kind, raw = envelope(body)
    schema = KINDS.get((api_version, kind))
    if schema is None:
        raise ProtobufError(f"no protobuf decoding for {api_version}, Kind={kind}: send it as application/json")
    return {"kind": kind, "apiVersion": api_version, **message(raw, schema)}
