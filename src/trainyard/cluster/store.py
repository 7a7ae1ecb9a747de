"""Durable object storage: SQLite in WAL mode with one global revision, as etcd (and kine) do.

Every write gets the next revision, which becomes the object's ``resourceVersion`` (a string on
the wire). Each write is also appended to a change log, so a watch can resume from any revision
still retained; older ones answer 410 Expired. After each commit the change is handed to the
listeners (the watch hub, the garbage collector) synchronously, so in the single event loop of
the plane there is no gap between a list snapshot and the watch that follows it.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    rv INTEGER NOT NULL, body TEXT NOT NULL,
    PRIMARY KEY (resource, namespace, name)
);
CREATE TABLE IF NOT EXISTS changes (
    rv INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL, old_body TEXT
);
CREATE INDEX IF NOT EXISTS changes_by_resource ON changes (resource, rv);
"""

# Clients resume watches with old revisions (kopf after 70 s idle, informers every few minutes),
# so keep a long history; compaction trims only beyond this many changes.
RETAINED_CHANGES = 50_000


class Expired(Exception):
    """The requested revision is older than the retained change log."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass(frozen=True)
class Change:
    rv: int
    type: str  # ADDED | MODIFIED | DELETED
    resource: str
    namespace: str
    name: str
    obj: Obj
    old: Obj | None


Listener = Callable[[Change], None]


class Store:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('revision', 0)")
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('compacted', 0)")
        self._listeners: list[Listener] = []

    def close(self) -> None:
        self._db.close()

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @property
    def revision(self) -> int:
        return int(self._db.execute("SELECT value FROM meta WHERE key='revision'").fetchone()[0])

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        row = self._db.execute(
            "SELECT body FROM objects WHERE resource=? AND namespace=? AND name=?",
            (resource, namespace, name),
        ).fetchone()
        return json.loads(row[0]) if row else None

    def list(self, resource: str, namespace: str | None = None) -> tuple[builtins.list[Obj], int]:
        """A consistent snapshot and the revision it was taken at."""
        self._db.execute("BEGIN")
        try:
            if namespace is None:
                rows = self._db.execute(
                    "SELECT body FROM objects WHERE resource=? ORDER BY namespace, name", (resource,)
                ).fetchall()
            else:
                rows = self._db.execute(
                    "SELECT body FROM objects WHERE resource=? AND namespace=? ORDER BY name",
                    (resource, namespace),
                ).fetchall()
            revision = self.revision
        finally:
            self._db.execute("COMMIT")
        return [json.loads(r[0]) for r in rows], revision

    def snapshot(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        revision: int | None = None,
        start: tuple[str, str] | None = None,
    ) -> tuple[builtins.list[tuple[str, str, str]], int]:
        """Rows ``(namespace, name, body JSON)`` as of ``revision`` (default: now), in key order.

        ``start`` is an inclusive lower bound on ``(namespace, name)``. A past revision is rebuilt
        from the change log: a key written since then reads as it was before its first later
        write (absent if that write created it). Raises ``Expired`` when the log no longer
        reaches back that far and ``ValueError`` for a revision the store has not reached.
        """
        where, args = "resource=?", [resource]
        if namespace is not None:
            where += " AND namespace=?"
            args.append(namespace)
        if start is not None:
            where += " AND (namespace, name) >= (?, ?)"
            args += list(start)
        self._db.execute("BEGIN")
        try:
            current = self.revision
            at = current if revision is None else revision
            if at > current:
                raise ValueError(f"revision {at} is newer than the store's {current}")
            oldest = int(self._db.execute("SELECT value FROM meta WHERE key='compacted'").fetchone()[0])
            if at < oldest:
                raise Expired(at, oldest)
            rows = self._db.execute(
                f"SELECT namespace, name, body FROM objects WHERE {where} ORDER BY namespace, name", args
            ).fetchall()
            if at < current:
                before: dict[tuple[str, str], str | None] = {}
                for ns, name, kind, old in self._db.execute(
                    f"SELECT namespace, name, type, old_body FROM changes WHERE {where} AND rv>? ORDER BY rv",
                    [*args, at],
                ):
                    before.setdefault((ns, name), None if kind == "ADDED" else old)
                rows = [r for r in rows if (r[0], r[1]) not in before]
                rows += [(ns, name, old) for (ns, name), old in before.items() if old is not None]
                rows.sort(key=lambda r: (r[0], r[1]))
        finally:
            self._db.execute("COMMIT")
        return rows, at

    def all_objects(self) -> Iterator[tuple[str, Obj]]:
        for resource, body in self._db.execute("SELECT resource, body FROM objects").fetchall():
            yield resource, json.loads(body)

    def put(self, resource: str, namespace: str, name: str, obj: Obj, *, created: bool) -> Obj:
        """Write ``obj`` under the next revision; the caller has decided it is a real change."""
        old = None if created else self.get(resource, namespace, name)
        return self._write(resource, namespace, name, obj, "ADDED" if created else "MODIFIED", old)

    def remove(self, resource: str, namespace: str, name: str) -> Obj | None:
        old = self.get(resource, namespace, name)
        if old is None:
            return None
        return self._write(resource, namespace, name, old, "DELETED", old)

    def changes_since(self, revision: int, resource: str) -> builtins.list[Change]:
        oldest = int(self._db.execute("SELECT value FROM meta WHERE key='compacted'").fetchone()[0])
        if revision < oldest:
            raise Expired(revision, oldest)
        rows = self._db.execute(
            "SELECT rv, type, resource, namespace, name, body, old_body FROM changes "
            "WHERE resource=? AND rv>? ORDER BY rv",
            (resource, revision),
        ).fetchall()
        return [
            Change(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), json.loads(r[6]) if r[6] else None) for r in rows
        ]

    def compact(self, keep: int = RETAINED_CHANGES) -> None:
        floor = self.revision - keep
        if floor <= 0:
            return
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute("DELETE FROM changes WHERE rv<=?", (floor,))
        self._db.execute("UPDATE meta SET value=? WHERE key='compacted'", (floor,))
        self._db.execute("COMMIT")

    def _write(self, resource: str, namespace: str, name: str, obj: Obj, kind: str, old: Obj | None) -> Obj:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            rv = self.revision + 1
            obj = {**obj, "metadata": {**obj.get("metadata", {}), "resourceVersion": str(rv)}}
            body = json.dumps(obj, separators=(",", ":"))
            if kind == "DELETED":
                self._db.execute(
                    "DELETE FROM objects WHERE resource=? AND namespace=? AND name=?",
                    (resource, namespace, name),
                )
            else:
                self._db.execute(
                    "INSERT OR REPLACE INTO objects VALUES (?,?,?,?,?)", (resource, namespace, name, rv, body)
                )
            self._db.execute(
                "INSERT INTO changes VALUES (?,?,?,?,?,?,?)",
                (rv, resource, namespace, name, kind, body, json.dumps(old) if old is not None else None),
            )
            self._db.execute("UPDATE meta SET value=? WHERE key='revision'", (rv,))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        change = Change(rv, kind, resource, namespace, name, obj, old)
        for listener in self._listeners:
            listener(change)
        return obj
