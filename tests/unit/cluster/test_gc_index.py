"""The garbage collector driven by its index, on the real store, registry and ``Objects`` (no HTTP).

Cascades through two levels, the ``orphan`` and ``foregroundDeletion`` finalizers, namespace
teardown, owners that never existed, a collector started over a store that already holds
orphans, and a failed item retried; and that one deletion among many unrelated objects reads only
the objects it affects (the store counts what it is asked), never the whole store again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.server import gc as gc_module
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.precedence import Precedence
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.gc import GarbageCollector
from trainyard.cluster.server.storage.store import Obj, Store

CM = "core/configmaps"


class CountingStore(Store):
    """The real store, recording what is read from it: whole-store passes and single objects."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.passes = 0
        self.reads: list[tuple[str, str, str]] = []

    def all_objects(self) -> Iterator[tuple[str, Obj]]:
        self.passes += 1
        return super().all_objects()

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        self.reads.append((resource, namespace, name))
        return super().get(resource, namespace, name)


@dataclass
class World:
    store: CountingStore
    objects: Objects
    gc: GarbageCollector

    def rt(self, plural: str) -> ResourceType:
        found = self.objects.registry.lookup("", "v1", plural)
        assert found is not None
        return found

    def cm(self, name: str, *owners: Obj, ns: str = "ns", finalizers: tuple[str, ...] = ()) -> Obj:
        meta: dict[str, Any] = {"name": name, "namespace": ns}
        if owners:
            meta["ownerReferences"] = [ref(o) for o in owners]
        if finalizers:
            meta["finalizers"] = list(finalizers)
        return self.objects.create(self.rt("configmaps"), ns, {"metadata": meta})

    def names(self, ns: str = "ns") -> set[str]:
        return {o["metadata"]["name"] for o in self.store.list(CM, ns)[0]}

    def meta(self, name: str, ns: str = "ns") -> dict[str, Any]:
        obj = self.store.get(CM, ns, name)
        assert obj is not None, name
        return obj["metadata"]

    def delete(self, name: str, ns: str = "ns", propagation: str | None = None) -> None:
        self.objects.delete(self.rt("configmaps"), ns, name, propagation=propagation)

    def release(self, name: str, ns: str = "ns") -> None:
        """Drop an object's finalizers, as the controller holding them would."""
        obj = self.store.get(CM, ns, name)
        assert obj is not None
        obj["metadata"].pop("finalizers")
        self.objects.update(self.rt("configmaps"), ns, name, obj)

    def big_namespace(self, count: int) -> ResourceType:
        """Namespace ``big`` holding ``count`` config maps, settled; returns the namespaces' type."""
        ns_rt = self.rt("namespaces")
        self.objects.create(ns_rt, "", {"metadata": {"name": "big"}})
        for i in range(count):
            self.cm(f"cm-{i:03d}", ns="big")
        self.settle()
        return ns_rt

    def settle(self) -> int:
        """Drain the collector's queue; how many items it processed."""
        done = self.gc.drain()
        assert self.gc.pending == 0
        return done


def ref(owner: Obj) -> dict[str, Any]:
    m = owner["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap", "name": m["name"], "uid": m["uid"]}


def open_world(path: Path) -> World:
    store = CountingStore(path)
    objects = Objects(store, Registry())
    return World(store, objects, GarbageCollector(objects))


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = open_world(tmp_path / "store.db")
    w.objects.create(w.rt("namespaces"), "", {"metadata": {"name": "ns"}})
    yield w
    w.store.close()


def test_background_cascade_goes_through_two_levels(world: World) -> None:
    root = world.cm("root")
    mid = world.cm("mid", root)
    world.cm("leaf", mid)
    other = world.cm("other")
    world.cm("shared", root, other)  # keeps living while one of its owners does
    world.settle()
    world.delete("root")
    world.settle()
    assert world.names() == {"other", "shared"}
    assert [r["name"] for r in world.meta("shared")["ownerReferences"]] == ["root", "other"]


def test_orphan_strips_the_owner_from_its_dependents_and_lets_it_go(world: World) -> None:
    root = world.cm("root")
    mid = world.cm("mid", root)
    world.cm("leaf", mid)
    world.delete("root", propagation="Orphan")
    assert world.meta("root")["finalizers"] == ["orphan"]
    world.settle()
    assert world.names() == {"mid", "leaf"}
    assert "ownerReferences" not in world.meta("mid")
    assert world.meta("leaf")["ownerReferences"][0]["uid"] == mid["metadata"]["uid"]


def test_foreground_waits_for_every_dependent_to_go(world: World) -> None:
    root = world.cm("root")
    world.cm("quick", root)
    world.cm("held", root, finalizers=("example.com/hold",))
    world.delete("root", propagation="Foreground")
    world.settle()
    assert world.names() == {"root", "held"}
    assert world.meta("root")["finalizers"] == ["foregroundDeletion"]
    assert world.meta("held")["deletionTimestamp"]
    world.release("held")  # the dependent's going re-processes its owner
    world.settle()
    assert world.names() == set()


def test_namespace_teardown_deletes_its_objects_and_ends_when_the_last_goes(world: World) -> None:
    ns_rt = world.rt("namespaces")
    world.objects.create(ns_rt, "", {"metadata": {"name": "doomed"}})
    for name in ("a", "b"):
        world.cm(name, ns="doomed")
    world.cm("held", ns="doomed", finalizers=("example.com/hold",))
    world.cm("elsewhere")
    world.objects.delete(ns_rt, "", "doomed")
    world.settle()
    assert world.names("doomed") == {"held"} and world.names() == {"elsewhere"}
    assert world.store.get("core/namespaces", "", "doomed") is not None
    world.release("held", ns="doomed")
    world.settle()
    assert world.store.get("core/namespaces", "", "doomed") is None


def test_an_owner_uid_that_never_existed_is_collected(world: World) -> None:
    ghost = {"metadata": {"name": "ghost", "uid": "no-such-uid"}}
    world.cm("haunted", ghost)
    world.settle()
    assert world.names() == set()


def test_a_collector_started_over_a_store_collects_what_lost_its_owners_meanwhile(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = Store(path)
    objects = Objects(store, Registry())  # no collector: the plane was down
    ns_rt, cm_rt = objects.registry.lookup("", "v1", "namespaces"), objects.registry.lookup("", "v1", "configmaps")
    assert ns_rt is not None and cm_rt is not None
    objects.create(ns_rt, "", {"metadata": {"name": "ns"}})
    root = objects.create(cm_rt, "ns", {"metadata": {"name": "root"}})
    objects.create(cm_rt, "ns", {"metadata": {"name": "dep", "ownerReferences": [ref(root)]}})
    objects.delete(cm_rt, "ns", "root")
    store.close()
    world = open_world(path)
    assert world.store.passes == 1  # the one pass at start
    world.settle()
    assert world.names() == set()
    world.store.close()


def test_one_deletion_among_many_reads_only_what_it_affects(world: World) -> None:
    for i in range(300):
        world.cm(f"unrelated-{i}")
    owner = world.cm("owner")
    world.cm("dep", owner)
    world.settle()
    world.store.reads.clear()
    world.store.passes = 0
    world.delete("owner")
    done = world.settle()
    assert world.names() == {f"unrelated-{i}" for i in range(300)}
    assert done == 1  # the dependent, and nothing else
    assert world.store.passes == 0  # no pass over the whole store
    assert set(world.store.reads) <= {(CM, "ns", "owner"), (CM, "ns", "dep")}


def test_a_failed_item_is_kept_and_retried_until_it_succeeds(
    world: World, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(gc_module, "RETRY_SECONDS", 0.01)
    root = world.cm("root")
    world.cm("dep", root)
    # A stored dependent that no longer passes validation: stripping its owner reference is refused.
    bad = world.store.get(CM, "ns", "dep")
    assert bad is not None
    bad["metadata"]["labels"] = {"not a label": "x"}
    world.store.put(CM, "ns", "dep", bad, created=False)
    with pytest.raises(errors.ApiError):
        world.objects.update(world.rt("configmaps"), "ns", "dep", bad)
    world.delete("root", propagation="Orphan")
    world.gc.drain()
    assert world.gc.pending == 1 and world.names() == {"root", "dep"}  # failed, kept

    def failures() -> int:
        return sum(r.getMessage().startswith("garbage collection of") for r in caplog.records)

    async def collect() -> None:
        task = asyncio.create_task(world.gc.run())
        try:
            # Nothing changes in the store, yet the item is tried again...
            await until(lambda: failures() >= 3)
            fixed = world.store.get(CM, "ns", "dep")
            assert fixed is not None
            fixed["metadata"]["labels"] = {"fixed": "yes"}
            world.objects.update(world.rt("configmaps"), "ns", "dep", fixed)
            # ...and once it can succeed, it does.
            await until(lambda: world.names() == {"dep"})
        finally:
            task.cancel()

    asyncio.run(collect())
    assert "ownerReferences" not in world.meta("dep") and world.gc.pending == 0


async def until(probe: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll ``probe`` while the collector's task runs (``eventually`` for the event loop)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not probe():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_namespace_of_many_objects_is_torn_down_in_slices(world: World) -> None:
    count = gc_module.SLICE * 5 + 3
    ns_rt = world.big_namespace(count)
    world.store.reads.clear()
    world.objects.delete(ns_rt, "", "big")
    items = 0
    while world.gc.pending:
        before = world.store.revision
        world.gc.drain(limit=1)
        items += 1
        # One item writes one slice at most, then queues itself again for the rest.
        assert world.store.revision - before <= gc_module.SLICE + 1
    assert world.names("big") == set() and world.store.get("core/namespaces", "", "big") is None
    assert items >= count // gc_module.SLICE
    # Read linearly: each object once to delete it, the namespace once a slice, nothing per object again.
    assert len(world.store.reads) <= count + items + 2


def test_an_owner_of_many_dependents_orphans_and_cascades_in_slices(world: World) -> None:
    count = gc_module.SLICE * 3 + 1
    for propagation in ("orphan", "foreground"):
        root = world.cm(f"root-{propagation}")
        for i in range(count):
            world.cm(f"{propagation}-{i:03d}", root)
        world.settle()
        world.delete(f"root-{propagation}", propagation=propagation.capitalize())
        while world.gc.pending:
            before = world.store.revision
            world.gc.drain(limit=1)
            assert world.store.revision - before <= gc_module.SLICE + 1
    left = world.names()
    assert left == {f"orphan-{i:03d}" for i in range(count)}
    assert all("ownerReferences" not in world.meta(name) for name in left)


def test_the_collector_gives_the_event_loop_a_turn_between_slices(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gc_module, "TURN_SECONDS", 0.0)  # a turn of one item: what is left is the yielding
    ns_rt = world.big_namespace(gc_module.SLICE * 6)

    async def teardown() -> int:
        ticks = 0
        task = asyncio.create_task(world.gc.run())
        world.objects.delete(ns_rt, "", "big")
        try:
            while world.store.get("core/namespaces", "", "big") is not None:
                ticks += 1  # another request's turn
                await asyncio.sleep(0)
        finally:
            task.cancel()
        return ticks

    assert asyncio.run(teardown()) >= 6


def test_the_collector_waits_while_a_request_from_the_network_is_served(world: World) -> None:
    ns_rt = world.big_namespace(gc_module.SLICE * 3)

    async def teardown() -> None:
        # patience far beyond the test: only the request's end lets the collector go on
        precedence = Precedence(gap=0.0, patience=3600.0)
        with precedence.network():  # a request from the network, being answered
            task = asyncio.create_task(world.gc.run(precedence.turn))
            world.objects.delete(ns_rt, "", "big")
            for _ in range(50):
                await asyncio.sleep(0)
            assert len(world.names("big")) == gc_module.SLICE * 3  # nothing deleted meanwhile
        try:
            await until(lambda: world.store.get("core/namespaces", "", "big") is None)
        finally:
            task.cancel()

    asyncio.run(teardown())


def test_a_slice_ends_with_the_turn(world: World) -> None:
    count = gc_module.SLICE * 2
    ns_rt = world.big_namespace(count)
    world.objects.delete(ns_rt, "", "big")
    turns, writes = 0, []
    while world.gc.pending:
        before = world.store.revision
        world.gc.drain(until=lambda: True)  # every turn over at once: one write a turn, and no more
        turns += 1
        writes.append(world.store.revision - before)
    assert world.names("big") == set() and world.store.get("core/namespaces", "", "big") is None
    # One deletion a turn; the turn of the last one also lets the namespace go (its finalizer).
    last = max(i for i, w in enumerate(writes) if w)
    assert set(writes[:last]) == {1} and writes[last] <= 2 and turns >= count
