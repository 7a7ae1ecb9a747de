"""The streaming side of kubectl against the embedded plane: ``logs`` (``-f``, ``--tail``,
``--timestamps``, ``--since``, ``--since-time``, ``--limit-bytes``, ``--previous``) of pods the
node agent runs as local processes, and ``get -w`` with server-side Table watch events.

Only the real ``kubectl`` is driven; every assertion reads what it printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubectl_helpers import (
    SLEEPER,
    Streamer,
    configmap,
    create,
    ensure_widget_crd,
    namespace,
    pod,
    rows_with,
    wait_running,
    widget,
)

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e

STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z"
# Two bursts of lines more than a second apart, so a second-precision --since-time separates them.
BURSTS = (
    "import sys, time\n"
    "for i in range(3): print('early', i, flush=True)\n"
    "time.sleep(1.5)\n"
    "for i in range(2): print('late', i, flush=True)\n"
    "print('to stderr', file=sys.stderr, flush=True)\n"
)


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    yield from namespace(kubectl, "stream")


def test_logs_options(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, pod("bursts", ns, BURSTS))
    done = kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/bursts", "-n", ns, "--timeout=60s")
    assert done.strip() == "pod/bursts condition met"

    everything = "early 0\nearly 1\nearly 2\nlate 0\nlate 1\nto stderr\n"
    assert kubectl("logs", "bursts", "-n", ns) == everything
    assert kubectl("logs", "pod/bursts", "-n", ns, "-c", "c") == everything
    assert kubectl("logs", "bursts", "-n", ns, "--tail=2") == "late 1\nto stderr\n"
    assert kubectl("logs", "bursts", "-n", ns, "--tail=0") == ""
    assert kubectl("logs", "bursts", "-n", ns, "--limit-bytes=10") == "early 0\nea"

    stamped = kubectl("logs", "bursts", "-n", ns, "--timestamps").splitlines()
    assert len(stamped) == 6 and all(re.fullmatch(rf"{STAMP} .+", line) for line in stamped), stamped
    assert [line.split(" ", 1)[1] for line in stamped] == everything.splitlines()
    late_second = stamped[3].split(".")[0] + "Z"  # --since-time has second precision on the wire
    assert kubectl("logs", "bursts", "-n", ns, f"--since-time={late_second}") == "late 0\nlate 1\nto stderr\n"

    assert kubectl("logs", "bursts", "-n", ns, "--since=1h") == everything
    eventually(
        lambda: kubectl("logs", "bursts", "-n", ns, "--since=1s") == "",
        timeout=30,
        what="--since=1s to leave out lines older than a second",
    )

    previous = kubectl.run("logs", "bursts", "-n", ns, "--previous")
    assert previous.returncode == 1
    assert 'previous terminated container "c" in pod "bursts" not found' in previous.stderr
    wrong = kubectl.run("logs", "bursts", "-n", ns, "-c", "nope")
    assert wrong.returncode == 1 and "container nope is not valid for pod bursts" in wrong.stderr

    # What kubectl validates itself never reaches the server; a raw request must still get a Status.
    base = f"/api/v1/namespaces/{ns}/pods/bursts/log"
    bad_int = kubectl.run("get", "--raw", f"{base}?tailLines=x")
    assert "Error from server (BadRequest)" in bad_int.stderr, bad_int.stderr
    negative = kubectl.run("get", "--raw", f"{base}?limitBytes=-1")
    assert "limitBytes: Invalid value: -1: must be greater than 0" in negative.stderr, negative.stderr
    bad_time = kubectl.run("get", "--raw", f"{base}?sinceTime=yesterday")
    assert "Error from server (BadRequest)" in bad_time.stderr, bad_time.stderr


def test_logs_of_a_container_that_cannot_start(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, {**pod("stuck", ns, ""), "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    eventually(
        lambda: "CreateContainerConfigError" in kubectl("get", "pod", "stuck", "-n", ns),
        what="the pod without a command to report CreateContainerConfigError",
    )
    result = kubectl.run("logs", "stuck", "-n", ns)
    assert result.returncode == 1
    assert 'container "c" in pod "stuck" is waiting to start: CreateContainerConfigError' in result.stderr


def test_logs_follow_streams_until_the_container_exits(kubectl: Kubectl, ns: str) -> None:
    ticker = "import time\nfor i in range(8):\n    print('tick', i, flush=True)\n    time.sleep(0.4)\n"
    create(kubectl, pod("ticker", ns, ticker))
    wait_running(kubectl, ns, "ticker")
    follower = Streamer(kubectl, "logs", "-f", "ticker", "-n", ns)
    try:
        follower.wait_for(lambda lines: "tick 1" in lines, what="the first ticks")
        assert follower.running(), "kubectl logs -f ended while the container still ran"
        assert follower.wait_exit(60) == 0
        assert follower.lines == [f"tick {i}" for i in range(8)]
    finally:
        follower.stop()

    create(kubectl, pod("sleeper", ns, SLEEPER))
    wait_running(kubectl, ns, "sleeper")
    tail = Streamer(kubectl, "logs", "-f", "sleeper", "-n", ns, "--tail=1", "--timestamps")
    try:
        line = tail.wait_for(lambda lines: lines and lines[0], what="the last line")
        assert re.fullmatch(rf"{STAMP} up", line)
        assert tail.running()
    finally:
        tail.stop()


def test_get_watch_prints_table_rows_for_each_change(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, configmap("first", ns, {"a": "1"}))
    watcher = Streamer(kubectl, "get", "configmaps", "-n", ns, "-w")
    try:
        watcher.wait_for(lambda lines: rows_with(lines, "first", "1"), what="the initial row")
        assert re.fullmatch(r"NAME\s+DATA\s+AGE", watcher.lines[0])
        create(kubectl, configmap("second", ns, {"a": "1"}))
        watcher.wait_for(lambda lines: rows_with(lines, "second", "1"), what="the ADDED row")
        kubectl("patch", "configmap", "second", "-n", ns, "-p", '{"data":{"b":"2"}}')
        watcher.wait_for(lambda lines: rows_with(lines, "second", "2"), what="the MODIFIED row")
        kubectl("delete", "configmap", "first", "-n", ns)
        watcher.wait_for(lambda lines: len(rows_with(lines, "first", "1")) == 2, what="the DELETED row")
        # Table watch events print as rows under the one header, never as repeated headers.
        assert [line for line in watcher.lines if line.startswith("NAME")] == [watcher.lines[0]]
    finally:
        watcher.stop()


def test_get_watch_custom_resources_with_printer_columns_and_event_types(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    watcher = Streamer(kubectl, "get", "widgets", "-n", ns, "-w", "--output-watch-events")
    try:
        create(kubectl, widget("gear", ns, size=1))
        watcher.wait_for(lambda lines: rows_with(lines, "ADDED", "gear", "1", "<none>"), what="ADDED")
        assert re.fullmatch(r"EVENT\s+NAME\s+SIZE\s+READY\s+AGE", watcher.lines[0])
        kubectl("patch", "widget", "gear", "-n", ns, "--type=merge", "-p", '{"spec":{"size":2}}')
        watcher.wait_for(lambda lines: rows_with(lines, "MODIFIED", "gear", "2", "<none>"), what="spec MODIFIED")
        ready = '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}'
        kubectl("patch", "widget", "gear", "-n", ns, "--subresource=status", "--type=merge", "-p", ready)
        watcher.wait_for(lambda lines: rows_with(lines, "MODIFIED", "gear", "2", "True"), what="status MODIFIED")
        kubectl("delete", "widget", "gear", "-n", ns)
        watcher.wait_for(lambda lines: rows_with(lines, "DELETED", "gear", "2", "True"), what="DELETED")
    finally:
        watcher.stop()


def test_get_watch_follows_a_pod_through_its_phases(kubectl: Kubectl, ns: str) -> None:
    watcher = Streamer(kubectl, "get", "pods", "-n", ns, "-w")
    try:
        create(kubectl, pod("brief", ns, "import time\ntime.sleep(1.5)\nprint('bye')"))
        watcher.wait_for(lambda lines: rows_with(lines, "brief", "1/1", "Running"), what="the Running row")
        watcher.wait_for(lambda lines: rows_with(lines, "brief", "0/1", "Completed"), what="the Completed row")
        order = [i for i, line in enumerate(watcher.lines) if "Running" in line or "Completed" in line]
        assert "Running" in watcher.lines[order[0]] and "Completed" in watcher.lines[order[-1]]
        assert re.fullmatch(r"NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE", watcher.lines[0])
    finally:
        watcher.stop()


def test_get_watch_one_object_all_namespaces_and_json(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, configmap("solo", ns, {"a": "1"}, labels={"suite": ns}))
    create(kubectl, configmap("other", ns, {"a": "1"}, labels={"suite": ns}))
    one = Streamer(kubectl, "get", "configmap", "solo", "-n", ns, "-w")
    every = Streamer(kubectl, "get", "configmaps", "-A", "-l", f"suite={ns}", "-w")
    as_json = Streamer(kubectl, "get", "configmaps", "-n", ns, "-w", "-o", "json", "--watch-only")
    try:
        one.wait_for(lambda lines: rows_with(lines, "solo", "1"), what="the object's row")
        every.wait_for(lambda lines: rows_with(lines, ns, "other", "1"), what="rows of every namespace")
        assert re.fullmatch(r"NAMESPACE\s+NAME\s+DATA\s+AGE", every.lines[0])
        kubectl("patch", "configmap", "other", "-n", ns, "-p", '{"data":{"b":"2"}}')
        kubectl("patch", "configmap", "solo", "-n", ns, "-p", '{"data":{"b":"2"}}')
        one.wait_for(lambda lines: rows_with(lines, "solo", "2"), what="the object's change")
        every.wait_for(lambda lines: rows_with(lines, ns, "solo", "2"), what="the change in every namespace")
        assert not rows_with(one.lines, "other"), "a watch on one name must not show other objects"
        # The initial row is printed once, from the GET, even though the watch starts at "0".
        assert len(rows_with(one.lines, "solo", "1")) == 1

        changed = as_json.wait_for(
            lambda lines: [o for o in json_objects(lines) if o["metadata"]["name"] == "solo"],
            what="the changed object as JSON",
        )
        assert changed[0]["kind"] == "ConfigMap" and changed[0]["data"] == {"a": "1", "b": "2"}
    finally:
        for streamer in (one, every, as_json):
            streamer.stop()


def json_objects(lines: list[str]) -> list[dict[str, Any]]:
    """The JSON objects printed one after another so far; a half-printed last one is left out."""
    text, found, decoder = "\n".join(lines).strip(), [], json.JSONDecoder()
    while text:
        try:
            obj, end = decoder.raw_decode(text)
        except json.JSONDecodeError:
            break
        found.append(obj)
        text = text[end:].strip()
    return found
