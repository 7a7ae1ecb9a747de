"""Watch fan-out against a running plane over raw HTTP: many watchers, one encoding, no loss.

The server encodes a change once and writes it straight to every plain watcher's connection,
batching what piles up within one pass of its event loop. Whatever the batching, each watcher
must see every write exactly once, in revision order, carrying the resourceVersion the write
returned; selectors turn changes into ADDED/DELETED transitions; Table watchers get Tables; a
watch resumed from a revision gets the backlog and then the live changes without a gap.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Plane, eventually

pytestmark = pytest.mark.e2e

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
WATCHERS = 12
WRITES = 120


class Watch:
    """One watch stream read on a thread; ``events`` fills as lines arrive."""

    def __init__(self, plane: Plane, path: str, accept: str = "application/json") -> None:
        self.conn = plane.connection(timeout=120)
        self.conn.request("GET", path, headers={"Accept": accept})
        self.response = self.conn.getresponse()
        assert self.response.status == 200, self.response.read()
        self.events: list[dict[str, Any]] = []
        self.ended = False
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for line in self.response:
                self.events.append(json.loads(line))
        except Exception:  # closing the socket under http.client ends the stream any way it likes
            pass
        self.ended = True

    def close(self) -> None:
        if self.conn.sock is not None:
            with contextlib.suppress(OSError):  # over TLS, a socket the killed server reset says so
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        self.conn.close()
        self._thread.join(timeout=10)

    def seen(self) -> list[tuple[str, str, str]]:
        return [(e["type"], e["object"]["metadata"]["name"], _rv(e["object"])) for e in self.events]


def _rv(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


def call(plane: Plane, method: str, path: str, body: Any = None, ctype: str = "application/json") -> Any:
    conn = plane.connection(timeout=60)
    try:
        conn.request(method, path, json.dumps(body) if body is not None else None, {"Content-Type": ctype})
        response = conn.getresponse()
        data = response.read()
        assert 200 <= response.status < 300, (method, path, response.status, data[:500])
        return json.loads(data)
    finally:
        conn.close()


def create(plane: Plane, base: str, name: str) -> str:
    return str(call(plane, "POST", base, {"metadata": {"name": name}})["metadata"]["resourceVersion"])


@pytest.fixture
def ns(plane: Plane) -> Iterator[str]:
    name = f"fanout-{uuid.uuid4().hex[:8]}"
    call(plane, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    yield name
    call(plane, "DELETE", f"/api/v1/namespaces/{name}")


def test_every_watcher_sees_every_write_once_with_its_resource_version(plane: Plane, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    rv = call(plane, "GET", base)["metadata"]["resourceVersion"]
    plain = [Watch(plane, f"{base}?watch=1&resourceVersion={rv}") for _ in range(WATCHERS)]
    selected = Watch(plane, f"{base}?watch=1&resourceVersion={rv}&labelSelector=tier%3Dfront")
    tables = Watch(plane, f"{base}?watch=1&resourceVersion={rv}", accept=TABLE)
    expected: list[tuple[str, str, str]] = []
    transitions: list[tuple[str, str, str]] = []
    merge = "application/merge-patch+json"
    try:
        for i in range(WRITES):
            name = f"cm-{i % 10}"
            if i < 10:
                obj = call(plane, "POST", base, {"metadata": {"name": name}, "data": {"i": str(i)}})
                expected.append(("ADDED", name, obj["metadata"]["resourceVersion"]))
                continue
            if i % 7 == 0:  # a no-op: no new revision, no event
                current = call(plane, "GET", f"{base}/{name}")
                again = call(plane, "PATCH", f"{base}/{name}", {"data": current["data"]}, merge)
                assert again["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
                continue
            tier = "front" if i % 3 else "back"  # labels move objects in and out of the selection
            change = {"metadata": {"labels": {"tier": tier}}, "data": {"i": str(i)}}
            obj = call(plane, "PATCH", f"{base}/{name}", change, merge)
            event = ("MODIFIED", name, obj["metadata"]["resourceVersion"])
            expected.append(event)
            was_front = _in_front(transitions, name)
            if tier == "front":
                transitions.append(("MODIFIED" if was_front else "ADDED", name, event[2]))
            elif was_front:
                transitions.append(("DELETED", name, event[2]))
        gone = call(plane, "DELETE", f"{base}/cm-0")
        expected.append(("DELETED", "cm-0", gone["metadata"]["resourceVersion"]))
        if _in_front(transitions, "cm-0"):
            transitions.append(("DELETED", "cm-0", gone["metadata"]["resourceVersion"]))

        for watch in plain:
            eventually(lambda w=watch: len(w.events) >= len(expected), timeout=120, what="every event")
            assert watch.seen() == expected
        eventually(lambda: len(selected.events) >= len(transitions), timeout=60, what="the selector's transitions")
        assert selected.seen() == transitions
        eventually(lambda: len(tables.events) >= len(expected), timeout=60, what="every Table event")
        table_events = [(e["type"], e["object"]["kind"], e["object"]["rows"][0]["cells"][0]) for e in tables.events]
        assert table_events == [(t, "Table", name) for t, name, _ in expected]
    finally:
        for watch in [*plain, selected, tables]:
            watch.close()


def _in_front(transitions: list[tuple[str, str, str]], name: str) -> bool:
    mine = [t for t in transitions if t[1] == name]
    return bool(mine) and mine[-1][0] != "DELETED"


def test_a_resumed_watch_gets_the_backlog_then_live_changes_without_a_gap(plane: Plane, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    start = call(plane, "GET", base)["metadata"]["resourceVersion"]
    written = [create(plane, base, f"b-{i}") for i in range(30)]
    watch = Watch(plane, f"{base}?watch=1&resourceVersion={start}")
    try:
        eventually(lambda: len(watch.events) >= 30, timeout=60, what="the backlog")
        written += [create(plane, base, f"l-{i}") for i in range(30)]
        eventually(lambda: len(watch.events) >= 60, timeout=60, what="the live changes")
        assert [rv for _, _, rv in watch.seen()] == written
        assert [int(rv) for rv in written] == sorted(int(rv) for rv in written)
    finally:
        watch.close()


def test_watching_from_zero_lists_first_and_a_closed_watch_ends_cleanly(plane: Plane, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    for i in range(5):
        call(plane, "POST", base, {"metadata": {"name": f"z-{i}"}})
    watch = Watch(plane, f"{base}?watch=1&timeoutSeconds=2")
    eventually(lambda: watch.ended, timeout=60, what="the watch to time out")
    assert [(t, n) for t, n, _ in watch.seen()] == [("ADDED", f"z-{i}") for i in range(5)]
    watch.close()
