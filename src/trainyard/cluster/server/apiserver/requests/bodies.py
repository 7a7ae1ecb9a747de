"""Request bodies: the size limit, and decoding JSON, YAML and protobuf into JSON values.

Every body the API server reads comes through ``read``, so an oversized request gets
kube-apiserver's 413 ``Status`` instead of aiohttp's plain-text one, and through ``decode``,
so a malformed body is a 400 ``Status``. Decoded values are plain JSON (YAML timestamps stay
strings, as sigs.k8s.io/yaml keeps them; keys become strings) and nested at most ``MAX_DEPTH``
deep, so nothing downstream (deepcopy, patching, ``json.dumps``) can hit Python's recursion limit.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import math
from typing import Any

import msgspec
import yaml

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.requests import protobuf
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest

# kube-apiserver's MaxRequestBodyBytes: etcd's request limit plus headroom.
MAX_BYTES = 3 * 1024 * 1024
# Real objects nest a few dozen levels (a CRD's openAPIV3Schema is the deepest); the margin to
# Python's recursion limit of 1000 is what keeps deepcopy and the patchers safe.
MAX_DEPTH = 100
# YAML aliases can expand a small document exponentially (a "billion laughs"); stop far earlier.
MAX_YAML_NODES = 1_000_000
YAML_TYPES = ("application/yaml", "application/apply-patch+yaml")
_json = msgspec.json.Decoder()


async def read(request: ApiRequest) -> bytes:
    """The whole body, or 413 ``RequestEntityTooLarge`` once it passes ``MAX_BYTES``."""
    if request.content_length is not None and request.content_length > MAX_BYTES:
        raise errors.too_large(MAX_BYTES)
    body = bytearray()
    async for chunk in request.content.iter_any():
        body += chunk
        if len(body) > MAX_BYTES:
            raise errors.too_large(MAX_BYTES)
    return bytes(body)


class _Loader(yaml.SafeLoader):
    """SafeLoader without implicit timestamps: ``2024-01-01`` stays a string, as in Kubernetes."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON value {name}")


def decode(raw: bytes, content_type: str, *, what: str = "the request body") -> Any:
    """A JSON or YAML body as a JSON value; 400 ``BadRequest`` when it is neither."""
    try:
        if content_type in YAML_TYPES:
            if raw.lstrip()[:1] == b"{":
                # What kubectl apply --server-side sends: JSON under the YAML type. JSON is YAML's
                # flow style; read as JSON it is the same document (and its numbers, such as 1e3,
                # are numbers, as kube-apiserver's YAML reader takes them), at a fiftieth of the cost.
                with contextlib.suppress(msgspec.DecodeError):
                    return _checked(_json.decode(raw), 0)
            return _jsonable(yaml.load(raw, Loader=_Loader), 0, [MAX_YAML_NODES])
        try:
            value = _json.decode(raw)
        except msgspec.DecodeError:
            # The standard library reads what msgspec refuses but JSON allows (escaped lone
            # surrogates, UTF-16 and -32), and words the error for everything else.
            value = json.loads(raw, parse_constant=_reject_constant)
        return _checked(value, 0)
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        # RecursionError: json and yaml both recurse per nesting level while parsing.
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise errors.bad_request(f"{what} could not be decoded: {reason}") from exc


def decode_object(
    raw: bytes, content_type: str, expects: tuple[str, str] | None, *, empty: bytes = b"{}"
) -> dict[str, Any]:
    """A body that must be one object. ``expects`` is the (apiVersion, kind) the endpoint takes,
    which decides whether a protobuf body can be read at all (otherwise 415, as for CRs)."""
    if content_type == protobuf.CONTENT_TYPE:
        if expects is None or not protobuf.supports(*expects):
            raise errors.unsupported_media("application/json, application/yaml")
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufError as exc:
            raise errors.bad_request(f"the protobuf request body could not be decoded: {exc}") from exc
    value = decode(raw or empty, content_type)
    if not isinstance(value, dict):
        raise errors.bad_request(f"the request body must be a JSON object, not {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    return "null" if value is None else "a number"


def _key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    return "null" if key is None else str(key)


def _checked(value: Any, depth: int) -> Any:
    """``_jsonable`` for what ``json.loads`` made (already plain JSON types): the same checks, in
    the same order, without building the document again."""
    if isinstance(value, dict):
        if depth >= MAX_DEPTH:
            raise ValueError(f"objects and arrays may be nested at most {MAX_DEPTH} levels deep")
        for v in value.values():
            if isinstance(v, dict | list | float):
                _checked(v, depth + 1)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            raise ValueError(f"objects and arrays may be nested at most {MAX_DEPTH} levels deep")
        for v in value:
            if isinstance(v, dict | list | float):
                _checked(v, depth + 1)
    elif isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number")
    return value


def _jsonable(value: Any, depth: int, budget: list[int] | None) -> Any:
    """``value`` as plain JSON types, refusing depth past ``MAX_DEPTH`` and YAML alias bombs."""
    if depth >= MAX_DEPTH and isinstance(value, dict | list | tuple | set | frozenset):
        raise ValueError(f"objects and arrays may be nested at most {MAX_DEPTH} levels deep")
    if budget is not None:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("the YAML document expands to too many nodes (aliases)")
    if isinstance(value, dict):
        return {_key(k): _jsonable(v, depth + 1, budget) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_jsonable(v, depth + 1, budget) for v in items]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{value} is not a JSON number")
    if isinstance(value, bytes):  # YAML !!binary
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.date):  # an explicit YAML !!timestamp
        return value.isoformat()
    return value
