"""Field ownership: ``metadata.managedFields`` and server-side apply.

Kubernetes records, for every object, which manager (``fieldManager``) last set which field and
how (``Apply`` or ``Update``). Server-side apply uses that record to merge an applied
configuration into the live object, to remove the fields a manager stopped applying, and to
refuse (409) changing fields another manager owns unless forced. This module owns those rules;
``objects`` decides when they run.

A field is a path of path elements encoded as in ``FieldsV1``: ``f:<name>`` for a map key,
``k:<json>`` for an item of a keyed list, ``v:<json>`` for a member of a set, ``i:<n>`` for an
item of a keyed list that lacks its key. Which lists are keyed comes from the strategic-merge
table for built-ins and from ``x-kubernetes-list-type`` in a CRD's schema; other lists are atomic.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii as _quote  # a str as json.dumps writes it
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver.writes.listshapes import BuiltinShape, SchemaShape, Shape
from trainyard.cluster.server.storage import codec

Path = tuple[str, ...]

# Metadata the server owns or that identifies the object: never part of anyone's field set.
_SERVER_METADATA = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)


# -- field sets -----------------------------------------------------------------------------------


def dump(value: object) -> str:
    """A value as a ``k:``/``v:`` element writes it: compact JSON, keys sorted."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def item_element(item: object, keys: tuple[str, ...], index: int) -> str:
    """The path element of a keyed list's item: ``k:`` its keys, or ``i:`` its index if it has none."""
    if isinstance(item, dict):
        if len(keys) == 1 and type(value := item.get(keys[0])) is str:
            # The common case (a name, a condition's type), written as ``dump`` would write it.
            return "k:{" + _quote(keys[0]) + ":" + _quote(value) + "}"
        if any(k in item for k in keys):
            return "k:" + dump({k: item[k] for k in keys if k in item})
    return f"i:{index}"


def walk(value: object, shape: Shape, prefix: Path, out: set[Path]) -> None:
    """Into ``out``, every field path of ``value`` (found at ``prefix``)."""
    if isinstance(value, dict):
        if not value:
            out.add(prefix)
        for key, child in value.items():
            walk(child, shape.child(key), (*prefix, f"f:{key}"), out)
        return
    if isinstance(value, list):
        keys = shape.list_keys()
        if keys is None:
            out.add(prefix)
        elif not keys:
            out.update((*prefix, "v:" + dump(item)) for item in value)
        else:
            item_shape = shape.items()
            for index, item in enumerate(value):
                element = (*prefix, item_element(item, keys, index))
                out.add(element)
                if isinstance(item, dict):
                    for key, child in item.items():
                        walk(child, item_shape.child(key), (*element, f"f:{key}"), out)
        return
    out.add(prefix)


def scoped(obj: Obj, subresource: str | None, status_separate: bool) -> Obj:
    """The part of ``obj`` that a write through ``subresource`` can own."""
    if subresource == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    if status_separate:
        out.pop("status", None)
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _SERVER_METADATA}
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


def field_set(obj: Obj, shape: Shape, *, subresource: str | None = None, status_separate: bool = True) -> set[Path]:
    out: set[Path] = set()
    for key, value in scoped(obj, subresource, status_separate).items():
        walk(value, shape.child(key), (f"f:{key}",), out)
    return out


def _owned(obj: Obj, shape: Shape, write: Write) -> set[Path]:
    return field_set(obj, shape, subresource=write.subresource, status_separate=write.status_separate)


_MISSING = object()


@functools.lru_cache(maxsize=4096)
def _element_value(arg: str) -> Any:
    """A ``k:``/``v:`` element's JSON, decoded once: the same few keys (a condition's type, a
    container's name) are looked up on every write. Shared, so only ever compared against."""
    return json.loads(arg)


def _find(node: object, element: str) -> object:
    tag, arg = element[0], element[2:]
    if tag == "f":
        return node.get(arg, _MISSING) if isinstance(node, dict) else _MISSING
    if not isinstance(node, list):
        return _MISSING
    if tag == "i":
        index = int(arg)
        return node[index] if index < len(node) else _MISSING
    wanted = _element_value(arg)
    for item in node:
        if tag == "k" and isinstance(item, dict) and all(item.get(k) == v for k, v in wanted.items()):
            return item
        if tag == "v" and item == wanted:
            return item
    return _MISSING


def _get(obj: object, path: Path) -> object:
    node = obj
    for element in path:
        node = _find(node, element)
        if node is _MISSING:
            return _MISSING
    return node


def _remove(obj: Obj, path: Path) -> None:
    parent = _get(obj, path[:-1])
    target = _find(parent, path[-1])
    if target is _MISSING:
        return
    if isinstance(parent, dict):
        parent.pop(path[-1][2:], None)
    elif isinstance(parent, list):
        parent.remove(target)


def _is_member(path: Path) -> bool:
    """Paths naming a list item itself: ownership of the item, not of a value."""
    return path[-1][0] in ("k", "i")


def describe(path: Path) -> str:
    """``.spec.containers[name="c"].image``, as the API server words paths in conflicts."""
    out = ""
    for element in path:
        tag, arg = element[0], element[2:]
        if tag == "f":
            out += f".{arg}"
        elif tag == "k":
            out += "[" + ",".join(f"{k}={dump(v)}" for k, v in json.loads(arg).items()) + "]"
        elif tag == "v":
            out += f"[={arg}]"
        else:
            out += f"[{arg}]"
    return out


# -- FieldsV1 -------------------------------------------------------------------------------------


def encode(paths: Iterable[Path]) -> Obj:
    root: Obj = {}
    members: list[Obj] = []
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
        members.append(node)
    for node in members:
        if node:
            node["."] = {}
    return root


def decode(tree: object, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    if not isinstance(tree, dict):
        return out
    for key, value in tree.items():
        if key == ".":
            out.add(prefix)
        elif isinstance(value, dict) and value:
            out |= decode(value, (*prefix, key))
        else:
            out.add((*prefix, key))
    return out


# Every write parses and renders each managedFields entry of its object, and most entries are
# the same few field sets (every pod a controller makes has the same fields, whatever their
# values): both directions are memoised, keyed by the encoded form. Bounded like ``_CHILDREN``.
_DECODED: dict[bytes, frozenset[Path]] = {}
_ENCODED: dict[frozenset[Path], bytes] = {}
_FIELD_SETS_MAX = 2048


def decoded(tree: object) -> set[Path]:
    """``decode(tree)``, memoised; the caller's own set."""
    raw = codec.dumps(tree)
    known = _DECODED.get(raw)
    if known is None:
        if len(_DECODED) >= _FIELD_SETS_MAX:
            _DECODED.clear()
        known = _DECODED[raw] = frozenset(decode(tree))
    return set(known)


def encoded(paths: set[Path]) -> Obj:
    """``encode(paths)``, memoised; the caller's own tree."""
    key = frozenset(paths)
    raw = _ENCODED.get(key)
    if raw is None:
        if len(_ENCODED) >= _FIELD_SETS_MAX:
            _ENCODED.clear()
        raw = _ENCODED[key] = codec.dumps(encode(key))
    value: Obj = codec.loads(raw)  # a fresh copy: the object it goes into is the caller's
    return value


@dataclass
class Entry:
    manager: str
    operation: str  # Apply | Update
    api_version: str
    time: str
    subresource: str | None = None
    fields: set[Path] = field(default_factory=set)
    touched: bool = False
    # How many fields the stored entry had, and its fieldsV1 as stored: most writes leave most
    # entries as they were, and those are written back without encoding their fields again.
    stored: tuple[int, object] | None = None

    @classmethod
    def parse(cls, raw: Obj) -> Entry:
        fields = decoded(raw.get("fieldsV1"))
        return cls(
            manager=str(raw.get("manager", "")),
            operation=str(raw.get("operation", "Update")),
            api_version=str(raw.get("apiVersion", "")),
            time=str(raw.get("time", "")),
            subresource=raw.get("subresource") or None,
            fields=fields,
            stored=(len(fields), raw.get("fieldsV1")),
        )

    def render(self) -> Obj:
        # Between parse and render an entry only loses fields, except the writer's own, which is
        # ``touched`` when it gains any: an untouched entry of the same size is the stored one.
        stored = self.stored
        if stored is not None and not self.touched and len(self.fields) == stored[0]:
            fields_v1 = stored[1]
        else:
            fields_v1 = encoded(self.fields)
        return entry(self.manager, self.operation, self.api_version, self.time, self.subresource, fields_v1)

    def same(self, manager: str, operation: str, subresource: str | None) -> bool:
        return (self.manager, self.operation, self.subresource) == (manager, operation, subresource)


def entry(manager: str, operation: str, api_version: str, time: str, subresource: str | None, fields_v1: object) -> Obj:
    """One ``managedFields`` entry as the API server writes it."""
    out: Obj = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1,
    }
    if subresource:
        out["subresource"] = subresource
    return out


def _entries(obj: Obj | None) -> list[Entry]:
    raw = ((obj or {}).get("metadata") or {}).get("managedFields") or []
    return [Entry.parse(e) for e in raw if isinstance(e, dict)]


def _mine(entries: list[Entry], manager: str, operation: str, subresource: str | None, now: str, gv: str) -> Entry:
    for entry in entries:
        if entry.same(manager, operation, subresource):
            return entry
    entry = Entry(manager, operation, gv, now, subresource)
    entries.append(entry)
    return entry


def _render(entries: list[Entry], present: set[Path], now: str, gv: str) -> list[Obj]:
    out = []
    for entry in entries:
        entry.fields &= present
        if entry.touched:
            entry.time, entry.api_version = now, gv
        if entry.fields:
            out.append(entry.render())
    return out


@dataclass(frozen=True)
class Write:
    """Who writes, and how: the parts of a request that field ownership depends on."""

    manager: str
    api_version: str
    now: str
    subresource: str | None = None
    status_separate: bool = True


# The fields below one top-level field, by (shape, field, encoded value): a write mostly leaves
# spec and metadata as they were, and the jobs of a sweep share one spec. The encoding is the
# key because equal encodings are equal documents, types included (``==`` alone takes ``1``,
# ``1.0`` and ``true`` as one). A custom resource's shape is keyed by its schema's identity,
# which the entry keeps alive so the id cannot be reused while the entry lives.
_WALKED: dict[tuple[object, str, bytes], tuple[object, frozenset[Path]]] = {}
_WALKED_MAX = 1024
_WALKED_BYTES = 16 * 1024  # larger values are walked every time rather than held


def _top_level(value: object, raw: bytes, shape: Shape, key: str) -> frozenset[Path]:
    if isinstance(shape, BuiltinShape):
        token: object = shape
        anchor: object = None
    elif isinstance(shape, SchemaShape):
        token, anchor = ("schema", id(shape.schema), shape.root), shape.schema
    else:
        token = anchor = _MISSING
    cache_key = (token, key, raw)
    if token is not _MISSING and len(raw) <= _WALKED_BYTES:
        known = _WALKED.get(cache_key)
        if known is not None and known[0] is anchor:
            return known[1]
    out: set[Path] = set()
    walk(value, shape.child(key), (f"f:{key}",), out)
    paths = frozenset(out)
    if token is not _MISSING and len(raw) <= _WALKED_BYTES:
        if len(_WALKED) >= _WALKED_MAX:
            _WALKED.clear()
        _WALKED[cache_key] = (anchor, paths)
    return paths


def track_update(old: Obj | None, new: Obj, shape: Shape, write: Write) -> list[Obj]:
    """managedFields after a create, update or patch by ``write.manager``: it owns what it changed.

    The rule over whole objects: the API server's writes go through ``updates.track_update``,
    which compares only where old and new differ, agrees with this (its tests check so) and
    falls back to it when a list's keys are ambiguous.

    A field changed when the write adds it or gives it another value. Each top-level field
    (metadata, spec, status) is walked once; one whose value the write left as it was (the
    common case: a status write leaves spec and metadata alone) changes nothing below it, so
    its old value is not walked nor its fields looked up one by one.
    """
    entries = _entries(old)
    scope = scoped(new, write.subresource, write.status_separate)
    old_scope = scoped(old, write.subresource, write.status_separate) if old is not None else {}
    # The scoped parts of ``new`` are the same values as in the whole object (``scoped``), so
    # one walk of each serves both what the write owns and what is present.
    present_scope = scoped(new, None, False)
    encoded = {key: codec.dumps(value) for key, value in present_scope.items()}
    walked = {key: _top_level(value, encoded[key], shape, key) for key, value in present_scope.items()}
    changed: set[Path] = set()
    for key in scope:
        before = old_scope.get(key, _MISSING)
        if before is _MISSING:
            old_set: frozenset[Path] = frozenset()
        else:
            raw_before = codec.dumps(before)
            if raw_before == encoded[key]:
                continue  # the same document: nothing below it changed
            old_set = _top_level(before, raw_before, shape, key)
        changed.update(
            p
            for p in walked[key]
            if p not in old_set or (not _is_member(p) and old is not None and _get(old, p) != _get(new, p))
        )
    if changed:
        for entry in entries:
            entry.fields -= changed
        mine = _mine(entries, write.manager, "Update", write.subresource, write.now, write.api_version)
        before = set(mine.fields)
        mine.fields |= changed
        mine.touched = mine.fields != before
    present: set[Path] = set().union(*walked.values())
    return _render(entries, present, write.now, write.api_version)


@dataclass(frozen=True)
class Conflict:
    manager: str
    api_version: str
    path: Path


class ApplyConflict(Exception):
    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = conflicts
        count = len(conflicts)
        lines = "\n".join(f'- conflict with "{c.manager}" using {c.api_version}: {describe(c.path)}' for c in conflicts)
        if count == 1:
            c = conflicts[0]
            summary = f'Apply failed with 1 conflict: conflict with "{c.manager}" using {c.api_version}: '
            summary += describe(c.path)
        else:
            summary = f"Apply failed with {count} conflicts: {lines}"
        super().__init__(summary)


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
CLIENT_SIDE_APPLY = "kubectl-client-side-apply"


def upgrades_client_side_apply(live: Obj, conflicts: list[Conflict], shape: Shape) -> bool:
    """Whether every conflict is with client-side apply over a field its last-applied config holds."""
    raw = ((live.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    try:
        last = json.loads(raw) if raw else None
    except ValueError:
        return False
    if not isinstance(last, dict):
        return False
    owned = field_set(last, shape)
    return all(c.manager == CLIENT_SIDE_APPLY and c.path in owned for c in conflicts)


def _copy(value: Any) -> Any:
    """A private copy of a JSON value (``codec.clone`` of a container; a scalar is its own)."""
    return codec.clone(value) if isinstance(value, dict | list) else value


def _merge(live: object, config: object, shape: Shape) -> object:
    if isinstance(live, dict) and isinstance(config, dict):
        out = dict(live)
        for key, value in config.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = _merge(out[key], value, shape.child(key))
            else:
                out[key] = _copy(value)
        return out
    if isinstance(live, list) and isinstance(config, list):
        keys = shape.list_keys()
        if keys is None:
            return _copy(config)
        if not keys:
            return live + [_copy(v) for v in config if v not in live]
        merged = list(live)
        element_shape = shape.items()
        for index, item in enumerate(config):
            element = item_element(item, keys, index)
            found = _find(merged, element) if element[0] == "k" else _MISSING
            if found is _MISSING:
                merged.append(_copy(item))
            else:
                position = next(i for i, x in enumerate(merged) if x is found)
                merged[position] = _merge(found, item, element_shape)
        return merged
    return _copy(config)


def apply(live: Obj | None, config: Obj, shape: Shape, write: Write, *, force: bool) -> Obj:
    """The object after ``write.manager`` applies ``config``; raises ApplyConflict unless forced."""
    applied = _owned(config, shape, write)
    entries = _entries(live)
    mine = _mine(entries, write.manager, "Apply", write.subresource, write.now, write.api_version)
    conflicts: list[tuple[Entry, Path]] = []
    if live is not None:
        for entry in entries:
            if entry is mine:
                continue
            for path in sorted(entry.fields & applied):
                if not _is_member(path) and _get(live, path) != _get(config, path):
                    conflicts.append((entry, path))
    if conflicts and not force:
        raise ApplyConflict([Conflict(e.manager, e.api_version, p) for e, p in conflicts])
    for entry, path in conflicts:
        entry.fields.discard(path)
    others: set[Path] = set()
    for entry in entries:
        if entry is not mine:
            others |= entry.fields
    new: Obj = _copy(live) if live is not None else {}
    kept = applied | others
    stale = mine.fields - kept
    # Deepest first, but a path under a stale list item goes with the item: removing the item's
    # key first would leave the item unfindable.
    for path in sorted(stale, key=len, reverse=True):
        if any(path[:i] in stale for i in range(1, len(path))):
            continue
        _remove(new, path)
        # A map or list emptied by the removal goes too, unless someone still owns it as such.
        parent = path[:-1]
        while parent and parent not in kept and _get(new, parent) in ({}, []):
            _remove(new, parent)
            parent = parent[:-1]
    merged = _merge(new, _scoped_config(config, write), shape)
    assert isinstance(merged, dict)
    before = set(mine.fields)
    mine.fields = set(applied)
    mine.touched = mine.fields != before or live is None
    present = field_set(merged, shape, subresource=None, status_separate=False)
    merged.setdefault("metadata", {})["managedFields"] = _render(entries, present, write.now, write.api_version)
    return merged


def _scoped_config(config: Obj, write: Write) -> Obj:
    if write.subresource == "status":
        return {"status": config["status"]} if "status" in config else {}
    if write.status_separate:
        return {k: v for k, v in config.items() if k != "status"}
    return config
