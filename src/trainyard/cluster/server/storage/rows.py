"""The order of a list over the store's memory: each resource's keys, and a snapshot's rows.

``Keys`` keeps each resource's namespaces and each namespace's names sorted from when they are
first read until a key comes or goes (most writes change an object, not the set of keys), so a
page of a list bisects to its continue key instead of sorting the whole resource again. ``Rows``
are a snapshot's rows from its start key on, built as they are read: a page of 500 builds 500
rows, not the whole resource, and counts what remains from the kept order.

Callers: ``store`` (which owns the memory these read and subscribes ``Keys`` to its writes).
"""

from __future__ import annotations

import bisect
import builtins
import heapq
import itertools
from collections.abc import Callable, Iterator
from typing import Protocol, cast

Held = bytes | int
"""An object's stored body, or the revision of the change that holds it (the store's ``COLD``)."""
Row = tuple[str, str, bytes]  # namespace, name, body as stored
_BATCH = 500  # rows whose held bodies are read at a time


class Written(Protocol):
    """What ``Keys`` reads of a write (the store's ``Change``)."""

    @property
    def type(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def old_body(self) -> bytes | None: ...


class Keys:
    """Sorted namespaces and names of the objects in ``objects`` (resource → namespace → name)."""

    def __init__(self, objects: dict[str, dict[str, dict[str, Held]]]) -> None:
        self._objects = objects
        self._spaces: dict[str, builtins.list[str]] = {}
        self._names: dict[tuple[str, str], builtins.list[str]] = {}

    def changed(self, change: Written) -> None:
        # A MODIFIED without a body before wrote a key that was not there.
        if change.type != "MODIFIED" or change.old_body is None:
            self._spaces.pop(change.resource, None)
            self._names.pop((change.resource, change.namespace), None)

    def namespaces(self, resource: str) -> builtins.list[str]:
        spaces = self._spaces.get(resource)
        if spaces is None:
            spaces = sorted(self._objects.get(resource, {}))
            if spaces:
                self._spaces[resource] = spaces
        return spaces

    def names(self, resource: str, namespace: str) -> builtins.list[str]:
        names = self._names.get((resource, namespace))
        if names is None:
            present = self._objects.get(resource, {}).get(namespace)
            if not present:
                return []  # not kept: lists of namespaces that hold nothing would pile up
            names = self._names[(resource, namespace)] = sorted(present)
        return names

    def held(self, resource: str) -> dict[str, dict[str, Held]]:
        return self._objects.get(resource, {})


class Rows:
    """A snapshot's rows from ``start`` on, in key order, built as they are read.

    The current objects come from memory in ``Keys``' order; a past revision's rows replace the
    keys written since (``before``: each key's body before its first later write, None where that
    write created it) by what they were. ``bodies`` reads held revisions' bodies (None: the
    resource holds only bodies). Valid until the store's next write (``revision`` tells): reading
    them later raises instead of mixing two revisions.
    """

    def __init__(
        self,
        keys: Keys,
        resource: str,
        namespace: str | None,
        start: tuple[str, str],
        before: dict[tuple[str, str], bytes | None],
        bodies: Callable[[builtins.list[Held]], builtins.list[bytes]] | None,
        revision: Callable[[], int],
    ) -> None:
        self._keys = keys
        self._resource = resource
        self._namespace = namespace
        self._start = start
        self._before = before
        self._bodies = bodies
        self._revision = revision
        self._at = revision()

    def __iter__(self) -> Iterator[Row]:
        current = self._current()
        if not self._before:
            return current
        then = sorted((k[0], k[1], old) for k, old in self._before.items() if old is not None and k >= self._start)
        return heapq.merge(current, then, key=lambda r: (r[0], r[1]))

    def count_after(self, namespace: str, name: str) -> int:
        """How many rows come after ``(namespace, name)``."""
        self._check()
        held = self._keys.held(self._resource)
        names = self._keys.names(self._resource, namespace)
        count = len(names) - bisect.bisect_right(names, name)
        if self._namespace is None:
            count += sum(len(held[ns]) for ns in self._spaces() if ns > namespace)
        for key, old in self._before.items():
            if key > (namespace, name):
                count += (old is not None) - (key[1] in held.get(key[0], {}))
        return count

    def _spaces(self) -> builtins.list[str]:
        if self._namespace is not None:
            return [self._namespace]
        return self._keys.namespaces(self._resource)

    def _current(self) -> Iterator[Row]:
        held = self._held()
        if self._bodies is None:
            yield from cast(Iterator[Row], held)
            return
        while batch := builtins.list(itertools.islice(held, _BATCH)):
            bodies = self._bodies([body for _, _, body in batch])
            for (ns, name, _), body in zip(batch, bodies, strict=True):
                self._check()
                yield ns, name, body

    def _held(self) -> Iterator[tuple[str, str, Held]]:
        spaces = self._keys.held(self._resource)
        first_ns, first_name = self._start
        for ns in self._spaces():
            if ns < first_ns:
                continue
            names, held = self._keys.names(self._resource, ns), spaces.get(ns, {})
            for i in range(bisect.bisect_left(names, first_name) if ns == first_ns else 0, len(names)):
                self._check()
                name = names[i]
                if (ns, name) not in self._before:
                    yield ns, name, held[name]

    def _check(self) -> None:
        if self._revision() != self._at:
            raise RuntimeError("a snapshot's rows were read after the store was written")
