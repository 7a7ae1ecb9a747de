"""Who owns what after a create, update or patch: the changes of a write, found by comparison.

An update makes its manager own what it changed, takes those fields from every other manager,
and drops from every entry the fields the object no longer has (structured-merge-diff's
``Compare``: modified, added, removed). Old and new are compared top down and only where they
differ, so a write that touches three fields of a pod costs three fields, not the pod; and an
entry is decoded only when one of those fields is in it, which most are not (each checked
against its ``fieldsV1`` tree as stored).

What a path is, and the whole-object rule this must agree with, are ``fieldmanager``'s: a list
holding two items under one key makes paths ambiguous, and such a write is left to it.
"""

from __future__ import annotations

from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver.writes import fieldmanager
from trainyard.cluster.server.apiserver.writes.fieldmanager import Path, Write
from trainyard.cluster.server.apiserver.writes.listshapes import Shape

_MISSING = object()


class _Ambiguous(Exception):
    """A keyed list with two items under one key: paths no longer name one item."""


def track_update(old: Obj | None, new: Obj, shape: Shape, write: Write) -> list[Obj]:
    """``managedFields`` of ``new`` after ``write`` turned ``old`` (None: nothing) into it."""
    if old is None:
        return _created(new, shape, write)
    try:
        changed, gone = _compare(old, new, shape, write)
    except _Ambiguous:
        return fieldmanager.track_update(old, new, shape, write)
    return _entries(old, changed, gone, write)


def _created(new: Obj, shape: Shape, write: Write) -> list[Obj]:
    fields = fieldmanager.field_set(new, shape, subresource=write.subresource, status_separate=write.status_separate)
    if not fields:
        return []
    return [_entry(write.manager, "Update", write.subresource, fieldmanager.encoded(fields), write)]


def _compare(old: Obj, new: Obj, shape: Shape, write: Write) -> tuple[set[Path], set[Path]]:
    """(paths the write owns that it added or gave another value, paths the object lost).

    Fields outside what the write can own (status, for a write to the main resource) are
    compared too, for what went: whoever owned them no longer does.
    """
    owned = fieldmanager.scoped(new, write.subresource, write.status_separate).keys()
    before_all = fieldmanager.scoped(old, None, False)
    changed: set[Path] = set()
    gone: set[Path] = set()
    for key, value in fieldmanager.scoped(new, None, False).items():
        before = before_all.pop(key, _MISSING)
        sink = changed if key in owned else set()
        if before is _MISSING:
            fieldmanager.walk(value, shape.child(key), (f"f:{key}",), sink)
        elif before != value:
            _diff(before, value, shape.child(key), (f"f:{key}",), sink, gone)
    for key, before in before_all.items():
        fieldmanager.walk(before, shape.child(key), (f"f:{key}",), gone)
    return changed, gone


def _diff(old: object, new: object, shape: Shape, prefix: Path, changed: set[Path], gone: set[Path]) -> None:
    """Below ``prefix``, where ``old != new``: into ``changed`` what ``new`` adds or changes, into
    ``gone`` what only ``old`` has."""
    if isinstance(old, dict) and isinstance(new, dict) and old and new:
        _diff_fields(old, new, shape, prefix, changed, gone)
    elif isinstance(old, list) and isinstance(new, list):
        keys = shape.list_keys()
        if keys is None:
            changed.add(prefix)  # an atomic list is one value
        elif not keys:
            olds = {fieldmanager.dump(item) for item in old}
            news = {fieldmanager.dump(item) for item in new}
            changed.update((*prefix, "v:" + v) for v in news - olds)
            gone.update((*prefix, "v:" + v) for v in olds - news)
        else:
            _diff_items(_keyed(old, keys), _keyed(new, keys), shape.items(), prefix, changed, gone)
    else:  # different kinds of value, or an empty map on one side: walked whole
        before: set[Path] = set()
        after: set[Path] = set()
        fieldmanager.walk(old, shape, prefix, before)
        fieldmanager.walk(new, shape, prefix, after)
        changed |= after
        gone |= before - after


def _diff_fields(
    old: dict[str, Any], new: dict[str, Any], shape: Shape, prefix: Path, changed: set[Path], gone: set[Path]
) -> None:
    for key, value in new.items():
        before = old.get(key, _MISSING)
        if before is _MISSING:
            fieldmanager.walk(value, shape.child(key), (*prefix, f"f:{key}"), changed)
        elif before != value:
            _diff(before, value, shape.child(key), (*prefix, f"f:{key}"), changed, gone)
    for key, before in old.items():
        if key not in new:
            fieldmanager.walk(before, shape.child(key), (*prefix, f"f:{key}"), gone)


def _keyed(items: list[Any], keys: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for index, item in enumerate(items):
        element = fieldmanager.item_element(item, keys, index)
        if element in out:
            raise _Ambiguous(element)
        out[element] = item
    return out


def _diff_items(
    old: dict[str, Any], new: dict[str, Any], shape: Shape, prefix: Path, changed: set[Path], gone: set[Path]
) -> None:
    """A keyed list's items, matched by key: the item itself is a member (owned once added, never
    changed), its fields are compared as a map's."""
    for element, item in new.items():
        path = (*prefix, element)
        before = old.get(element, _MISSING)
        if before is _MISSING:
            changed.add(path)
            _item_fields(item, shape, path, changed)
        elif before != item:
            if isinstance(before, dict) and isinstance(item, dict):
                _diff_fields(before, item, shape, path, changed, gone)
            else:
                was: set[Path] = set()
                now: set[Path] = set()
                _item_fields(before, shape, path, was)
                _item_fields(item, shape, path, now)
                changed |= now
                gone |= was - now
    for element, item in old.items():
        if element not in new:
            gone.add((*prefix, element))
            _item_fields(item, shape, (*prefix, element), gone)


def _item_fields(item: object, shape: Shape, path: Path, out: set[Path]) -> None:
    if isinstance(item, dict):
        for key, value in item.items():
            fieldmanager.walk(value, shape.child(key), (*path, f"f:{key}"), out)


# -- the entries ---------------------------------------------------------------------------------


def _holds(tree: object, path: Path) -> bool:
    """Whether ``fieldmanager.decode(tree)`` would hold ``path``, without decoding ``tree``."""
    node = tree
    for element in path:
        node = node.get(element, _MISSING) if isinstance(node, dict) else _MISSING
        if node is _MISSING:
            return False
    return not isinstance(node, dict) or not node or "." in node


def _entries(old: Obj, changed: set[Path], gone: set[Path], write: Write) -> list[Obj]:
    """``old``'s entries with the write's changes taken from the others and given to its own."""
    stored = [e for e in (old.get("metadata") or {}).get("managedFields") or [] if isinstance(e, dict)]
    touched = changed | gone
    out: list[Obj] = []
    mine = False
    for raw in stored:
        manager, operation = str(raw.get("manager", "")), str(raw.get("operation", "Update"))
        subresource = raw.get("subresource") or None
        tree = raw.get("fieldsV1")
        if changed and not mine and (manager, operation, subresource) == (write.manager, "Update", write.subresource):
            mine = True
            kept = isinstance(tree, dict) and all(_holds(tree, p) for p in changed)
            if not kept or any(_holds(tree, p) for p in gone):
                tree = fieldmanager.encoded((fieldmanager.decoded(tree) - gone) | changed)
            out.append(_entry(manager, operation, subresource, tree, write))
            continue
        if not isinstance(tree, dict) or not tree:
            continue  # an entry that owns nothing goes
        if any(_holds(tree, p) for p in touched):
            fields = fieldmanager.decoded(tree) - touched
            if not fields:
                continue
            tree = fieldmanager.encoded(fields)
        out.append(_entry(manager, operation, subresource, tree, None, raw))
    if changed and not mine:
        out.append(_entry(write.manager, "Update", write.subresource, fieldmanager.encoded(changed), write))
    return out


def _entry(
    manager: str, operation: str, subresource: str | None, tree: object, write: Write | None, raw: Obj | None = None
) -> Obj:
    """One entry; ``write``: its manager just wrote (its version and time), else as ``raw`` had them."""
    if write is not None:
        return fieldmanager.entry(manager, operation, write.api_version, write.now, subresource, tree)
    assert raw is not None
    api_version, time = str(raw.get("apiVersion", "")), str(raw.get("time", ""))
    return fieldmanager.entry(manager, operation, api_version, time, subresource, tree)
