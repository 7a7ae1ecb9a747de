"""Durable object storage: SQLite in WAL mode with one global revision, as etcd (and kine) do.

Every write gets the next revision, which becomes the object's ``resourceVersion`` (a string on
the wire). Each write is also appended to a change log, so a watch can resume from any revision
still retained; older ones answer 410 Expired. After each commit the change is handed to the
listeners (the watch hub, the garbage collector) synchronously, so in the single event loop of
the plane there is no gap between a list snapshot and the watch that follows it.

The plane's event loop is the only writer, so the current revision and the current objects live
in memory too, as etcd's watch cache does for kube-apiserver: SQLite is written through on every
commit and read back only on open and for watch resumption. On disk the revision is the newest
entry of the change log (compaction keeps the newest entries and records where it cut). Bodies are
compact JSON without ``apiVersion``/``kind``, kept as bytes; readers that only forward them (lists,
watch events) splice them without decoding; the plane's own watchers share one decoding of a change
(``Change.decoded``), and every other reader that decodes gets its own copy.

Durability: WAL with ``synchronous=NORMAL``. A commit is in the WAL, in the OS page cache,
before the client is answered, so every acknowledged write survives the server process being
killed (SIGKILL, OOM); a power loss or kernel crash may lose the writes since the last
checkpoint, but never corrupts the database. Checkpoints (copying the WAL into the database
file, with its fsyncs) run on a thread of their own with its own connection, so the event loop
rarely waits for the disk. Under a steady stream of writes a background checkpoint never quite
catches up (a write always lands while it runs), and the WAL would grow without end; so every
``WAL_RESET_WRITES`` writes the loop asks for a checkpoint and, once it is done, finishes the
few frames written meanwhile itself (no write can land during that), which lets the next write
start the WAL over. A checkpointer thread starved of CPU must not hold that up: by
``WAL_LIMIT_WRITES`` the loop waits out any round in progress and checkpoints everything itself.

A full disk: a write that finds no room (``SQLITE_FULL``) is rolled back and raises
``StorageFull``, and memory is updated only after a commit, so readers keep seeing exactly what is
on disk; reads go on being served, and writes succeed again once there is room.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import logging
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from trainyard.api.meta import Obj
from trainyard.cluster.server.storage import codec
from trainyard.cluster.server.storage.rows import Held, Keys, Rows

log = logging.getLogger(__name__)

# Each write touches as few pages as possible (each is a 4 KiB frame in the WAL): a body is
# written once, into the change log; objects is one b-tree (WITHOUT ROWID) of small rows, each
# naming the revision whose change holds the object's body (compaction keeps those changes);
# changes has no secondary index (a watch resuming reads the rows above its revision in rowid
# order and skips other resources; the log is bounded).
_OBJECTS = """
CREATE TABLE IF NOT EXISTS objects (
    resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, rv INTEGER NOT NULL,
    PRIMARY KEY (resource, namespace, name)
) WITHOUT ROWID;
"""
_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS changes (
    rv INTEGER PRIMARY KEY, resource TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
    type TEXT NOT NULL, body TEXT NOT NULL, old_body TEXT
);
"""
    + _OBJECTS
)

# Clients resume watches with old revisions (kopf after 70 s idle, informers every few minutes),
# so keep a long history; compaction trims only beyond this many changes.
RETAINED_CHANGES = 50_000
# Compact in steps of this many changes. A step runs inside a write, on the loop, and deletes
# the bodies of objects gone since: steps of 1,000 took 20-110 ms each while a namespace of 3,000
# jobs was torn down (every request waited behind them), steps of 100 take 1-15 ms.
COMPACT_EVERY = 100
# Version 2: bodies are version-free (no apiVersion/kind), objects has no rowid, changes no
# index. Version 3: objects holds no bodies (a pod's body, a third of it managedFields, was
# written twice per write; an Event's commit costs a fifth less without). Older stores are
# rewritten on open.
_FORMAT = 3
_READ_BATCH = 500  # revisions a query of ``COLD`` bodies asks for at most (SQLite's variable limit)
# A change that no live object's row names (the objects table's key, then its revision).
_UNHELD = (
    "NOT EXISTS (SELECT 1 FROM objects o WHERE o.resource=changes.resource AND o.namespace=changes.namespace"
    " AND o.name=changes.name AND o.rv=changes.rv)"
)
# Checkpoint at least this often (seconds), and as soon as this many writes have accumulated.
CHECKPOINT_SECONDS = 1.0
CHECKPOINT_WRITES = 200
WAL_RESET_WRITES = 1_000
# Past this many, the writer stops waiting for the background checkpoint: a checkpointer thread
# starved of CPU (a loaded machine) would otherwise let the WAL grow for as long as writes come.
WAL_LIMIT_WRITES = WAL_RESET_WRITES * 5 // 4


class StorageFull(Exception):
    """A write found no room on the disk that holds the store (``SQLITE_FULL``); none of it was kept.

    The transaction is rolled back and the in-memory state is left as it was, so what readers see
    stays what is on disk: no acknowledged write is lost and no failed one is visible.
    """

    def __init__(self, path: Path, detail: str) -> None:
        super().__init__(f"the store {path} found no room on its disk: {detail}")
        self.path = path
        self.detail = detail
        self.free: int | None = None  # bytes on the disk when the write failed
        self.total: int | None = None
        with contextlib.suppress(OSError):
            usage = shutil.disk_usage(path.parent)
            self.free, self.total = usage.free, usage.total


COLD = frozenset({"core/events", "events.k8s.io/events"})
"""Resources whose bodies are kept on disk only (the objects table names the change that holds
each): Events are the most numerous objects (about twenty a job: the operator's, the scheduler's,
the node's) and the least read (``describe``, ``get events``); in memory they were a fifth of
what a finished job held."""
# Held (rows): an object's stored body, or the revision of the change that holds it (``COLD``).


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
    old_body: bytes | None  # the object before, as stored; None for ADDED
    body: bytes = b""  # ``obj`` as stored: version-free compact JSON
    # Watch lines already encoded for this change, shared by every watcher of the same shape.
    lines: dict[tuple[str, str, str], bytes] = field(default_factory=dict, compare=False, repr=False)
    # The object as readers in this process take it, decoded once per shape and shared by all of
    # them (an informer's cache holds it): none may change it.
    objects: dict[tuple[bool, str, str], Obj] = field(default_factory=dict, compare=False, repr=False)
    # The object before, as the writer decoded it (``put``'s ``old``): listeners run before the
    # write returns, and none changes what it is handed.
    decoded_old: Obj | None = field(default=None, compare=False, repr=False)

    @functools.cached_property
    def old(self) -> Obj | None:
        """The object before the change, decoded when first asked: only a watch with a selector
        asks (did the object leave it?), and most changes have none."""
        if self.decoded_old is not None:
            return self.decoded_old
        return codec.loads(self.old_body) if self.old_body is not None else None

    @functools.cached_property
    def lean(self) -> bytes:
        """``body`` without ``metadata.managedFields``, encoded when first asked (during the write's
        fan-out, before anyone could change ``obj``): readers that drop them need not decode them,
        half of a pod's body."""
        m = self.obj.get("metadata")
        if not m or "managedFields" not in m:
            return self.body or codec.dumps(self.obj)
        return codec.dumps({**self.obj, "metadata": {k: v for k, v in m.items() if k != "managedFields"}})

    def stored(self, *, lean: bool = False) -> bytes:
        """``obj`` as stored (version-free JSON), ``lean`` without ``metadata.managedFields``."""
        return self.lean if lean else self.body or codec.dumps(self.obj)

    def decoded(self, api_version: str, kind: str, *, lean: bool = False) -> Obj:
        """``obj`` as stored (``lean``: without ``metadata.managedFields``), versioned, decoded once:
        three informers holding each pod (the operator's, the scheduler's, the node's) hold one copy."""
        key = (lean, api_version, kind)
        found = self.objects.get(key)
        if found is None:
            found = self.objects[key] = {"apiVersion": api_version, "kind": kind, **codec.loads(self.stored(lean=lean))}
        return found

    def line(self, event_type: str, api_version: str, kind: str) -> bytes:
        key = (event_type, api_version, kind)
        cached = self.lines.get(key)
        if cached is None:
            cached = self.lines[key] = codec.watch_line(event_type, codec.present(self.stored(), api_version, kind))
        return cached


Listener = Callable[[Change], None]


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


class Store:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # the checkpointer thread's job
        fresh = self._db.execute("SELECT 1 FROM sqlite_master WHERE name='objects'").fetchone() is None
        self._db.executescript(_SCHEMA)
        for key in ("revision", "compacted"):
            self._db.execute("INSERT OR IGNORE INTO meta VALUES (?, 0)", (key,))
        self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (_FORMAT if fresh else 1,))
        meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        newest = max(self._db.execute(f"SELECT max(rv) FROM {t}").fetchone()[0] or 0 for t in ("changes", "objects"))
        self._revision = max(int(meta["revision"]), int(newest))
        self._compacted = int(meta["compacted"])
        self._swept = 0  # the kept changes below the floor are looked at from here on (``compact``)
        if int(meta["format"]) < _FORMAT:
            self._upgrade()
        # resource -> namespace -> name -> stored body (a ``COLD`` one's revision): the committed
        # state, read without SQL.
        self._objects: dict[str, dict[str, dict[str, Held]]] = {}
        cold = ",".join("?" * len(COLD))
        for resource, namespace, name, rv, body in self._db.execute(
            f"SELECT o.resource, o.namespace, o.name, o.rv, CASE WHEN o.resource IN ({cold}) THEN NULL ELSE c.body END"
            " FROM objects o JOIN changes c ON c.rv = o.rv",
            sorted(COLD),
        ).fetchall():
            self._objects.setdefault(resource, {}).setdefault(namespace, {})[name] = (
                rv if body is None else _bytes(body)
            )
        self._listeners: list[Listener] = []
        # First, so that no listener after it (one that lists) reads an order a write has changed.
        self._keys = Keys(self._objects)
        self.subscribe(self._keys.changed)
        self._path = path
        self._unchecked = 0  # writes since the WAL last started over
        self._asked: int | None = None  # checkpoints started when the loop asked for one
        # Started by the first CHECKPOINT_WRITES writes: a store written a little needs none.
        self._checkpointer: _Checkpointer | None = None

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self._db.close()

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    @property
    def revision(self) -> int:
        return self._revision

    @property
    def compacted(self) -> int:
        """The newest revision no longer in the change log (0: nothing compacted yet)."""
        return self._compacted

    def exists(self, resource: str, namespace: str, name: str) -> bool:
        return self._raw(resource, namespace, name) is not None

    def get(self, resource: str, namespace: str, name: str) -> Obj | None:
        raw = self._raw(resource, namespace, name)
        return codec.loads(raw) if raw is not None else None

    def list(self, resource: str, namespace: str | None = None) -> tuple[builtins.list[Obj], int]:
        """A consistent snapshot and the revision it was taken at."""
        bodies, revision = self.list_raw(resource, namespace)
        return codec.loads_many(bodies), revision

    def list_raw(self, resource: str, namespace: str | None = None) -> tuple[builtins.list[bytes], int]:
        """Like ``list``, but the stored JSON bodies undecoded, ordered by namespace and name."""
        # The event loop is the only writer and this runs without yielding to it, so the bodies
        # and the revision describe the same moment.
        spaces = self._objects.get(resource, {})
        chosen = sorted(spaces) if namespace is None else [namespace]
        held: builtins.list[Held] = []
        for ns in chosen:
            names = spaces.get(ns, {})
            held += [names[n] for n in sorted(names)]
        return self._bodies(held), self._revision

    def snapshot(
        self,
        resource: str,
        namespace: str | None = None,
        *,
        revision: int | None = None,
        start: tuple[str, str] | None = None,
    ) -> tuple[Rows, int]:
        """Rows ``(namespace, name, body JSON)`` as of ``revision`` (default: now), in key order.

        ``start`` is an inclusive lower bound on ``(namespace, name)``. A past revision is rebuilt
        from the change log: a key written since then reads as it was before its first later
        write (absent if that write created it). Raises ``Expired`` when the log no longer
        reaches back that far and ``ValueError`` for a revision the store has not reached. The
        rows are read as they are iterated (a page reads its own, never the whole resource),
        so they must be read before the store's next write.
        """
        current = self._revision
        at = current if revision is None else revision
        if at > current:
            raise ValueError(f"revision {at} is newer than the store's {current}")
        if at < self._compacted:
            raise Expired(at, self._compacted)
        before: dict[tuple[str, str], bytes | None] = {}
        if at < current:
            where, args = "resource=?", [resource]
            if namespace is not None:
                where += " AND namespace=?"
                args.append(namespace)
            for ns, name, kind, old in self._db.execute(
                f"SELECT namespace, name, type, old_body FROM changes WHERE rv>? AND {where} ORDER BY rv", [at, *args]
            ):
                before.setdefault((ns, name), None if kind == "ADDED" or old is None else _bytes(old))
        bodies = self._bodies if resource in COLD else None
        rows = Rows(self._keys, resource, namespace, start or ("", ""), before, bodies, lambda: self._revision)
        return rows, at

    def all_objects(self) -> Iterator[tuple[str, Obj]]:
        snapshot = [(r, b) for r, spaces in self._objects.items() for names in spaces.values() for b in names.values()]
        bodies = self._bodies([b for _, b in snapshot])
        yield from zip((r for r, _ in snapshot), codec.loads_many(bodies), strict=True)

    def count(self, resource: str, namespace: str) -> int:
        """How many objects of ``resource`` ``namespace`` holds: one look, no decoding (quota counts)."""
        return len(self._objects.get(resource, {}).get(namespace, ()))

    def namespace_resources(self, namespace: str) -> builtins.list[str]:
        """The resources that hold at least one object in ``namespace``: a look per resource, never
        a walk over the namespace's objects (asked on every deletion while a namespace is torn down)."""
        return [resource for resource, spaces in self._objects.items() if spaces.get(namespace)]

    def put(self, resource: str, namespace: str, name: str, obj: Obj, *, created: bool, old: Obj | None = None) -> Obj:
        """Write ``obj`` under the next revision; the caller has decided it is a real change.
        ``old``: the stored object as the caller decoded it, if it did (watchers need not again)."""
        before = None if created else self._raw(resource, namespace, name)
        kind = "ADDED" if created else "MODIFIED"
        return self._write(resource, namespace, name, obj, kind, before, None if created else old)

    def remove(self, resource: str, namespace: str, name: str) -> Obj | None:
        old = self._raw(resource, namespace, name)
        if old is None:
            return None
        return self._write(resource, namespace, name, codec.loads(old), "DELETED", old)

    def changes_since(self, revision: int, resource: str) -> builtins.list[Change]:
        if revision < self._compacted:
            raise Expired(revision, self._compacted)
        rows = self._db.execute(
            "SELECT rv, type, resource, namespace, name, body, old_body FROM changes "
            "WHERE resource=? AND rv>? ORDER BY rv",
            (resource, revision),
        ).fetchall()
        return [
            Change(
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                codec.loads(r[5]),
                _bytes(r[6]) if r[6] else None,
                _bytes(r[5]),
            )
            for r in rows
        ]

    def compact(self, keep: int | None = None) -> None:
        """Drop the change log up to ``keep`` (default ``RETAINED_CHANGES``) changes before now."""
        floor = self._revision - (RETAINED_CHANGES if keep is None else keep)
        if floor <= self._compacted:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            # A change that holds a live object's body stays (never served: it is at or below
            # ``floor``). Each compaction asks only of its own range, an object looked up by key
            # per change: asking every time which revisions all live objects hold read the whole
            # objects table, a cost per write that grew with the objects stored.
            self._db.execute(f"DELETE FROM changes WHERE rv>? AND rv<=? AND {_UNHELD}", (self._compacted, floor))
            # A kept change whose object was written or deleted since is garbage below the floor:
            # a slice of the kept ones is looked at each time, round and round.
            kept = self._db.execute(
                "SELECT rv FROM changes WHERE rv>? AND rv<=? ORDER BY rv LIMIT ?",
                (self._swept, self._compacted, COMPACT_EVERY),
            ).fetchall()
            if kept:
                self._db.execute(f"DELETE FROM changes WHERE rv>=? AND rv<=? AND {_UNHELD}", (kept[0][0], kept[-1][0]))
            swept = kept[-1][0] if len(kept) == COMPACT_EVERY else 0
            self._db.execute("UPDATE meta SET value=? WHERE key='compacted'", (floor,))
            # With every change compacted away the log no longer tells the revision; meta does.
            self._db.execute("UPDATE meta SET value=? WHERE key='revision'", (self._revision,))
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._compacted, self._swept = floor, swept

    def _rollback(self) -> None:
        # SQLite rolls back by itself on some errors (SQLITE_FULL among them); a ROLLBACK then
        # fails and would hide the error that matters.
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def _raw(self, resource: str, namespace: str, name: str) -> bytes | None:
        held = self._objects.get(resource, {}).get(namespace, {}).get(name)
        return held if not isinstance(held, int) else self._bodies([held])[0]

    def _bodies(self, held: builtins.list[Held]) -> builtins.list[bytes]:
        """The bodies of ``held``, a ``COLD`` one's read from the change that holds it."""
        revisions = [h for h in held if isinstance(h, int)]
        read: dict[int, bytes] = {}
        for i in range(0, len(revisions), _READ_BATCH):
            batch = revisions[i : i + _READ_BATCH]
            marks = ",".join("?" * len(batch))
            for rv, body in self._db.execute(f"SELECT rv, body FROM changes WHERE rv IN ({marks})", batch):
                read[rv] = _bytes(body)
        return [h if isinstance(h, bytes) else read[h] for h in held]

    def _write(
        self,
        resource: str,
        namespace: str,
        name: str,
        obj: Obj,
        kind: str,
        old: bytes | None,
        decoded: Obj | None = None,
    ) -> Obj:
        rv = self._revision + 1
        obj = {k: v for k, v in obj.items() if k not in codec.TYPE_KEYS}
        obj["metadata"] = {**obj.get("metadata", {}), "resourceVersion": str(rv)}
        body = codec.dumps(obj)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if kind == "DELETED":
                self._db.execute(
                    "DELETE FROM objects WHERE resource=? AND namespace=? AND name=?",
                    (resource, namespace, name),
                )
            else:
                self._db.execute("INSERT OR REPLACE INTO objects VALUES (?,?,?,?)", (resource, namespace, name, rv))
            self._db.execute(
                "INSERT INTO changes VALUES (?,?,?,?,?,?,?)", (rv, resource, namespace, name, kind, body, old)
            )
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback()
            if exc.sqlite_errorcode == sqlite3.SQLITE_FULL:
                raise StorageFull(self._path, str(exc)) from exc
            raise
        except BaseException:
            self._rollback()
            raise
        self._revision = rv
        if kind == "DELETED":
            spaces = self._objects.get(resource, {})
            names = spaces.get(namespace, {})
            names.pop(name, None)
            if not names:
                spaces.pop(namespace, None)
        else:
            self._objects.setdefault(resource, {}).setdefault(namespace, {})[name] = rv if resource in COLD else body
        change = Change(rv, kind, resource, namespace, name, obj, old, body, decoded_old=decoded)
        for listener in self._listeners:
            listener(change)
        if rv - self._compacted > RETAINED_CHANGES + COMPACT_EVERY:
            # The write is committed and announced: a compaction that fails (a full disk) must not
            # turn it into an error; the next write tries again.
            try:
                self.compact()
            except sqlite3.Error as exc:
                log.warning("store compaction failed (retrying on a later write): %s", exc)
        self._unchecked += 1
        if self._unchecked % CHECKPOINT_WRITES == 0:
            if self._checkpointer is None:
                self._checkpointer = _Checkpointer(self._path)
                self._checkpointer.start()
            self._checkpointer.wake.set()
        if self._unchecked >= WAL_RESET_WRITES and self._checkpointer is not None:
            if self._asked is None:
                self._asked = self._checkpointer.started
                self._checkpointer.wake.set()
            elif self._checkpointer.rounds > self._asked and self._finish_checkpoint():
                self._unchecked, self._asked = 0, None
            elif self._unchecked >= WAL_LIMIT_WRITES:
                # Wait out a background round in progress, then checkpoint it all here; no round
                # can start meanwhile, so nothing holds the WAL and the next write starts it over.
                with self._checkpointer.lock:
                    if self._finish_checkpoint():
                        self._unchecked, self._asked = 0, None
        return obj

    def _finish_checkpoint(self) -> bool:
        """Backfill what the background checkpoint left (no writer runs meanwhile: we are it)."""
        try:
            busy, frames, done = self._db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.OperationalError:  # the background checkpoint holds the lock; next time
            return False
        return bool(busy == 0 and frames == done)

    def _upgrade(self) -> None:
        """Formats 1 and 2 to 3: objects rebuilt without rowid (1) and without bodies, each body
        version-free (1) in the change of the object's revision (compacted away: written again)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            rows = self._db.execute("SELECT resource, namespace, name, rv, body FROM objects").fetchall()
            self._db.execute("DROP TABLE objects")
            self._db.execute("DROP INDEX IF EXISTS changes_by_resource")
            self._db.execute(_OBJECTS)
            for resource, namespace, name, rv, body in rows:
                obj = codec.loads(body)
                if isinstance(obj, dict):
                    body = codec.dumps({k: v for k, v in obj.items() if k not in codec.TYPE_KEYS})
                self._db.execute("INSERT INTO objects VALUES (?,?,?,?)", (resource, namespace, name, rv))
                self._db.execute(
                    "INSERT INTO changes VALUES (?,?,?,?,'MODIFIED',?,NULL) "
                    "ON CONFLICT(rv) DO UPDATE SET body=excluded.body",
                    (rv, resource, namespace, name, body),
                )
            self._db.execute("UPDATE meta SET value=? WHERE key='format'", (_FORMAT,))
            self._db.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise


class _Checkpointer(threading.Thread):
    """Copies the WAL into the database file in the background (PASSIVE: never blocks a writer)."""

    def __init__(self, path: Path) -> None:
        super().__init__(name="store-checkpointer", daemon=True)
        self._path = path
        self.wake = threading.Event()
        self.lock = threading.Lock()  # held while a checkpoint runs
        self.started = 0  # checkpoints begun so far
        self.rounds = 0  # checkpoints done so far
        self._stopping = False

    def run(self) -> None:
        db = sqlite3.connect(self._path, isolation_level=None)
        try:
            while not self._stopping:
                self.wake.wait(CHECKPOINT_SECONDS)
                self.wake.clear()
                with self.lock:
                    self.started += 1
                    try:
                        db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    except sqlite3.Error as exc:
                        log.warning("store checkpoint failed (retrying): %s", exc)
                    self.rounds += 1
        finally:
            db.close()

    def stop(self) -> None:
        self._stopping = True
        self.wake.set()
        self.join()
