"""The store on a full disk: a real ``SQLITE_FULL`` (``PRAGMA max_page_count`` caps the database
where a write needs a new page), rolled back, with memory and disk telling the same story.

A write that fails raises ``StorageFull`` naming the database; what it would have written is
visible nowhere (memory, the change log, listeners, after reopening), every write acknowledged
before it is kept, reads go on, and writes succeed again once there is room.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.cluster.server.storage.store import Change, StorageFull, Store

CM = "core/configmaps"
BIG = "x" * 64 * 1024  # many pages: no write of it fits in the pages a capped database has left


def cm(name: str, value: str = "1") -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {"v": value}}


def cap_at_current_size(store: Store) -> int:
    """Let the database grow no further; the old cap, to lift it again."""
    pages = store._db.execute("PRAGMA page_count").fetchone()[0]
    old: int = store._db.execute("PRAGMA max_page_count").fetchone()[0]
    assert store._db.execute(f"PRAGMA max_page_count={pages}").fetchone()[0] == pages
    return old


def test_a_write_the_disk_has_no_room_for_is_rolled_back_and_writes_resume_with_room(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    store = Store(db)
    seen: list[Change] = []
    store.subscribe(seen.append)
    store.put(CM, "ns", "a", cm("a"), created=True)
    store.put(CM, "ns", "b", cm("b"), created=True)
    revision = store.revision
    old_cap = cap_at_current_size(store)

    with pytest.raises(StorageFull) as created:
        store.put(CM, "ns", "c", cm("c", BIG), created=True)
    assert created.value.path == db and "full" in created.value.detail, created.value
    with pytest.raises(StorageFull):
        store.put(CM, "ns", "a", cm("a", BIG), created=False)

    # Nothing of either write is visible: the revision, the objects, the change log, the listeners.
    assert store.revision == revision
    assert store.get(CM, "ns", "c") is None and not store.exists(CM, "ns", "c")
    assert store.get(CM, "ns", "a") == {**cm("a"), "metadata": {**cm("a")["metadata"], "resourceVersion": "1"}}  # type: ignore[dict-item]
    listed, at = store.list(CM, "ns")
    assert [o["metadata"]["name"] for o in listed] == ["a", "b"] and at == revision
    assert store.changes_since(revision, CM) == []
    assert [c.rv for c in seen] == [1, 2]

    # Room again: the next write takes the next revision, as if the failed ones had never been tried.
    store._db.execute(f"PRAGMA max_page_count={old_cap}")
    written = store.put(CM, "ns", "c", cm("c", BIG), created=True)
    assert written["metadata"]["resourceVersion"] == str(revision + 1) == str(store.revision)
    assert [c.rv for c in seen] == [1, 2, 3]
    store.close()

    reopened = Store(db)
    assert reopened.revision == revision + 1
    listed, _ = reopened.list(CM, "ns")
    assert [(o["metadata"]["name"], o["metadata"]["resourceVersion"], o["data"]["v"][:1]) for o in listed] == [
        ("a", "1", "1"),
        ("b", "2", "1"),
        ("c", "3", "x"),
    ]
    assert [(c.rv, c.name) for c in reopened.changes_since(0, CM)] == [(1, "a"), (2, "b"), (3, "c")]
    reopened.close()


def test_a_delete_on_a_full_disk_keeps_the_object_when_it_fails(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.db")
    store.put(CM, "ns", "a", cm("a", BIG), created=True)
    # The delete's change holds the whole body again: it needs pages a capped database does not have.
    cap_at_current_size(store)
    with pytest.raises(StorageFull):
        store.remove(CM, "ns", "a")
    assert store.exists(CM, "ns", "a") and store.revision == 1
    store.close()
