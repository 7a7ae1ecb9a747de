"""The garbage collector: ownerReference cascades, deletion propagation and namespace teardown.

It runs beside the API server and acts only through ``Objects``, like kube-controller-manager's
garbage collector acts only through the API. Work is queued from store changes and drained by a
task, so a delete returns before its dependents are collected (Background propagation).

Like kube-controller-manager's dependency graph, it keeps an index in memory, built by one pass
over the store at start and then maintained from the store's changes (which carry the decoded
object, so indexing decodes nothing): every live object's uid and where it is stored, each
object's owner uids and each owner's dependents, the objects being deleted and the namespaces
being torn down. A change queues only the objects it can affect, by uid:

- an object whose ownerReferences all name uids that are not live (checked when it is written and
  when one of its owners goes) is deleted, with Background propagation;
- an owner being deleted with the ``orphan`` finalizer strips itself from its dependents'
  ownerReferences and drops the finalizer; with ``foregroundDeletion`` it deletes its dependents
  and drops the finalizer once none is left. It is processed again whenever one of its dependents
  changes or goes;
- a namespace being deleted deletes what it holds (the index's uids of that namespace) and drops
  its ``kubernetes`` finalizer once nothing is left; it is processed again when its last object
  goes, or when an object appears in it.

Each queued uid is processed against the current state (one object read), never the state of the
change that queued it, and only once the writes in progress have been committed (the queue is
drained by the task, between requests). Work is level-triggered: an item that fails is logged and
retried after ``RETRY_SECONDS``; an index that fails to follow a change is rebuilt from the store.

Bulk work never holds the event loop, which also serves every request: one item writes at most
``SLICE`` objects (a namespace of 3,000 jobs, an owner of thousands of dependents), fewer when
its turn ends first (a write costs what every watcher in the process does with it), and queues
itself again for the rest, and the task gives the loop back after ``TURN_SECONDS`` of items and
waits, before its next turn, while a request from the network is served (``Precedence``), as
kube-controller-manager's namespace controller works in the background of the API server. Every
step is linear in what it touches: the index answers "what does this namespace hold" and "who
depends on this owner" without a scan of the store per object.
"""

from __future__ import annotations

import asyncio
import copy
import heapq
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.storage.store import Change

log = logging.getLogger(__name__)

NAMESPACES = "core/namespaces"
CRDS = "apiextensions.k8s.io/customresourcedefinitions"
# The finalizers this collector is responsible for on an owner being deleted.
OWNER_FINALIZERS = ("orphan", "foregroundDeletion")
RETRY_SECONDS = 1.0
"""How long an item whose processing failed waits before it is tried again."""
SLICE = 32
"""Objects one item writes at most (deletions, stripped owner references) before it queues itself
again: a namespace or an owner with thousands of objects is worked through in slices."""
TURN_SECONDS = 0.01
"""How long the collector's task works before it lets the API server's requests run."""

Where = tuple[str, str, str]  # (resource, namespace, name): an object's key in the store


class GarbageCollector:
    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self.store = objects.store
        self._wake = asyncio.Event()
        self._queue: dict[str, None] = {}  # uids to process, in the order they were queued
        self._retry: set[str] = set()
        self._retry_at = 0.0
        self._types_cache: dict[str, ResourceType] | None = None
        self._over: Callable[[], bool] = _never  # whether the turn of the drain in progress is over
        self._build()
        self.store.subscribe(self._on_change)

    # -- the index -------------------------------------------------------------------------------

    def _build(self) -> None:
        """Index every stored object (the one full pass) and queue those that have work now."""
        self._live: dict[str, Where] = {}
        self._owners: dict[str, tuple[str, ...]] = {}  # uid -> the uids its ownerReferences name
        self._dependents: dict[str, set[str]] = {}  # owner uid -> uids whose ownerReferences name it
        self._deleting: set[str] = set()  # uids with a deletionTimestamp
        self._terminating: dict[str, str] = {}  # namespace name -> its uid, while it is being deleted
        # namespace name -> the uids of the live objects stored in it, in the order they appeared.
        self._in_namespace: dict[str, dict[str, None]] = {}
        # Uids that had work but whose resource is not served (a CRD removed): retried when CRDs change.
        self._parked: set[str] = set()
        self._stale = False
        indexed = [(resource, obj["metadata"]) for resource, obj in self.store.all_objects()]
        for resource, m in indexed:
            self._index(resource, m.get("namespace", ""), m["name"], m)
        # Only once every object is indexed can an owner be told gone.
        for resource, m in indexed:
            if self._needs_work(resource, m, _owner_uids(m)):
                self._enqueue(m["uid"])

    def _index(self, resource: str, namespace: str, name: str, m: dict[str, Any]) -> tuple[str, ...]:
        """Record the object's current state; returns the owner uids it named before."""
        uid = m["uid"]
        if uid not in self._live:
            self._in_namespace.setdefault(namespace, {})[uid] = None
        self._live[uid] = (resource, namespace, name)
        owners = _owner_uids(m)
        before = self._owners.get(uid, ())
        if owners != before:
            for gone in set(before) - set(owners):
                self._forget_dependent(gone, uid)
            for new in set(owners) - set(before):
                self._dependents.setdefault(new, set()).add(uid)
            if owners:
                self._owners[uid] = owners
            else:
                self._owners.pop(uid, None)
        if m.get("deletionTimestamp"):
            self._deleting.add(uid)
            if resource == NAMESPACES:
                self._terminating[name] = uid
        else:
            self._deleting.discard(uid)
        return before

    def _unindex(self, resource: str, name: str, uid: str) -> tuple[str, ...]:
        """Forget a deleted object; returns the uids of its owners."""
        owners = self._owners.pop(uid, ())
        for owner in owners:
            self._forget_dependent(owner, uid)
        where = self._live.pop(uid, None)
        if where is not None:
            held = self._in_namespace.get(where[1])
            if held is not None:
                held.pop(uid, None)
                if not held:
                    del self._in_namespace[where[1]]
        self._deleting.discard(uid)
        self._parked.discard(uid)
        if resource == NAMESPACES and self._terminating.get(name) == uid:
            del self._terminating[name]
        return owners

    def _forget_dependent(self, owner: str, uid: str) -> None:
        deps = self._dependents.get(owner)
        if deps is not None:
            deps.discard(uid)
            if not deps:
                del self._dependents[owner]

    def _dangling(self, owners: Iterable[str]) -> bool:
        """Whether every owner named is gone (false for an object that names none)."""
        listed = False
        for owner in owners:
            if owner in self._live:
                return False
            listed = True
        return listed

    def _needs_work(self, resource: str, m: dict[str, Any], owners: tuple[str, ...]) -> bool:
        if self._dangling(owners):
            return True
        if not m.get("deletionTimestamp"):
            return False
        finalizers = m.get("finalizers") or ()
        return resource == NAMESPACES or any(f in finalizers for f in OWNER_FINALIZERS)

    def _on_change(self, change: Change) -> None:
        try:
            self._follow(change)
        except Exception:
            # The index no longer describes the store: rebuild it from the store, as at start.
            log.exception("garbage collector index failed to follow change %s; rebuilding it", change.rv)
            self._stale = True
            self._wake.set()

    def _follow(self, change: Change) -> None:
        m = change.obj.get("metadata") or {}
        uid = m.get("uid")
        if uid:
            self._follow_object(change, m, uid)
        if change.resource == CRDS:
            # The served types change (the registry follows once this write returns, before the
            # queue is drained): what waited on a type is retried, with the types read afresh.
            self._types_cache = None
            for waiting in (*self._parked, *self._deleting):
                self._enqueue(waiting)
            self._parked.clear()

    def _follow_object(self, change: Change, m: dict[str, Any], uid: str) -> None:
        if change.type == "DELETED":
            owners = self._unindex(change.resource, change.name, uid)
            for dep in self._dependents.get(uid, ()):
                self._enqueue(dep)  # it may have lost its last owner
            ns_uid = self._terminating.get(change.namespace)
            if ns_uid is not None and not self._holds(change.namespace):
                self._enqueue(ns_uid)  # its last object went
        else:
            before = self._index(change.resource, change.namespace, change.name, m)
            now = self._owners.get(uid, ())
            if self._needs_work(change.resource, m, now):
                self._enqueue(uid)
            owners = (*before, *now)
            ns_uid = self._terminating.get(change.namespace)
            if ns_uid is not None and change.type == "ADDED":
                self._enqueue(ns_uid)  # something appeared in a namespace being torn down
        for owner in owners:
            if owner in self._deleting:
                self._enqueue(owner)  # an owner waiting on its dependents sees one change or go

    def _holds(self, namespace: str) -> bool:
        """Whether anything of a served namespaced resource is still stored in ``namespace``."""
        types = self._types()
        return any(
            resource in types and types[resource].namespaced for resource in self.store.namespace_resources(namespace)
        )

    def _enqueue(self, uid: str) -> None:
        self._queue[uid] = None
        self._wake.set()

    def _types(self) -> dict[str, ResourceType]:
        if self._types_cache is None:
            self._types_cache = {rt.key: rt for rt in self.objects.registry}
        return self._types_cache

    # -- the work --------------------------------------------------------------------------------

    async def run(self, yield_to: Callable[[], Awaitable[object]] | None = None) -> None:
        """Work the queue until cancelled; before each turn, ``yield_to`` (``Precedence.turn``) lets
        the API server's requests from the network go first, as the plane's own clients do."""
        loop = asyncio.get_running_loop()
        self._wake.set()
        while True:
            timeout = max(0.0, self._retry_at - loop.time()) if self._retry else None
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass
            self._wake.clear()
            if self._retry and loop.time() >= self._retry_at:
                for uid in sorted(self._retry):
                    self._enqueue(uid)
                self._retry.clear()
            if yield_to is not None and self._queue:
                await yield_to()
            self.drain(retry_at=loop.time() + RETRY_SECONDS, until=_turn_over(loop))
            if self._queue:
                self._wake.set()  # the rest after the API server had its turn
            await asyncio.sleep(0)

    def drain(self, *, limit: int | None = None, retry_at: float = 0.0, until: Callable[[], bool] | None = None) -> int:
        """Process queued uids (and what processing queues), up to ``limit`` or until ``until()``
        says the turn is over (checked after each item); returns how many.

        An item that fails is logged and kept for a retry after ``retry_at`` (``run``'s clock).
        """
        if self._stale:
            self._build()
        self._over = until or _never
        done = 0
        while self._queue and (limit is None or done < limit) and (until is None or done == 0 or not until()):
            uid = next(iter(self._queue))
            del self._queue[uid]
            done += 1
            try:
                self._process(uid)
            except Exception:
                log.exception(
                    "garbage collection of %s failed; retrying in %.0f s", self._live.get(uid, uid), RETRY_SECONDS
                )
                if not self._retry:
                    self._retry_at = retry_at
                self._retry.add(uid)
        return done

    @property
    def pending(self) -> int:
        """Uids queued or waiting for a retry."""
        return len(self._queue) + len(self._retry)

    def _process(self, uid: str) -> None:
        where = self._live.get(uid)
        if where is None:
            return  # gone meanwhile: nothing left to do for it
        resource, namespace, name = where
        types = self._types()
        rt = types.get(resource)
        if rt is None:
            self._parked.add(uid)
            return
        obj = self.store.get(resource, namespace, name)
        if obj is None or obj["metadata"].get("uid") != uid:
            return
        m = obj["metadata"]
        if self._dangling(_owner_uids(m)):
            self._delete(rt, obj)
        if m.get("deletionTimestamp"):
            self._finalize_owner(rt, obj, types)
            if rt.key == NAMESPACES:
                self._teardown_namespace(obj, types)

    def _dependents_of(
        self, uid: str, types: dict[str, ResourceType], *, skip: set[str] | frozenset[str] = frozenset()
    ) -> list[tuple[ResourceType, str, str, str]]:
        """``(type, namespace, name, uid)`` of the first ``SLICE`` live dependents of a served type
        (in key order) whose uids are not in ``skip``."""
        found = []
        for dep in self._dependents.get(uid, ()):
            where = self._live.get(dep)
            if where is not None and where[0] in types and dep not in skip:
                found.append((types[where[0]], where[1], where[2], dep))
        return heapq.nsmallest(SLICE, found, key=lambda d: (d[0].key, d[1], d[2]))

    def _blocked(self, uid: str, types: dict[str, ResourceType]) -> bool:
        """Whether a live dependent of a served type still blocks its owner's foreground deletion."""
        return any((w := self._live.get(dep)) is not None and w[0] in types for dep in self._dependents.get(uid, ()))

    def _write_each(self, items: Sequence[tuple[Any, ...]], write: Callable[..., None]) -> bool:
        """``write(*item)`` for each item while the turn lasts (the first always); whether all were.

        One write can cost milliseconds (every watcher in the process hears of it), so a slice is
        cut short when the turn is over, and its item queued again for the rest."""
        for i, item in enumerate(items):
            if i and self._over():
                return False
            write(*item)
        return True

    def _delete(self, rt: ResourceType, obj: Obj) -> None:
        m = obj["metadata"]
        if m.get("deletionTimestamp"):
            return
        self._delete_at(rt, m.get("namespace", ""), m["name"])

    def _delete_at(self, rt: ResourceType, namespace: str, name: str) -> None:
        try:
            self.objects.delete(rt, namespace, name, propagation="Background")
        except errors.ApiError as exc:
            if exc.code != 404:
                raise

    def _finalize_owner(self, rt: ResourceType, owner: Obj, types: dict[str, ResourceType]) -> None:
        m = owner["metadata"]
        finalizers = list(m.get("finalizers") or [])
        if "orphan" in finalizers:
            stripped = self._dependents_of(m["uid"], types)
            whole = self._write_each(
                stripped, lambda dep_rt, ns, name, _: self._strip_owner(dep_rt, ns, name, m["uid"])
            )
            if len(stripped) == SLICE or not whole:
                self._enqueue(m["uid"])  # the next slice after the loop had its turn
                return
            finalizers.remove("orphan")
        elif "foregroundDeletion" in finalizers:
            # Every dependent blocks its owner until it is gone; one already being deleted is
            # waited for, not deleted again.
            doomed = self._dependents_of(m["uid"], types, skip=self._deleting)
            whole = self._write_each(doomed, lambda dep_rt, ns, name, _: self._delete_at(dep_rt, ns, name))
            if len(doomed) == SLICE or not whole:
                self._enqueue(m["uid"])  # the next slice after the loop had its turn
            if doomed or self._blocked(m["uid"], types):
                return
            finalizers.remove("foregroundDeletion")
        else:
            return
        self._set_finalizers(rt, owner, finalizers)

    def _strip_owner(self, rt: ResourceType, namespace: str, name: str, owner_uid: str) -> None:
        dep = self.store.get(rt.key, namespace, name)
        if dep is None:
            return
        new = copy.deepcopy(dep)
        refs = [r for r in new["metadata"].get("ownerReferences") or [] if r["uid"] != owner_uid]
        new["metadata"]["ownerReferences"] = refs or None
        if not refs:
            del new["metadata"]["ownerReferences"]
        self.objects.update(rt, namespace, name, new)

    def _set_finalizers(self, rt: ResourceType, obj: Obj, finalizers: list[str]) -> None:
        new = copy.deepcopy(obj)
        new["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del new["metadata"]["finalizers"]
        m = obj["metadata"]
        self.objects.update(rt, m.get("namespace", ""), m["name"], new)

    def _teardown_namespace(self, ns: Obj, types: dict[str, ResourceType]) -> None:
        name = ns["metadata"]["name"]
        doomed: list[tuple[ResourceType, str]] = []
        # Objects already being deleted are waited for (their going queues the namespace again).
        for uid in self._in_namespace.get(name, ()):
            if uid in self._deleting:
                continue
            resource, _, obj_name = self._live[uid]
            rt = types.get(resource)
            if rt is not None and rt.namespaced:
                doomed.append((rt, obj_name))
                if len(doomed) == SLICE:
                    break
        # after the walk: each deletion changes the index
        whole = self._write_each(doomed, lambda rt, obj_name: self._delete_at(rt, name, obj_name))
        if len(doomed) == SLICE or not whole:
            self._enqueue(ns["metadata"]["uid"])  # the next slice after the loop had its turn
        elif not self._holds(name):
            finalizers = [f for f in ns["metadata"].get("finalizers") or [] if f != "kubernetes"]
            self._set_finalizers(types[NAMESPACES], ns, finalizers)


def _never() -> bool:
    return False


def _turn_over(loop: asyncio.AbstractEventLoop) -> Callable[[], bool]:
    """Whether ``TURN_SECONDS`` have passed on the loop's clock since this was asked for."""
    ends = loop.time() + TURN_SECONDS
    return lambda: loop.time() >= ends


def _owner_uids(m: dict[str, Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(r.get("uid", "") for r in m.get("ownerReferences") or []))
