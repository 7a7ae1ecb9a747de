"""The history store: every job the dashboard saw, kept in one SQLite file after it finished or went.

One row per job (by uid) holds its latest object, when it finished (``views.finished_at``) and when
it was deleted; beside it, filed under the job's uid, its metric points (one per report, oldest
first), the checkpoint paths it named, its events (by the event's uid, so a repeated event updates
its count), the last object of each of its pods (by name: a restarted gang's new pod replaces the
old one) and the last ``log_bytes`` of each of its containers' logs. Reads and writes go through
indexes only: by uid, by the time a job ended (the history list, pruning), by uid and insertion
order (points, checkpoints).

``prune`` keeps the history bounded: a job that ended more than ``max_age`` ago, or that is not
among the newest ``max_jobs`` that ended, goes with everything filed under it. A running job is
never pruned. The recorder (``history.recorder``) is the one writer; it groups a burst of writes
into one transaction with ``batch``. One connection, shared by the recorder's writing thread and
the dashboard's readers behind one lock; WAL, so a reader never waits for a checkpoint of the log.

The schema's version is ``PRAGMA user_version``: a file written by a newer trainyard is refused
with what to do, never misread.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.dashboard import views

Json = dict[str, Any]

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE jobs (
    uid TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    created TEXT,
    finished TEXT,
    deleted TEXT,
    ended TEXT,           -- finished, else deleted: what the history list sorts by and pruning ages
    object TEXT NOT NULL  -- the latest object seen, as JSON
);
CREATE INDEX jobs_by_end ON jobs (ended) WHERE ended IS NOT NULL;
CREATE INDEX jobs_by_namespace ON jobs (namespace, ended) WHERE ended IS NOT NULL;
CREATE INDEX jobs_by_kind ON jobs (kind, ended) WHERE ended IS NOT NULL;
CREATE INDEX jobs_live ON jobs (uid) WHERE deleted IS NULL;
CREATE TABLE points (id INTEGER PRIMARY KEY, uid TEXT NOT NULL, point TEXT NOT NULL);
CREATE INDEX points_by_job ON points (uid, id);
CREATE TABLE checkpoints (id INTEGER PRIMARY KEY, uid TEXT NOT NULL, path TEXT NOT NULL, checkpoint TEXT NOT NULL);
CREATE UNIQUE INDEX checkpoints_by_job ON checkpoints (uid, path);
CREATE TABLE events (event_uid TEXT PRIMARY KEY, uid TEXT NOT NULL, event TEXT NOT NULL);
CREATE INDEX events_by_job ON events (uid);
CREATE TABLE pods (uid TEXT NOT NULL, name TEXT NOT NULL, pod TEXT NOT NULL, PRIMARY KEY (uid, name)) WITHOUT ROWID;
CREATE TABLE logs (
    uid TEXT NOT NULL, pod TEXT NOT NULL, container TEXT NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (uid, pod, container)
) WITHOUT ROWID;
"""
CHILD_TABLES = ("points", "checkpoints", "events", "pods", "logs")
PRUNE_CHUNK = 50
"""Jobs pruned in one transaction."""


class HistoryError(Exception):
    """The history file cannot be used as it is; the message says why and what to do."""


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _normal_time(text: str | None) -> str | None:
    """``text`` in the API's one format (second precision, ``Z``), so that times sort as strings."""
    if not text:
        return None
    try:
        return format_time(parse_time(text))
    except ValueError:
        return text


def _content(point: Json) -> str:
    """A point's step, epoch and metrics, as text: what two reports must share to be one."""
    return _dumps({k: v for k, v in point.items() if k != "time"})


def tail(data: bytes, limit: int) -> bytes:
    """The last ``limit`` bytes of ``data``, starting at a line's start where a line starts in them."""
    if len(data) <= limit:
        return data
    if limit <= 0:
        return b""
    cut = len(data) - limit
    if data[cut - 1 : cut] == b"\n":
        return data[cut:]
    newline = data.find(b"\n", cut)
    return data[newline + 1 :] if 0 <= newline < len(data) - 1 else data[cut:]


class HistoryStore:
    """The history of jobs in the SQLite file at ``path`` (created 0600, with its folder, if missing)."""

    def __init__(
        self,
        path: Path,
        *,
        max_jobs: int = 500,
        max_age: timedelta = timedelta(days=30),
        log_bytes: int = 1 << 20,
    ) -> None:
        self.path = path
        self.max_jobs = max_jobs
        self.max_age = max_age
        self.log_bytes = log_bytes
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        # Created 0600 before SQLite opens it: the history holds logs and specs (SQLite gives its
        # -wal and -shm files the database's permissions).
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        path.chmod(0o600)
        # One connection for the recorder's writing thread and the dashboard's readers, behind _lock.
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._lock = threading.RLock()
        self._depth = 0  # open ``batch``es: writes inside one commit together, at its end
        # What the last write of each job left, so that a report seen again writes nothing:
        # the latest point, the checkpoint paths; read from the file the first time a job is met.
        self._last_point: dict[str, str | None] = {}
        self._checkpoints: dict[str, set[str]] = {}
        self._open()

    def _open(self) -> None:
        db = self._db
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA foreign_keys=OFF")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"{self.path}: the job history was written by a newer trainyard (schema {version}, this one "
                f"reads {SCHEMA_VERSION}): upgrade trainyard, or move the file away to start a new history"
            )
        if version == 0:
            # One script, one transaction: a crash halfway leaves version 0 and no table.
            db.executescript("BEGIN;" + SCHEMA + f"PRAGMA user_version={SCHEMA_VERSION};COMMIT;")

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- transactions ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Every write inside commits at once, at the end (or none, on an exception)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                    self._forget_caches()
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._depth:
                yield self._db
                return
            self._db.execute("BEGIN")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                self._forget_caches()
                raise
            self._db.execute("COMMIT")

    def _forget_caches(self) -> None:
        self._last_point.clear()
        self._checkpoints.clear()

    # -- writes ------------------------------------------------------------------------------------

    def record_job(self, job: Obj, observed: str | None = None) -> Json | None:
        """Keep ``job`` as its latest object; its report as a new point, returned, if it is one.
        ``observed``: when the job was seen, the time of a report whose status stamps none."""
        with self._transaction() as db:
            self._upsert(db, job, deleted=None)
            return self._remember_report(db, job, observed)

    def record_report(self, job: Obj, observed: str | None = None) -> Json | None:
        """Only ``job``'s report: a new point (returned) or checkpoint; its object as last written stays."""
        with self._transaction() as db:
            return self._remember_report(db, job, observed)

    def mark_deleted(self, job: Obj, when: str) -> Json | None:
        """Keep ``job`` (its final object) as deleted at ``when``; a report it carried that is new is
        kept too, and returned as ``record_job`` returns it."""
        with self._transaction() as db:
            self._upsert(db, job, deleted=_normal_time(when))
            return self._remember_report(db, job)

    def _upsert(self, db: sqlite3.Connection, job: Obj, *, deleted: str | None) -> None:
        meta = job.get("metadata") or {}
        finished = _normal_time(views.finished_at(job))
        db.execute(
            """INSERT INTO jobs (uid, namespace, name, kind, created, finished, deleted, ended, object)
               VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, COALESCE(?6, ?7), ?8)
               ON CONFLICT (uid) DO UPDATE SET
                 finished = excluded.finished,
                 deleted = COALESCE(excluded.deleted, jobs.deleted),
                 ended = COALESCE(excluded.finished, excluded.deleted, jobs.deleted),
                 object = excluded.object""",
            (
                str(meta.get("uid") or ""),
                str(meta.get("namespace") or ""),
                str(meta.get("name") or ""),
                str(job.get("kind") or ""),
                meta.get("creationTimestamp"),
                finished,
                deleted,
                _dumps(job),
            ),
        )

    def _remember_report(self, db: sqlite3.Connection, job: Obj, observed: str | None = None) -> Json | None:
        uid = str((job.get("metadata") or {}).get("uid") or "")
        found = views.checkpoint(job)
        if found is not None:
            paths = self._checkpoints.get(uid)
            if paths is None:
                rows = db.execute("SELECT path FROM checkpoints WHERE uid = ?", (uid,))
                paths = self._checkpoints[uid] = {r[0] for r in rows}
            if found["path"] not in paths:
                db.execute(
                    "INSERT OR IGNORE INTO checkpoints (uid, path, checkpoint) VALUES (?, ?, ?)",
                    (uid, found["path"], _dumps(found)),
                )
                paths.add(found["path"])
        point = views.point(job, observed)
        if point is None:
            return None
        # A point repeats the last one when only its time differs: the same report seen again
        # (a shape without its own time is stamped when seen, every time it is seen).
        content = _content(point)
        if uid not in self._last_point:
            last = db.execute("SELECT point FROM points WHERE uid = ? ORDER BY id DESC LIMIT 1", (uid,)).fetchone()
            self._last_point[uid] = _content(json.loads(last[0])) if last else None
        if self._last_point[uid] == content:
            return None
        db.execute("INSERT INTO points (uid, point) VALUES (?, ?)", (uid, _dumps(point)))
        self._last_point[uid] = content
        return point

    def record_event(self, job_uid: str, event: Obj) -> None:
        """Keep ``event`` (about the job or one of its objects) as last seen, by its own uid."""
        event_uid = str((event.get("metadata") or {}).get("uid") or "")
        if not event_uid:
            return
        with self._transaction() as db:
            db.execute(
                """INSERT INTO events (event_uid, uid, event) SELECT ?1, ?2, ?3 WHERE EXISTS
                     (SELECT 1 FROM jobs WHERE uid = ?2)
                   ON CONFLICT (event_uid) DO UPDATE SET event = excluded.event""",
                (event_uid, job_uid, _dumps(event)),
            )

    def record_pod(self, job_uid: str, pod: Obj) -> None:
        """Keep ``pod`` as the job's last seen pod of its name."""
        name = str((pod.get("metadata") or {}).get("name") or "")
        with self._transaction() as db:
            db.execute(
                """INSERT INTO pods (uid, name, pod) SELECT ?1, ?2, ?3 WHERE EXISTS
                     (SELECT 1 FROM jobs WHERE uid = ?1)
                   ON CONFLICT (uid, name) DO UPDATE SET pod = excluded.pod""",
                (job_uid, name, _dumps(pod)),
            )

    def record_log(self, job_uid: str, pod: str, container: str, data: bytes) -> None:
        """Keep the last ``log_bytes`` of ``data`` as the container's log (replacing an earlier read)."""
        kept = tail(data, self.log_bytes)
        with self._transaction() as db:
            db.execute(
                """INSERT INTO logs (uid, pod, container, data) SELECT ?1, ?2, ?3, ?4 WHERE EXISTS
                     (SELECT 1 FROM jobs WHERE uid = ?1)
                   ON CONFLICT (uid, pod, container) DO UPDATE SET data = excluded.data""",
                (job_uid, pod, container, kept),
            )

    def prune(self, now: datetime) -> int:
        """Drop the jobs that ended before ``now - max_age`` or beyond the newest ``max_jobs``; how many went."""
        cutoff = format_time(now - self.max_age)
        old = self._query("SELECT uid FROM jobs WHERE ended IS NOT NULL AND ended < ?", (cutoff,))
        sql = "SELECT uid FROM jobs WHERE ended IS NOT NULL AND ended >= ? ORDER BY ended DESC LIMIT -1 OFFSET ?"
        gone = old + self._query(sql, (cutoff, self.max_jobs))
        # A chunk a transaction: a reader waits for one chunk's deletes at most (a job's logs are
        # up to a megabyte each), never for the whole sweep.
        for start in range(0, len(gone), PRUNE_CHUNK):
            chunk = gone[start : start + PRUNE_CHUNK]
            with self._transaction() as db:
                for table in (*CHILD_TABLES, "jobs"):
                    db.executemany(f"DELETE FROM {table} WHERE uid = ?", chunk)
                for (uid,) in chunk:
                    self._last_point.pop(uid, None)
                    self._checkpoints.pop(uid, None)
        return len(gone)

    # -- reads -------------------------------------------------------------------------------------

    def _query(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, args).fetchall()

    def live_uids(self) -> list[str]:
        """The jobs not recorded as deleted (finished or not)."""
        return [r[0] for r in self._query("SELECT uid FROM jobs WHERE deleted IS NULL")]

    def job(self, uid: str) -> Obj | None:
        """The job's last recorded object."""
        found = self._query("SELECT object FROM jobs WHERE uid = ?", (uid,))
        return json.loads(found[0][0]) if found else None

    def rows(self, *, namespace: str | None = None, kind: str | None = None, limit: int = 200) -> list[Json]:
        """The finished or deleted jobs as JobRows, the latest to end first."""
        where, args = ["ended IS NOT NULL"], []
        for column, value in (("namespace", namespace), ("kind", kind)):
            if value:
                where.append(f"{column} = ?")
                args.append(value)
        sql = f"SELECT object, deleted FROM jobs WHERE {' AND '.join(where)} ORDER BY ended DESC LIMIT ?"
        return [views.row(json.loads(obj), deleted=deleted) for obj, deleted in self._query(sql, (*args, limit))]

    def points(self, uid: str) -> list[Json]:
        """The job's metric points, oldest first."""
        return [json.loads(r[0]) for r in self._query("SELECT point FROM points WHERE uid = ? ORDER BY id", (uid,))]

    def checkpoints(self, uid: str) -> list[Json]:
        """The checkpoints the job named, the latest first."""
        sql = "SELECT checkpoint FROM checkpoints WHERE uid = ? ORDER BY id DESC"
        return [json.loads(r[0]) for r in self._query(sql, (uid,))]

    def log(self, uid: str, pod: str, container: str) -> bytes | None:
        """The stored end of the container's log, or None if none was read."""
        sql = "SELECT data FROM logs WHERE uid = ? AND pod = ? AND container = ?"
        found = self._query(sql, (uid, pod, container))
        return bytes(found[0][0]) if found else None

    def has_log(self, uid: str, pod: str, container: str) -> bool:
        return bool(
            self._query("SELECT 1 FROM logs WHERE uid = ? AND pod = ? AND container = ?", (uid, pod, container))
        )

    def detail(self, uid: str) -> Json | None:
        """The contract's HistoryDetail of the job, or None if it is not recorded."""
        with self._lock:
            found = self._query("SELECT object, deleted FROM jobs WHERE uid = ?", (uid,))
            if not found:
                return None
            job, deleted = json.loads(found[0][0]), found[0][1]
            pods = [json.loads(r[0]) for r in self._query("SELECT pod FROM pods WHERE uid = ?", (uid,))]
            events = [json.loads(r[0]) for r in self._query("SELECT event FROM events WHERE uid = ?", (uid,))]
            logs = self._query(
                "SELECT pod, container, length(data) FROM logs WHERE uid = ? ORDER BY pod, container", (uid,)
            )
            return {
                "row": views.row(job, deleted=deleted),
                "yaml": views.as_yaml(job),
                "conditions": views.condition_timeline(job),
                "replicas": views.replica_groups(pods),
                "events": views.events_table(events),
                "checkpoints": self.checkpoints(uid),
                "metrics": self.points(uid),
                "logs": [{"pod": pod, "container": container, "bytes": size} for pod, container, size in logs],
            }
