"""Structural schemas of CustomResourceDefinitions, applied to custom resources on every write.

What kube-apiserver (v1.32) does with a custom resource between decoding the request and
storing it, in its order, with its messages:

1. ``prune``: fields the version's ``openAPIV3Schema`` does not specify are dropped, except under
   ``x-kubernetes-preserve-unknown-fields``; ``apiVersion``, ``kind`` and ``metadata`` stay at the
   root and in ``x-kubernetes-embedded-resource`` objects, where unknown *metadata* fields are
   dropped instead. The dropped paths are what ``fieldValidation=Strict`` rejects and
   ``fieldValidation=Warn`` (the default) reports as warnings.
2. ``drop_nulls``: a null where the schema is neither nullable nor defaulted disappears.
3. ``apply_defaults``: ``default`` values fill absent (or non-nullable null) properties.
4. ``validate``: the OpenAPI value checks of kube-openapi's validator (type, ``formats``, enum,
   bounds, lengths, pattern, items, required, ...) worded as the API server words them, then
   ``validate_embedded`` (apiVersion/kind of embedded resources) and ``validate_list_types``
   (``x-kubernetes-list-type`` set/map uniqueness).

Not implemented: ``allOf``/``anyOf``/``oneOf``/``not`` value validations, CEL rules
(``x-kubernetes-validations``), ratcheting of unchanged invalid values, and the numeric-format
range checks newer servers added. A version without a schema is treated as preserving
everything (real servers refuse such CRDs).

Callers: ``objects`` (the write path). Pure: standard library only.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from trainyard.cluster.server.apiserver import causes
from trainyard.cluster.server.apiserver.causes import Cause
from trainyard.cluster.server.apiserver.writes import formats

Schema = dict[str, Any]

PRESERVE = "x-kubernetes-preserve-unknown-fields"
EMBEDDED = "x-kubernetes-embedded-resource"
INT_OR_STRING = "x-kubernetes-int-or-string"
_META_FIELDS = ("apiVersion", "kind", "metadata")
OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)


def version_schema(crd: dict[str, Any], version: str) -> Schema | None:
    """The ``openAPIV3Schema`` of one version of a CRD manifest, if it has one."""
    spec = crd.get("spec") or {}
    for v in spec.get("versions") or []:
        if v.get("name") == version:
            found = ((v.get("schema") or {}).get("openAPIV3Schema")) or (
                (spec.get("validation") or {}).get("openAPIV3Schema")
            )
            return found if isinstance(found, dict) else None
    return None


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _additional(s: Schema) -> Schema | bool | None:
    value = s.get("additionalProperties")
    return value if isinstance(value, dict) or value is True else None


# -- 1. pruning -----------------------------------------------------------------------------


def prune_metadata(meta: Any, path: str = "metadata") -> list[str]:
    """Drop the fields ObjectMeta does not have; return their paths."""
    if not isinstance(meta, dict):
        return []
    unknown = [k for k in meta if k not in OBJECT_META_FIELDS]
    for key in unknown:
        del meta[key]
    return [_join(path, k) for k in unknown]


def prune(obj: dict[str, Any], schema: Schema | None) -> list[str]:
    """Drop unknown fields of a whole resource in place; the sorted paths of what was dropped."""
    root = {**(schema or {}), EMBEDDED: True}
    if schema is None:
        root[PRESERVE] = True
    unknown = prune_metadata(obj.get("metadata"))
    _prune(obj, root, "", unknown)
    return sorted(unknown)


def _prune(x: Any, s: Schema | None, path: str, unknown: list[str]) -> None:
    if s is not None and s.get(PRESERVE):
        _skip_prune(x, s, path, unknown)
        return
    if isinstance(x, dict):
        if s is None:
            unknown += [_join(path, k) for k in x]
            x.clear()
            return
        props = s.get("properties") or {}
        additional = _additional(s)
        for key in list(x):
            if s.get(EMBEDDED) and key in _META_FIELDS:
                if key == "metadata" and path:
                    unknown += prune_metadata(x[key], _join(path, "metadata"))
                continue
            if key in props:
                _prune(x[key], props[key], _join(path, key), unknown)
            elif additional is not None:
                _prune(x[key], additional if isinstance(additional, dict) else None, _join(path, key), unknown)
            else:
                if key not in _META_FIELDS or path:
                    unknown.append(_join(path, key))
                del x[key]
    elif isinstance(x, list):
        items = s.get("items") if s is not None else None
        for i, item in enumerate(x):
            _prune(item, items if isinstance(items, dict) else None, f"{path}[{i}]", unknown)


def _skip_prune(x: Any, s: Schema | None, path: str, unknown: list[str]) -> None:
    if s is None:
        return
    if isinstance(x, dict):
        props = s.get("properties") or {}
        additional = _additional(s)
        for key, value in x.items():
            if s.get(EMBEDDED) and key in _META_FIELDS:
                if key == "metadata" and path:
                    unknown += prune_metadata(value, _join(path, "metadata"))
                continue
            if key in props:
                _prune(value, props[key], _join(path, key), unknown)
            elif isinstance(additional, dict):
                _prune(value, additional, _join(path, key), unknown)
    elif isinstance(x, list):
        items = s.get("items")
        for i, item in enumerate(x):
            _skip_prune(item, items if isinstance(items, dict) else None, f"{path}[{i}]", unknown)


# -- 2. and 3. nulls and defaults -----------------------------------------------------------


def _field_schema(key: str, s: Schema | None) -> Schema | None:
    if s is None:
        return None
    props = s.get("properties") or {}
    if key in props:
        return props[key]  # type: ignore[no-any-return]
    additional = s.get("additionalProperties")
    return additional if isinstance(additional, dict) else None


def drop_nulls(x: Any, s: Schema | None) -> None:
    """Remove nulls the schema neither allows (``nullable``) nor defaults."""
    if s is None:
        return  # no schema below here either (metadata's managedFields, a free-form map): nothing to drop
    if isinstance(x, dict):
        for key in list(x):
            sub = _field_schema(key, s)
            if x[key] is None and sub is not None and not sub.get("nullable") and "default" not in sub:
                del x[key]
            else:
                drop_nulls(x[key], sub)
    elif isinstance(x, list):
        items = s.get("items") if s is not None else None
        for item in x:
            drop_nulls(item, items if isinstance(items, dict) else None)


def _non_nullable_null(value: Any, s: Schema | None) -> bool:
    return value is None and s is not None and not s.get("nullable")


def apply_defaults(x: Any, s: Schema | None) -> None:
    """Fill ``default`` values in place, deep-copied, as the API server does on decode."""
    if s is None:
        return
    if isinstance(x, dict):
        props = s.get("properties") or {}
        for key, prop in props.items():
            has_default = prop.get("default") is not None
            if has_default and (key not in x or _non_nullable_null(x[key], prop)):
                x[key] = copy.deepcopy(prop["default"])
        additional = s.get("additionalProperties")
        for key in list(x):
            if key in props:
                apply_defaults(x[key], props[key])
            elif isinstance(additional, dict):
                if _non_nullable_null(x[key], additional) and additional.get("default") is not None:
                    x[key] = copy.deepcopy(additional["default"])
                apply_defaults(x[key], additional)
    elif isinstance(x, list):
        items = s.get("items")
        if not isinstance(items, dict):
            return
        for i in range(len(x)):
            if _non_nullable_null(x[i], items) and items.get("default") is not None:
                x[i] = copy.deepcopy(items["default"])
            apply_defaults(x[i], items)


# -- 4. validation --------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _go_format(value: Any) -> str:
    """The swagger format go-openapi infers from a decoded JSON value."""
    if isinstance(value, bool):
        return ""
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    return ""


def _is_json_integer(value: float) -> bool:
    return value.is_integer() and abs(value) <= 2**53


def _enum_equal(data: Any, option: Any) -> bool:
    if isinstance(data, bool) or isinstance(option, bool):
        return isinstance(data, bool) and isinstance(option, bool) and data == option
    if isinstance(option, (int, float)) and isinstance(data, (int, float)):
        # reflect converts the value to the enum member's type first: 1.9 matches 1 in an int enum.
        return (int(data) if isinstance(option, int) else float(data)) == option
    return bool(data == option)


def _bound(value: float, data: Any) -> str:
    """How kube-openapi prints a bound: truncated to int64 for integer data, %v for floats."""
    return str(int(value)) if isinstance(data, int) else causes.go_float(float(value))


class _Validator:
    def __init__(self, root: str) -> None:
        self.root = root
        self.causes: list[Cause] = []

    def field(self, path: str) -> str:
        if path and path != ".":
            name = path[1:] if path.startswith(".") else path
            return _join(self.root, name)
        return self.root or "<nil>"

    # kube-openapi error kinds, converted the way apiextensions-apiserver converts them
    def type_error(self, path: str, type_name: str, shown: str) -> None:
        message = f"{path} in body must be of type {type_name}: {causes.go_quote(shown)}"
        self.causes.append(causes.type_invalid(self.field(path), shown, message))

    def other(self, path: str, value: Any, message: str) -> None:
        self.causes.append(causes.invalid(self.field(path), "" if value is None else value, message))

    def value(self, data: Any, s: Schema, path: str) -> None:
        types = ["integer", "string"] if s.get(INT_OR_STRING) else ([s["type"]] if s.get("type") else [])
        if data is None:
            if types and not s.get("nullable"):
                self.type_error(path, ",".join(types), "null")
            self.enum(data, s, path)
            return
        kind = _json_type(data)
        fmt = formats.kept(s)
        self.type(data, kind, types, fmt, path)
        if kind == "string":
            self.string(data, s, path)
            if fmt and not formats.valid(fmt, data):
                self.type_error(path, fmt, data)
        elif kind in ("integer", "number"):
            self.number(data, s, path)
        elif kind == "array":
            self.array(data, s, path)
        self.enum(data, s, path)
        if kind == "object":
            self.object(data, s, path)

    def type(self, data: Any, kind: str, types: list[str], fmt: str, path: str) -> None:
        if not types and not fmt:
            return
        float_int = kind == "number" and "integer" in types and _is_json_integer(data)
        int_float = kind == "integer" and "number" in types
        known = kind in types or _go_format(data) == fmt or float_int or int_float
        if kind not in ("string", "array") and fmt and not known:
            self.type_error(path, fmt, _go_format(data))
            return
        if "number" not in types and "integer" not in types and fmt and kind in ("string", "array"):
            return
        if types and not (kind in types or float_int or int_float):
            self.type_error(path, ",".join(types), kind)

    def string(self, data: str, s: Schema, path: str) -> None:
        if isinstance(s.get("maxLength"), int) and len(data) > s["maxLength"]:
            self.causes.append(causes.too_long(self.field(path), s["maxLength"]))
        elif isinstance(s.get("minLength"), int) and len(data) < s["minLength"]:
            self.other(path, data, f"{path} in body should be at least {s['minLength']} chars long")
        elif isinstance(s.get("pattern"), str):
            try:
                matched = re.search(s["pattern"], data) is not None
            except re.error as exc:
                self.other(path, data, f"{path} in body should match '{s['pattern']}, but pattern is invalid: {exc}'")
                return
            if not matched:
                self.other(path, data, f"{path} in body should match '{s['pattern']}'")

    def number(self, data: float, s: Schema, path: str) -> None:
        factor = s.get("multipleOf")
        if isinstance(factor, (int, float)) and not isinstance(factor, bool):
            if isinstance(data, int):
                whole = int(factor)  # kube-openapi compares integers natively, truncating the factor
                if whole <= 0:
                    self.other(path, whole, f"factor MultipleOf declared for {path} must be positive: {whole}")
                elif data % whole:
                    self.other(path, data, f"{path} in body should be a multiple of {whole}")
            elif factor <= 0:
                shown = causes.go_float(float(factor))
                self.other(path, factor, f"factor MultipleOf declared for {path} must be positive: {shown}")
            elif not _is_json_integer(data * (1 / factor) if factor < 1 else data / factor):
                self.other(path, data, f"{path} in body should be a multiple of {causes.go_float(float(factor))}")
        self.bound(data, s, path, "minimum", "exclusiveMinimum", "greater than")
        self.bound(data, s, path, "maximum", "exclusiveMaximum", "less than")

    def bound(self, data: float, s: Schema, path: str, key: str, exclusive_key: str, word: str) -> None:
        raw = s.get(key)
        if not isinstance(raw, (int, float)) or isinstance(raw, bool):
            return
        limit = int(raw) if isinstance(data, int) else raw
        exclusive = bool(s.get(exclusive_key))
        below = key == "minimum"
        if below:
            failed = data <= limit if exclusive else data < limit
        else:
            failed = data >= limit if exclusive else data > limit
        if failed:
            relation = word if exclusive else f"{word} or equal to"
            self.other(path, data, f"{path} in body should be {relation} {_bound(raw, data)}")

    def array(self, data: list[Any], s: Schema, path: str) -> None:
        items = s.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(data):
                self.value(item, items, f"{path}[{i}]")
        if isinstance(s.get("minItems"), int) and len(data) < s["minItems"]:
            self.other(path, len(data), f"{path} in body should have at least {s['minItems']} items")
        if isinstance(s.get("maxItems"), int) and len(data) > s["maxItems"]:
            self.causes.append(causes.too_many(self.field(path), len(data), s["maxItems"]))
        if s.get("uniqueItems"):
            seen = [json.dumps(v, sort_keys=True) for v in data]
            if len(set(seen)) != len(seen):
                self.other(path, None, f"{path} in body shouldn't contain duplicates")

    def enum(self, data: Any, s: Schema, path: str) -> None:
        options = s.get("enum")
        if not isinstance(options, list) or not options:
            return
        if data is not None and any(_enum_equal(data, o) for o in options):
            return
        if data is None and None in options:
            return
        shown = [o if isinstance(o, str) else json.dumps(o, separators=(",", ":")) for o in options]
        self.causes.append(causes.not_supported(self.field(path), data, shown))

    def object(self, data: dict[str, Any], s: Schema, path: str) -> None:
        count = len(data)
        if isinstance(s.get("minProperties"), int) and count < s["minProperties"]:
            self.other(path, count, f"{path} in body should have at least {s['minProperties']} properties")
        if isinstance(s.get("maxProperties"), int) and count > s["maxProperties"]:
            self.causes.append(causes.too_many(self.field(path), count, s["maxProperties"]))
        props: dict[str, Schema] = s.get("properties") or {}
        additional = s.get("additionalProperties")
        for key, value in data.items():
            if key in props:
                continue
            if additional is False:
                self.other(path, key, f"{path}.{key} in body is a forbidden property")
            elif isinstance(additional, dict):
                self.value(value, additional, f"{path}.{key}")
        for key, prop in props.items():
            if key in data and isinstance(prop, dict):
                self.value(data[key], prop, _join(path, key))
        for key in s.get("required") or []:
            if key not in data:
                self.causes.append(causes.required(self.field(f"{path}.{key}")))


def validate(obj: Any, schema: Schema | None, root: str = "") -> list[Cause]:
    """The schema's value checks; ``root`` prefixes field paths (``status`` for the subresource)."""
    if schema is None:
        return []
    v = _Validator(root)
    v.value(obj, schema, "")
    return v.causes


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def validate_embedded(obj: Any, schema: Schema | None, path: str = "") -> list[Cause]:
    """``x-kubernetes-embedded-resource`` objects need an apiVersion and a kind (not the root)."""
    if schema is None:
        return []
    out: list[Cause] = []
    if isinstance(obj, dict):
        if schema.get(EMBEDDED) and path:
            for key in ("apiVersion", "kind"):
                if key not in obj:
                    out.append(causes.required(_child(path, key), "must not be empty"))
                elif not isinstance(obj[key], str):
                    out.append(causes.invalid(_child(path, key), obj[key], "must be a string"))
                elif not obj[key]:
                    out.append(causes.invalid(_child(path, key), "", "must not be empty"))
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, value in obj.items():
            if key in props:
                out += validate_embedded(value, props[key], _child(path, key))
            elif isinstance(additional, dict):
                out += validate_embedded(value, additional, f"{path}[{key}]")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(obj):
            out += validate_embedded(item, schema["items"], f"{path}[{i}]")
    return out


def validate_list_types(obj: Any, schema: Schema | None, path: str = "") -> list[Cause]:
    """Uniqueness of ``x-kubernetes-list-type: set`` items and ``map`` keys."""
    if schema is None:
        return []
    out: list[Cause] = []
    if isinstance(obj, dict):
        props = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, value in obj.items():
            if isinstance(additional, dict) and key not in props:
                out += validate_list_types(value, additional, f"{path}[{key}]")
            if key in props:
                out += validate_list_types(value, props[key], _child(path, key))
    elif isinstance(obj, list):
        kind = schema.get("x-kubernetes-list-type")
        if kind == "set":
            out += [causes.duplicate(f"{path}[{i}]", obj[i]) for i in _repeats([_identity(v) for v in obj])]
        elif kind == "map":
            out += _list_map(obj, schema, path)
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(obj):
                out += validate_list_types(item, items, f"{path}[{i}]")
    return out


def _identity(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _repeats(keys: list[str]) -> list[int]:
    """Indices of each value's second appearance (the API server reports only that one)."""
    counts: dict[str, int] = {}
    out = []
    for i, key in enumerate(keys):
        counts[key] = counts.get(key, 0) + 1
        if counts[key] == 2:
            out.append(i)
    return out


def _list_map(obj: list[Any], schema: Schema, path: str) -> list[Cause]:
    for i, item in enumerate(obj):
        if item is not None and not isinstance(item, dict):
            return [causes.invalid(f"{path}[{i}]", item, "must be an object for an array of list-type map")]
    key_fields = [k for k in schema.get("x-kubernetes-list-map-keys") or [] if isinstance(k, str)]
    keys = [{k: item[k] for k in key_fields if k in item} if isinstance(item, dict) else {} for item in obj]
    return [causes.duplicate(f"{path}[{i}]", keys[i]) for i in _repeats([_identity(k) for k in keys])]


def validate_scale(
    obj: dict[str, Any],
    scale: dict[str, Any] | None,
    keys: tuple[str, ...] = ("specReplicasPath", "statusReplicasPath"),
) -> list[Cause]:
    """The replicas paths a CRD's scale subresource names must hold non-negative int32s."""
    if not scale:
        return []
    out: list[Cause] = []
    for key in keys:
        jsonpath = scale.get(key)
        if not isinstance(jsonpath, str):
            continue
        node: Any = obj
        for part in jsonpath.strip(".").split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        if isinstance(node, bool) or not isinstance(node, int):
            shown = node if isinstance(node, (str, int, float, bool)) else json.dumps(node)
            kind = {bool: "bool", str: "string", float: "float64"}.get(type(node), "map[string]interface {}")
            out.append(
                causes.invalid(jsonpath, 0, f"{jsonpath} accessor error: {shown} is of the type {kind}, expected int64")
            )
        elif node < 0:
            out.append(causes.invalid(jsonpath, node, "should be a non-negative integer"))
        elif node > 2**31 - 1:
            out.append(causes.invalid(jsonpath, node, "should be less than or equal to 2147483647"))
    return out


# -- CRD schemas must be structural ---------------------------------------------------------


def structural_problems(s: Any, path: str) -> list[Cause]:
    """The main structural-schema rules a v1.32 server enforces on a CRD version's schema.

    Not checked: value validations (allOf/anyOf/...) and ``default`` values against the schema.
    """
    out = _structural(s, path, "root")
    return sorted(out, key=lambda c: f"{c[1]}: {c[2]}")


def _structural(s: Any, path: str, level: str) -> list[Cause]:
    if not isinstance(s, dict):
        return [causes.invalid(path, "", "must be an object")] if s is not None else []
    out: list[Cause] = []
    kind = s.get("type") or ""
    props = s.get("properties") or {}
    additional = s.get("additionalProperties")
    if kind == "array" and "items" not in s:
        out.append(causes.required(f"{path}.items", "must be specified"))
    if isinstance(s.get("items"), dict):
        out += _structural(s["items"], f"{path}.items", "item")
    for key, sub in props.items():
        out += _structural(sub, f"{path}.properties[{key}]", "field")
    if additional is not None and additional is not True:
        if level == "root":
            out.append(causes.forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if props:
            detail = "additionalProperties and properties are mutual exclusive"
            out.append(causes.forbidden(f"{path}.additionalProperties", detail))
        if isinstance(additional, dict):
            out += _structural(additional, f"{path}.additionalProperties", "field")
    if s.get(PRESERVE) is False:
        out.append(causes.invalid(f"{path}.{PRESERVE}", False, "must be true or undefined"))
    if s.get(EMBEDDED) and kind != "object":
        detail = "must be object if x-kubernetes-embedded-resource is true"
        out.append(causes.invalid(f"{path}.type", kind, detail) if kind else causes.required(f"{path}.type", detail))
    elif not kind and not s.get(INT_OR_STRING) and not s.get(PRESERVE):
        where = {"root": "at the root", "item": "for specified array items", "field": "for specified object fields"}
        out.append(causes.required(f"{path}.type", f"must not be empty {where[level]}"))
    if level == "root" and kind and kind != "object":
        out.append(causes.invalid(f"{path}.type", kind, "must be object at the root"))
    if s.get(EMBEDDED) and not s.get(PRESERVE) and not props:
        detail = f"must not be empty if {EMBEDDED} is true without {PRESERVE}"
        out.append(causes.required(f"{path}.properties", detail))
    meta = props.get("metadata")
    if level == "root" and isinstance(meta, dict):
        extra = (set(meta) - {"type", "properties"}) | (set(meta.get("properties") or {}) - {"name", "generateName"})
        if meta.get("type") not in (None, "object"):
            out.append(causes.invalid(f"{path}.properties[metadata].type", meta["type"], "must be object"))
        if extra:
            out.append(
                causes.forbidden(
                    f"{path}.properties[metadata]",
                    "must not specify anything other than name and generateName, but metadata is implicitly specified",
                )
            )
    return out
