"""The SQLite store on a real database file: one global revision, one change per write, reopening.

The store keeps the revision and the current bodies in memory and writes SQLite through; these
tests check that what is in memory and what is on disk tell the same story, including after the
store is closed and opened again, and after an older store format is upgraded in place.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from trainyard.cluster.server.storage import store as store_module
from trainyard.cluster.server.storage.store import Change, Expired, Store

CM = "core/configmaps"


def cm(name: str, value: str = "1", **labels: str) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "data": {"v": value}}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


def test_every_write_gets_the_next_revision_and_exactly_one_change_with_it(db: Path) -> None:
    store = Store(db)
    seen: list[Change] = []
    store.subscribe(seen.append)
    first = store.put(CM, "ns", "a", cm("a"), created=True)
    second = store.put(CM, "ns", "a", cm("a", "2"), created=False)
    removed = store.remove(CM, "ns", "a")
    assert [c.rv for c in seen] == [1, 2, 3] == [store.revision - 2, store.revision - 1, store.revision]
    assert [c.type for c in seen] == ["ADDED", "MODIFIED", "DELETED"]
    returned = [first, second, removed]
    assert [c.obj["metadata"]["resourceVersion"] for c in seen] == [
        o["metadata"]["resourceVersion"] for o in returned if o is not None
    ]
    old = seen[1].old
    assert old is not None and old["data"] == {"v": "1"} and old["metadata"]["resourceVersion"] == "1"
    # The encoded body that watchers are sent is the stored object, byte for byte.
    assert [json.loads(c.body) for c in seen] == [c.obj for c in seen]
    assert store.get(CM, "ns", "a") is None
    store.close()


def test_bodies_are_stored_version_free_and_each_reader_gets_its_own_copy(db: Path) -> None:
    store = Store(db)
    store.put(CM, "ns", "a", {"apiVersion": "v1", "kind": "ConfigMap", **cm("a")}, created=True)
    got = store.get(CM, "ns", "a")
    assert got is not None and "apiVersion" not in got and "kind" not in got
    got["data"]["v"] = "changed by a caller"
    assert store.get(CM, "ns", "a")["data"]["v"] == "1"  # type: ignore[index]
    listed, _ = store.list(CM, "ns")
    listed[0]["metadata"]["name"] = "x"
    assert store.list(CM, "ns")[0][0]["metadata"]["name"] == "a"
    store.close()


def test_revision_objects_and_history_survive_reopening(db: Path) -> None:
    store = Store(db)
    for i in range(5):
        store.put(CM, "ns", f"c{i}", cm(f"c{i}"), created=True)
    store.put(CM, "ns", "c0", cm("c0", "2"), created=False)
    store.remove(CM, "ns", "c1")
    revision, listed = store.revision, store.list(CM, "ns")
    store.close()

    again = Store(db)
    assert again.revision == revision == 7
    assert again.list(CM, "ns") == listed
    assert [c.rv for c in again.changes_since(0, CM)] == list(range(1, 8))
    assert again.put(CM, "ns", "c9", cm("c9"), created=True)["metadata"]["resourceVersion"] == "8"
    again.close()


def test_a_list_and_the_changes_after_it_leave_no_gap(db: Path) -> None:
    store = Store(db)
    for i in range(3):
        store.put(CM, "ns", f"c{i}", cm(f"c{i}"), created=True)
    bodies, at = store.list_raw(CM, "ns")
    assert [json.loads(b)["metadata"]["name"] for b in bodies] == ["c0", "c1", "c2"]
    store.put(CM, "ns", "c1", cm("c1", "2"), created=False)
    store.put(CM, "other", "z", {**cm("z"), "metadata": {"name": "z", "namespace": "other"}}, created=True)
    store.remove(CM, "ns", "c0")
    later = store.changes_since(at, CM)
    assert [(c.rv, c.type, c.namespace, c.name) for c in later] == [
        (at + 1, "MODIFIED", "ns", "c1"),
        (at + 2, "ADDED", "other", "z"),
        (at + 3, "DELETED", "ns", "c0"),
    ]
    assert store.changes_since(store.revision, CM) == []
    store.close()


def test_compaction_expires_old_revisions_and_both_survive_reopening(db: Path) -> None:
    store = Store(db)
    for i in range(10):
        store.put(CM, "ns", f"c{i}", cm(f"c{i}"), created=True)
    store.compact(keep=4)
    assert store.compacted == 6
    with pytest.raises(Expired):
        store.changes_since(5, CM)
    assert [c.rv for c in store.changes_since(6, CM)] == [7, 8, 9, 10]
    store.compact(keep=0)  # the log is empty now; the revision must come from elsewhere
    store.close()

    again = Store(db)
    assert (again.revision, again.compacted) == (10, 10)
    assert again.changes_since(10, CM) == []
    with pytest.raises(Expired):
        again.changes_since(9, CM)
    assert again.put(CM, "ns", "n", cm("n"), created=True)["metadata"]["resourceVersion"] == "11"
    again.close()


def test_the_store_compacts_itself_beyond_the_retained_history(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "RETAINED_CHANGES", 20)
    monkeypatch.setattr(store_module, "COMPACT_EVERY", 5)
    store = Store(db)
    for i in range(40):
        store.put(CM, "ns", "c", cm("c", str(i)), created=i == 0)
    assert 0 < store.compacted <= store.revision - 20
    kept = [c.rv for c in store.changes_since(store.compacted, CM)]
    assert kept == list(range(store.compacted + 1, store.revision + 1))
    store.close()


def test_past_snapshots_are_rebuilt_from_the_change_log(db: Path) -> None:
    store = Store(db)
    store.put(CM, "ns", "a", cm("a"), created=True)
    store.put(CM, "ns", "b", cm("b"), created=True)
    rows, at = store.snapshot(CM, "ns")
    rows_then = list(rows)
    store.put(CM, "ns", "a", cm("a", "2"), created=False)
    store.remove(CM, "ns", "b")
    store.put(CM, "ns", "c", cm("c"), created=True)
    rows, read_at = store.snapshot(CM, "ns", revision=at)
    assert read_at == at
    assert [(ns, name, json.loads(body)) for ns, name, body in rows] == [
        (ns, name, json.loads(body)) for ns, name, body in rows_then
    ]
    assert [name for _, name, _ in store.snapshot(CM, "ns", start=("ns", "b"))[0]] == ["c"]
    with pytest.raises(ValueError):
        store.snapshot(CM, "ns", revision=store.revision + 1)
    store.close()


def test_snapshots_see_keys_that_came_and_went_since_the_last_one(db: Path) -> None:
    store = Store(db)
    for name in ("b", "d"):
        store.put(CM, "ns", name, cm(name), created=True)

    def names(start: tuple[str, str] | None = None) -> list[str]:
        rows, _ = store.snapshot(CM, None, start=start)
        return [name for _, name, _ in rows]

    assert names() == ["b", "d"]
    store.put(CM, "ns", "a", cm("a"), created=True)  # sorts before every key read so far
    store.put(CM, "ns", "b", cm("b", "2"), created=False)
    assert names() == ["a", "b", "d"]
    store.remove(CM, "ns", "b")
    store.put(CM, "other", "a", cm("a"), created=True)
    assert names() == ["a", "d", "a"] and names(("ns", "b")) == ["d", "a"]
    rows, _ = store.snapshot(CM, None)
    assert rows.count_after("ns", "a") == 2 and rows.count_after("other", "a") == 0
    store.remove(CM, "other", "a")
    assert names() == ["a", "d"]
    store.close()


def test_a_snapshots_rows_are_read_before_the_next_write(db: Path) -> None:
    # They are read from the store's memory as they are iterated: after a write they would mix
    # two revisions, so reading them then is an error, not a silently wrong list.
    store = Store(db)
    store.put(CM, "ns", "a", cm("a"), created=True)
    rows, _ = store.snapshot(CM, "ns")
    store.put(CM, "ns", "b", cm("b"), created=True)
    with pytest.raises(RuntimeError):
        list(rows)
    store.close()


def test_the_wal_starts_over_under_a_steady_stream_of_writes(db: Path) -> None:
    # Checkpoints run beside the writer; unless the writer lets one finish now and then, the WAL
    # never restarts and grows with every write.
    store = Store(db)
    wal = db.with_name(db.name + "-wal")
    for i in range(200):
        store.put(CM, "ns", f"c{i}", cm(f"c{i}"), created=True)
    frames_per_write = (wal.stat().st_size - 32) / (4096 + 24) / 200
    total = 3 * store_module.WAL_RESET_WRITES
    for i in range(200, total):
        store.put(CM, "ns", f"c{i % 300}", cm(f"c{i % 300}", str(i)), created=i < 300)
    frames_now = (wal.stat().st_size - 32) / (4096 + 24)
    assert frames_now < frames_per_write * 1.5 * store_module.WAL_RESET_WRITES < frames_per_write * total
    store.close()


def test_a_format_1_store_is_upgraded_in_place(db: Path) -> None:
    # The layout before format 2: bodies carried apiVersion/kind, objects had a rowid and changes an index.
    old = sqlite3.connect(db)
    old.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        CREATE TABLE objects (
            resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
            rv INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (resource, namespace, name));
        CREATE TABLE changes (
            rv INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
            type TEXT NOT NULL, body TEXT NOT NULL, old_body TEXT);
        CREATE INDEX changes_by_resource ON changes (resource, rv);
        INSERT INTO meta VALUES ('revision', 2), ('compacted', 0);
        """
    )
    typed = {"apiVersion": "v1", "kind": "ConfigMap", **cm("a"), "metadata": {"name": "a", "resourceVersion": "2"}}
    body = json.dumps(typed)
    old.execute("INSERT INTO objects VALUES (?,?,?,?,?)", (CM, "ns", "a", 2, body))
    old.execute("INSERT INTO changes VALUES (2, ?, 'ns', 'a', 'ADDED', ?, NULL)", (CM, body))
    old.commit()
    old.close()

    store = Store(db)
    assert store.revision == 2
    got = store.get(CM, "ns", "a")
    assert got == {"metadata": {"name": "a", "resourceVersion": "2"}, "data": {"v": "1"}}
    schema = dict(store._db.execute("SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index')").fetchall())
    assert "WITHOUT ROWID" in schema["objects"] and "body" not in schema["objects"]
    assert "changes_by_resource" not in schema
    store.close()
    assert Store(db).get(CM, "ns", "a") == got


def test_a_format_2_store_keeps_bodies_whose_changes_were_compacted(db: Path) -> None:
    # Format 2 kept every body in objects too; a body whose change was compacted away is written
    # back into the log under its own revision, where a watch can never be served it.
    old = sqlite3.connect(db)
    old.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
        CREATE TABLE changes (
            rv INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
            type TEXT NOT NULL, body TEXT NOT NULL, old_body TEXT);
        CREATE TABLE objects (
            resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
            rv INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (resource, namespace, name)) WITHOUT ROWID;
        INSERT INTO meta VALUES ('revision', 3), ('compacted', 2), ('format', 2);
        """
    )
    a, b = (json.dumps({**cm(n), "metadata": {"name": n, "resourceVersion": rv}}) for n, rv in (("a", "1"), ("b", "3")))
    old.execute("INSERT INTO objects VALUES (?, 'ns', 'a', 1, ?)", (CM, a))  # its change compacted away
    old.execute("INSERT INTO objects VALUES (?, 'ns', 'b', 3, ?)", (CM, b))
    old.execute("INSERT INTO changes VALUES (3, ?, 'ns', 'b', 'ADDED', ?, NULL)", (CM, b))
    old.commit()
    old.close()

    store = Store(db)
    assert [store.get(CM, "ns", n)["metadata"]["name"] for n in ("a", "b")] == ["a", "b"]  # type: ignore[index]
    assert [(c.rv, c.type, c.name) for c in store.changes_since(2, CM)] == [(3, "ADDED", "b")]
    store.close()
    again = Store(db)
    assert json.loads(next(iter(again.snapshot(CM, "ns")[0]))[2]) == json.loads(a)
    again.close()


def test_compaction_keeps_the_change_that_holds_a_live_objects_body(db: Path) -> None:
    store = Store(db)
    store.put(CM, "ns", "kept", cm("kept"), created=True)
    for i in range(5):
        store.put(CM, "ns", "busy", cm("busy", str(i)), created=i == 0)
    store.remove(CM, "ns", "busy")
    store.compact(keep=0)
    assert store._db.execute("SELECT rv FROM changes").fetchall() == [(1,)]  # kept's; busy's all went
    with pytest.raises(Expired):
        store.changes_since(0, CM)
    assert store.changes_since(store.revision, CM) == []
    store.close()
    again = Store(db)
    kept = cm("kept")
    assert again.get(CM, "ns", "kept") == {**kept, "metadata": {**kept["metadata"], "resourceVersion": "1"}}  # type: ignore[dict-item]
    assert again.get(CM, "ns", "busy") is None
    again.close()


def test_a_kept_change_whose_object_moved_on_is_swept_by_later_compactions(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "COMPACT_EVERY", 2)  # a sweep's slice: two kept changes
    store = Store(db)
    for name in ("a", "b", "c"):
        store.put(CM, "ns", name, cm(name), created=True)  # revisions 1-3
    store.compact(keep=0)
    assert store._db.execute("SELECT rv FROM changes").fetchall() == [(1,), (2,), (3,)]  # all live
    store.put(CM, "ns", "a", cm("a", "2"), created=False)  # 4: a's change 1 is now garbage...
    store.remove(CM, "ns", "c")  # 5: ...and c's change 3
    for _ in range(3):
        store.compact(keep=0)  # ranges of their own are empty: what moves on is the sweep
        store.put(CM, "ns", "tick", cm("tick"), created=True)
        store.remove(CM, "ns", "tick")
    store.compact(keep=0)
    assert store._db.execute("SELECT rv FROM changes").fetchall() == [(2,), (4,)]  # b's and a's newest
    store.close()
    again = Store(db)
    assert again.get(CM, "ns", "a")["data"] == {"v": "2"}  # type: ignore[index]
    assert again.get(CM, "ns", "b") is not None and again.get(CM, "ns", "c") is None
    again.close()


EV = "core/events"


def event(name: str, count: int = 1) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "reason": "Started", "count": count}


def test_cold_bodies_are_read_from_disk_and_tell_the_same_story(db: Path) -> None:
    """Events keep only their revision in memory; every read path gives what a warm body would."""
    store = Store(db)
    seen: list[Change] = []
    store.subscribe(seen.append)
    for i in range(store_module._READ_BATCH + 3):  # more than one query's worth
        store.put(EV, "ns", f"e{i:04d}", event(f"e{i:04d}"), created=True)
    store.put(CM, "ns", "warm", cm("warm"), created=True)
    assert all(isinstance(h, int) for h in store._objects[EV]["ns"].values())
    assert isinstance(store._objects[CM]["ns"]["warm"], bytes)
    updated = store.put(EV, "ns", "e0000", event("e0000", 2), created=False)
    assert seen[-1].old == {**event("e0000"), "metadata": {"name": "e0000", "namespace": "ns", "resourceVersion": "1"}}
    assert store.get(EV, "ns", "e0000") == updated and updated["count"] == 2
    listed, _ = store.list(EV, "ns")
    assert [o["metadata"]["name"] for o in listed] == [f"e{i:04d}" for i in range(store_module._READ_BATCH + 3)]
    rows, _ = store.snapshot(EV, "ns", start=("ns", "e0500"))
    read = list(rows)
    assert [name for _, name, _ in read] == ["e0500", "e0501", "e0502"]
    assert json.loads(read[0][2])["metadata"]["name"] == "e0500"
    every, _ = store.snapshot(EV, None)
    assert [json.loads(body)["metadata"]["name"] for _, _, body in every] == [o["metadata"]["name"] for o in listed]
    before, _ = store.snapshot(EV, "ns", revision=1)
    assert [json.loads(body)["count"] for _, _, body in before] == [1]
    assert store.remove(EV, "ns", "e0001") is not None and store.get(EV, "ns", "e0001") is None
    store.close()
    store = Store(db)
    assert isinstance(store._objects[EV]["ns"]["e0000"], int)
    assert store.get(EV, "ns", "e0000") == updated
    assert sum(r == EV for r, _ in store.all_objects()) == store_module._READ_BATCH + 2
    store.close()
