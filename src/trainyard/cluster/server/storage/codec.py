"""JSON encoding of the embedded API server: stored bodies, responses, watch lines.

One codec (msgspec, several times faster than the standard library both ways) for everything
on the hot paths. Objects are stored *version-free* (no ``apiVersion``/``kind``: a CRD may serve
one stored object under several versions), so the served form of a stored body is made by
splicing the two type fields in front of its bytes instead of decoding and re-encoding it.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterable
from datetime import date, datetime
from typing import Any

import msgspec

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


class _Metadata(msgspec.Struct, gc=False):
    labels: dict[str, Any] | None = None


class _Labelled(msgspec.Struct, gc=False):
    metadata: _Metadata | None = None


_labels_decoder = msgspec.json.Decoder(_Labelled)

TYPE_KEYS = ("apiVersion", "kind")


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces), keys in insertion order, UTF-8."""
    try:
        return _encoder.encode(value)
    except (TypeError, UnicodeEncodeError):
        # What msgspec refuses, the standard library writes: keys that are not strings (YAML's
        # ``on:`` is True) as JSON does elsewhere ("true"), and strings holding lone UTF-16
        # surrogates (a JSON body may escape one) as \uXXXX escapes, in pure ASCII.
        return json.dumps(value, separators=(",", ":"), default=_default).encode()


def _default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, tuple | set | frozenset):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def loads(data: bytes | str) -> Any:
    try:
        return _decoder.decode(data)
    except msgspec.DecodeError:
        # msgspec rejects escaped lone surrogates, which the standard library (and what it
        # wrote for ``dumps``) accepts; anything really malformed fails here too.
        return json.loads(data)


def loads_many(items: Iterable[bytes | str]) -> list[Any]:
    """``loads`` of many documents with the cyclic collector paused meanwhile.

    Decoding builds hundreds of thousands of containers; left on, the collector would walk all
    of them again and again (half the cost of listing 10,000 pods). Paused, it walks them once.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return [loads(item) for item in items]
    finally:
        if enabled:
            gc.enable()


def clone(value: Any) -> Any:
    """A deep copy of a JSON document; about five times faster than ``copy.deepcopy``."""
    return loads(dumps(value))


def type_head(api_version: str, kind: str) -> bytes:
    """The start of a served object: ``{"apiVersion":…,"kind":…``, for ``splice``."""
    return b'{"apiVersion":' + _encoder.encode(api_version) + b',"kind":' + _encoder.encode(kind)


def splice(head: bytes, body: bytes) -> bytes:
    """``{"apiVersion":…,"kind":…, **stored}`` as bytes, from a version-free stored body."""
    if body == b"{}":
        return head + b"}"
    return head + b"," + body[1:]


def present(body: bytes, api_version: str, kind: str) -> bytes:
    return splice(type_head(api_version, kind), body)


def watch_line(event_type: str, obj: bytes) -> bytes:
    return b'{"type":"' + event_type.encode() + b'","object":' + obj + b"}\n"


def labels(body: bytes) -> Any:
    """``metadata.labels`` of an encoded object, decoding nothing else."""
    try:
        meta = _labels_decoder.decode(body).metadata
    except msgspec.MsgspecError:
        # Labels that are not a map of strings (or text msgspec will not read): as ``loads`` reads them.
        return loads(body).get("metadata", {}).get("labels") or {}
    return (meta.labels if meta is not None else None) or {}
