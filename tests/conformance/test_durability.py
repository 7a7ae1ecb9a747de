"""Crash durability of the embedded store: SIGKILL ``yard up`` in the middle of a write burst.

The store commits to SQLite's WAL with ``synchronous=NORMAL`` before a write is answered, so a
killed server process loses nothing it acknowledged (a power loss could lose the last
transactions, which no test here can produce). Several client threads write ConfigMaps and
record every 2xx answer; a watcher follows along; the server is SIGKILLed mid-burst and
started again on the same home. Then:

* the database the crash left is intact (``integrity_check``), every object's revision is at
  most the global one, and the change log has no gap above the compaction floor;
* every acknowledged write is there with at least its acknowledged resourceVersion, and the
  revision did not go back below the highest one acknowledged;
* every revision the watcher saw before the crash is in the change log (events follow commits),
  and a watch resumed from the last one gets exactly the later changes;
* a clean restart (``yard down`` / ``yard up``) keeps the revision and every resourceVersion.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from conftest import Plane, eventually, start_plane

pytestmark = pytest.mark.e2e

NS = "durable"
BASE = f"/api/v1/namespaces/{NS}/configmaps"
WRITERS = 6
ACKED_BEFORE_KILL = 200


def connect(plane: Plane) -> http.client.HTTPConnection:
    return plane.connection(timeout=30)


def call(conn: http.client.HTTPConnection, method: str, path: str, body: Any = None, ctype: str = "") -> Any:
    headers = {"Content-Type": ctype or "application/json"}
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    response = conn.getresponse()
    data = response.read()
    if not 200 <= response.status < 300:
        raise AssertionError(f"{method} {path}: {response.status} {data[:300]!r}")
    return json.loads(data)


def api(plane: Plane, method: str, path: str, body: Any = None, ctype: str = "") -> Any:
    conn = connect(plane)
    try:
        return call(conn, method, path, body, ctype)
    finally:
        conn.close()


@dataclass
class Ack:
    name: str
    rv: int
    data: dict[str, str]


@dataclass
class Burst:
    """Writer threads that create and patch ConfigMaps until the server stops answering."""

    plane: Plane
    acks: list[Ack] = field(default_factory=list)
    threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> None:
        self.threads = [threading.Thread(target=self._write, args=(t,), daemon=True) for t in range(WRITERS)]
        for thread in self.threads:
            thread.start()

    def _write(self, writer: int) -> None:
        conn = connect(self.plane)
        try:
            for i in range(100_000):
                name = f"cm-{writer}-{i}"
                data = {"step": "created"}
                obj = call(conn, "POST", BASE, {"metadata": {"name": name}, "data": data})
                self.acks.append(Ack(name, int(obj["metadata"]["resourceVersion"]), data))
                data = {"step": "patched"}
                obj = call(conn, "PATCH", f"{BASE}/{name}", {"data": data}, "application/merge-patch+json")
                self.acks.append(Ack(name, int(obj["metadata"]["resourceVersion"]), data))
        except (OSError, http.client.HTTPException):
            return  # the server is gone: whatever was not answered was not acknowledged
        finally:
            conn.close()

    def join(self) -> None:
        for thread in self.threads:
            thread.join(timeout=60)
            assert not thread.is_alive(), "a writer hung after the server was killed"


class Watcher:
    """A watch stream read on a thread: (type, name, resourceVersion) of every event."""

    def __init__(self, plane: Plane, rv: str | int) -> None:
        self.conn = connect(plane)
        self.conn.request("GET", f"{BASE}?watch=1&resourceVersion={rv}")
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        self.events: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            for line in self.response:
                self.events.append(json.loads(line))
        except Exception:  # a killed server or a closed socket ends the stream, however it surfaces
            pass

    def seen(self) -> list[tuple[str, str, int]]:
        return [
            (e["type"], e["object"]["metadata"]["name"], int(e["object"]["metadata"]["resourceVersion"]))
            for e in list(self.events)
            if e["type"] != "ERROR"
        ]

    def close(self) -> None:
        if self.conn.sock is not None:
            with contextlib.suppress(OSError):  # over TLS, a socket the killed server reset says so
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()
        self.thread.join(timeout=10)


def inspect(copy: Path) -> dict[str, Any]:
    """What the crash left on disk, read from a copy so the restart recovers the original itself."""
    db = sqlite3.connect(copy)
    try:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
        changes = db.execute("SELECT rv, resource, namespace, name, type FROM changes ORDER BY rv").fetchall()
        objects = db.execute(
            "SELECT o.resource, o.namespace, o.name, o.rv, c.body FROM objects o LEFT JOIN changes c ON c.rv = o.rv"
        ).fetchall()
    finally:
        db.close()
    revision = max([int(meta["revision"]), *(c[0] for c in changes), *(o[3] for o in objects)])
    compacted = int(meta["compacted"])
    for resource, namespace, name, rv, body in objects:
        assert rv <= revision, f"{resource} {namespace}/{name} has revision {rv} above the store's {revision}"
        assert body is not None, f"{resource} {namespace}/{name}: the change holding its body is gone"
        assert json.loads(body)["metadata"]["resourceVersion"] == str(rv)
    # Below the compacted revision only the changes that hold live objects' bodies stay.
    logged = [c[0] for c in changes if c[0] > compacted]
    assert logged == list(range(compacted + 1, revision + 1)), "the change log has a gap"
    return {
        "revision": revision,
        "compacted": compacted,
        "changes": {c[0]: c for c in changes},
        "configmaps": {o[2]: (o[3], json.loads(o[4])) for o in objects if o[0] == "core/configmaps" and o[1] == NS},
    }


def list_revision(plane: Plane) -> int:
    return int(api(plane, "GET", BASE)["metadata"]["resourceVersion"])


def test_acknowledged_writes_survive_a_sigkill_in_the_middle_of_a_burst(tmp_path: Path) -> None:
    home = tmp_path / "home"
    plane = start_plane(home)
    watcher: Watcher | None = None
    try:
        api(plane, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        watcher = Watcher(plane, list_revision(plane))
        burst = Burst(plane)
        burst.start()
        eventually(lambda: len(burst.acks) >= ACKED_BEFORE_KILL, timeout=120, what="a burst of acknowledged writes")
        eventually(lambda: len(watcher.events) >= 20, timeout=60, what="the watcher to follow the burst")
        pid = int(json.loads((home / "plane.json").read_text())["pid"])
        os.kill(pid, signal.SIGKILL)
        eventually(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), timeout=30, what="the server to die")
        burst.join()
        watcher.thread.join(timeout=30)
        seen_before = watcher.seen()
        watcher.close()
        watcher = None
        acks = list(burst.acks)
        assert len(acks) >= ACKED_BEFORE_KILL

        crashed = tmp_path / "crashed"
        crashed.mkdir()
        for f in home.glob("store.db*"):
            shutil.copy2(f, crashed / f.name)
        disk = inspect(crashed / "store.db")

        top = max(a.rv for a in acks)
        assert disk["revision"] >= top
        for ack in acks:
            assert ack.name in disk["configmaps"], f"acknowledged {ack.name}@{ack.rv} is gone"
            rv, body = disk["configmaps"][ack.name]
            assert rv >= ack.rv
            if rv == ack.rv:
                assert body["data"] == ack.data
        for kind, name, rv in seen_before:
            assert rv <= disk["revision"], f"the watcher saw {rv}, which was never committed"
            assert disk["changes"][rv][3] == name and disk["changes"][rv][4] == kind

        plane.up()  # the same home: recovery from the WAL the crash left
        assert list_revision(plane) >= disk["revision"] >= top
        for ack in acks:
            live = api(plane, "GET", f"{BASE}/{ack.name}")
            assert int(live["metadata"]["resourceVersion"]) >= ack.rv

        # Resume where the watcher was cut off: exactly the later changes of this namespace.
        last = seen_before[-1][2]
        assert last > disk["compacted"]
        wanted = [
            (c[4], c[3], rv)
            for rv, c in sorted(disk["changes"].items())
            if rv > last and c[1] == "core/configmaps" and c[2] == NS
        ]
        resumed = Watcher(plane, last)
        watcher = resumed
        eventually(lambda: len(resumed.events) >= len(wanted), timeout=60, what="the changes after the cut")
        assert resumed.seen() == wanted
    finally:
        if watcher is not None:
            watcher.close()
        plane.down()


def test_a_clean_restart_keeps_the_revision_and_every_resource_version(tmp_path: Path) -> None:
    plane = start_plane(tmp_path / "home")
    try:
        api(plane, "POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        for i in range(20):
            api(plane, "POST", BASE, {"metadata": {"name": f"c-{i}"}, "data": {"i": str(i)}})
        before = api(plane, "GET", BASE)
        plane.down()
        plane.up()
        after = api(plane, "GET", BASE)
        # The node agent re-registers on start, so the revision may move on, never back.
        assert int(after["metadata"]["resourceVersion"]) >= int(before["metadata"]["resourceVersion"])
        assert after["items"] == before["items"]
        created = api(plane, "POST", BASE, {"metadata": {"name": "after-restart"}})
        assert int(created["metadata"]["resourceVersion"]) > int(before["metadata"]["resourceVersion"])
    finally:
        plane.down()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
