"""The plane's home on a disk that fills up: a real 16 MiB tmpfs under a real ``yard up``, filled by a
file until nothing is left, driven with the real kubectl.

A write the store has no room for is answered 507 with a Status naming the home and what to do,
nothing of it is kept, every write acknowledged before is, reads go on, and writes work again
once the file is removed, also after a restart. A pod logging onto the full disk keeps running:
its log loses output, says so once there is room again, and goes on. ``yard up`` in a home on the
full disk says so and stops.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, free_port
from small_disk import fill, small_disk

pytestmark = pytest.mark.e2e

BLOB = 256 * 1024  # each ConfigMap takes this much more room, more than any slack the store has left
# A line of about 8 KiB every 20 ms (more than a log file's last block has room for), counted in $PROGRESS.
CHATTY = """
import itertools, os, pathlib, time
progress = pathlib.Path(os.environ['PROGRESS'])
scratch = progress.with_suffix('.next')
for i in itertools.count():
    print(f'line {i:06d} ' + 'x' * 8000, flush=True)
    # Replaced whole, never truncated then written: a reader in between would read nothing.
    scratch.write_text(str(i))
    os.replace(scratch, progress)
    time.sleep(0.02)
"""


@pytest.fixture(scope="module")
def disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with small_disk(tmp_path_factory.mktemp("full-disk") / "disk", "16m") as mounted:
        yield mounted


@pytest.fixture(scope="module")
def plane(disk: Path) -> Iterator[Plane]:
    home = Plane(disk / "home", free_port())
    home.up()
    yield home
    home.down()


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def full(disk: Path) -> Iterator[Path]:
    """The disk filled to the last block for the test, whatever it asserts; ``unlink`` it to free it."""
    filler = fill(disk)
    yield filler
    filler.unlink(missing_ok=True)


def configmap(name: str) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"blob": "b" * BLOB}}
    )


def stored(kubectl: Kubectl) -> dict[str, int]:
    listed = kubectl.json("get", "configmaps", "-n", "default")["items"]
    return {c["metadata"]["name"]: len(c["data"]["blob"]) for c in listed if c["metadata"]["name"].startswith("cm-")}


def test_a_full_home_answers_507_loses_no_acknowledged_write_and_recovers(
    plane: Plane, kubectl: Kubectl, full: Path
) -> None:
    acknowledged: list[str] = []
    refused: tuple[str, Any] | None = None
    for i in range(64):  # the disk holds fewer than 64 of them
        result = kubectl.run("create", "-f", "-", input=configmap(f"cm-{i}"))
        if result.returncode != 0:
            refused = (f"cm-{i}", result)
            break
        acknowledged.append(f"cm-{i}")
    assert refused is not None, "every ConfigMap fitted on a full disk"
    name, result = refused
    home = plane.home
    assert "Error from server (InsufficientStorage)" in result.stderr, result.stderr
    assert f"the API server's store {home}/store.db could not be written (database or disk is full" in result.stderr
    assert f"Free space on the disk that holds {home} (the plane's $TRAINYARD_HOME) and retry" in result.stderr

    # The answer on the wire: 507 with a Status, as any other failure of the API server.
    conn = plane.connection()
    try:
        conn.request(
            "POST", "/api/v1/namespaces/default/configmaps", configmap(name), {"Content-Type": "application/json"}
        )
        response = conn.getresponse()
        status = json.loads(response.read())
    finally:
        conn.close()
    assert response.status == 507, status
    assert (status["kind"], status["status"], status["reason"], status["code"]) == (
        "Status",
        "Failure",
        "InsufficientStorage",
        507,
    )

    # Reads go on, and show exactly what was acknowledged.
    assert stored(kubectl) == dict.fromkeys(acknowledged, BLOB)
    missing = kubectl.run("get", "configmap", name, "-n", "default")
    assert f'configmaps "{name}" not found' in missing.stderr

    full.unlink()  # room again
    assert kubectl("create", "-f", "-", input=configmap(name)).strip() == f"configmap/{name} created"
    acknowledged.append(name)
    assert stored(kubectl) == dict.fromkeys(acknowledged, BLOB)

    # What was acknowledged is on disk, not only in the server's memory.
    plane.down()
    plane.up()
    assert stored(kubectl) == dict.fromkeys(acknowledged, BLOB)
    kubectl("delete", "configmap", *acknowledged, "-n", "default")


def test_a_pod_logging_onto_a_full_disk_keeps_running_and_its_log_says_what_was_lost(
    plane: Plane, kubectl: Kubectl, disk: Path, tmp_path: Path
) -> None:
    progress = tmp_path / "progress"  # off the full disk: the container's own count of lines printed
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "chatty", "namespace": "default"},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": "python:3.11",
                    "command": ["python3", "-c", CHATTY],
                    "env": [{"name": "PROGRESS", "value": str(progress)}],
                }
            ],
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(pod))

    def printed() -> int:
        try:
            return int(progress.read_text())
        except FileNotFoundError:
            return -1

    eventually(lambda: printed() >= 3 and "line 000002" in kubectl("logs", "chatty"), what="the pod to log")
    filler = fill(disk)
    try:
        at_fill = printed()
        # More than a pipe holds (64 KiB) printed since: the shim has read, and failed to write, some of it.
        eventually(lambda: printed() >= at_fill + 10, what="the container to go on printing on a full disk")
    finally:
        filler.unlink()

    def logged_again() -> tuple[str, list[int], list[int]] | None:
        """The notice, the line numbers before it and after it, once lines printed since the fill follow it."""
        text = kubectl("logs", "chatty")
        found = re.search(r"^trainyard: \d+ bytes of this container's output were not logged: .*$", text, re.M)
        if found is None:
            return None
        parts = text.split(found[0])
        assert len(parts) == 2, f"the notice is in the log {len(parts) - 1} times"  # once, when logging resumed
        before, after = ([int(n) for n in re.findall(r"^line (\d{6}) ", part, re.M)] for part in parts)
        return (found[0], before, after) if after and after[-1] > at_fill + 10 else None

    line, before, after = eventually(logged_again, what="the log to say what it lost, then go on")
    assert f"No space left on device writing {plane.home}/pods/default_chatty_" in line, line
    assert before == list(range(len(before))) and after == list(range(after[0], after[0] + len(after)))
    assert after[0] > before[-1] + 1  # what is missing between them is what the disk had no room for
    # The container never stopped, nor was it restarted: its shim rode it out.
    eventually(
        lambda: (
            (status := kubectl.json("get", "pod", "chatty"))["status"].get("phase") == "Running"
            and status["status"]["containerStatuses"][0].get("restartCount") == 0
            and "running" in status["status"]["containerStatuses"][0]["state"]
        ),
        what="the pod to be Running, never restarted",
    )
    assert printed() > at_fill + 10
    kubectl("delete", "pod", "chatty", "--wait=true")


def test_yard_up_on_a_full_disk_says_so(plane: Plane, full: Path) -> None:
    other = Plane(full.parent / "other-home", free_port())
    result = other.yard("up", "--port", str(other.port), check=False)
    assert result.returncode == 1, result
    assert f"error: cannot write in {other.home}: No space left on device; free space on the disk" in result.stderr
