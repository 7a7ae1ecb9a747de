"""How the lists of an object merge, point by point: a built-in's from the strategic-merge table,
a custom resource's from ``x-kubernetes-list-type`` in its schema (``fieldmanager`` walks them)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

from trainyard.cluster.server.apiserver.writes import patching


class Shape(Protocol):
    """How the lists below one point of an object merge."""

    def child(self, name: str) -> Shape: ...

    def items(self) -> Shape: ...

    def list_keys(self) -> tuple[str, ...] | None:
        """None: an atomic list; (): a set of primitives; keys: a list keyed by those fields."""
        ...


# A built-in's children depend only on (type, field name): memoised, as every write walks its
# object. Names under free-form maps (labels, data) are unbounded, so the table starts over when full.
_CHILDREN: dict[tuple[str | None, str], BuiltinShape] = {}
_CHILDREN_MAX = 4096


@dataclass(frozen=True)
class BuiltinShape:
    type_name: str | None
    strategy: patching.ListStrategy | None = None

    def child(self, name: str) -> Shape:
        known = _CHILDREN.get((self.type_name, name))
        if known is None:
            if len(_CHILDREN) >= _CHILDREN_MAX:
                _CHILDREN.clear()
            s = patching.field_strategy(self.type_name, name)
            known = _CHILDREN[(self.type_name, name)] = BuiltinShape(s.type, s)
        return known

    def items(self) -> Shape:
        return BuiltinShape(self.type_name)

    def list_keys(self) -> tuple[str, ...] | None:
        if self.strategy is None or self.strategy.kind == "atomic":
            return None
        return (self.strategy.key,) if self.strategy.key else ()


@dataclass(frozen=True)
class SchemaShape:
    """A custom resource's ``openAPIV3Schema``; ``metadata`` at the root is ObjectMeta."""

    schema: Any
    root: bool = False

    def child(self, name: str) -> Shape:
        if self.root and name == "metadata":
            return BuiltinShape("ObjectMeta")
        schema = self.schema if isinstance(self.schema, dict) else {}
        props = schema.get("properties") or {}
        if name in props:
            return SchemaShape(props[name])
        extra = schema.get("additionalProperties")
        return SchemaShape(extra if isinstance(extra, dict) else None)

    def items(self) -> Shape:
        schema = self.schema if isinstance(self.schema, dict) else {}
        return SchemaShape(schema.get("items"))

    def list_keys(self) -> tuple[str, ...] | None:
        schema = self.schema if isinstance(self.schema, dict) else {}
        kind = schema.get("x-kubernetes-list-type")
        if kind == "map":
            return tuple(schema.get("x-kubernetes-list-map-keys") or ())
        if kind == "set":
            return ()
        return None


@functools.cache
def builtin_shape(kind: str) -> Shape:
    """A built-in kind's shape (immutable, so made once: every write of the kind asks)."""
    return BuiltinShape(patching.root_type(kind))


def shape_of(kind: str, schema: Any, *, custom: bool) -> Shape:
    """A kind's shape: a custom resource's from its schema, a built-in's from the table."""
    return SchemaShape(schema, root=True) if custom else builtin_shape(kind)
