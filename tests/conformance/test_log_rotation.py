"""Container log rotation as the kubelet's, seen through the real kubectl against ``yard up
--container-log-max-size 8Ki --container-log-max-files 5`` (small, so a few hundred lines rotate).

A container's log stays within the limits on disk, ``kubectl logs`` serves the current file,
``--tail`` reaches into the rotated ones, ``-f`` reads every line once across rotations, and
``--previous`` shows the last file of the run before.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubectl_helpers import Streamer, wait_running

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

MAX_SIZE = 8 * 1024
MAX_FILES = 5
LINES = 1000  # about 51 bytes a record: 50 KB, six rotations
# Line 0, then the rest once $GO exists (the follower is reading by then), a few a millisecond apart.
CHATTY = f"""
import os, time
print('line 00000', flush=True)
while not os.path.exists(os.environ['GO']):
    time.sleep(0.01)
for i in range(1, {LINES}):
    print(f'line {{i:05d}}', flush=True)
    time.sleep(0.004)
"""
# The first run writes 500 lines and fails; the second (restartPolicy OnFailure) says so and ends.
TWICE = """
import os, sys
if os.path.exists('ran'):
    print('second run', flush=True); sys.exit(0)
open('ran', 'w').close()
for i in range(500):
    print(f'line {i:05d}', flush=True)
sys.exit(1)
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    flags = ("--container-log-max-size", "8Ki", "--container-log-max-files", str(MAX_FILES), "--restart-backoff", "0.2")
    yield from own_plane(tmp_path_factory, "yard-log-rotation", *flags)


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"rotation-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def create_pod(kubectl: Kubectl, ns: str, name: str, script: str, policy: str, env: dict[str, str]) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {
                    "name": "c",
                    "image": "python:3.11",
                    "command": ["python3", "-c", script],
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                }
            ],
        },
    }
    created: dict[str, Any] = json.loads(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(pod)))
    return created


def numbered(text: str) -> list[int]:
    return [int(m.group(1)) for m in re.finditer(r"^line (\d{5})$", text, re.MULTILINE)]


def log_files(plane: Plane, ns: str, name: str, uid: str) -> list[Path]:
    return sorted((plane.home / "pods" / f"{ns}_{name}_{uid}" / "logs").iterdir())


def test_a_chatty_container_is_capped_and_kubectl_logs_reads_across_rotations(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    uid = create_pod(kubectl, ns, "chatty", CHATTY, "Never", {"GO": str(go)})["metadata"]["uid"]
    wait_running(kubectl, ns, "chatty")
    follower = Streamer(kubectl, "logs", "-f", "chatty", "-n", ns)
    try:
        follower.wait_for(lambda lines: "line 00000" in lines, what="the first line")
        go.touch()
        assert follower.wait_exit(120) == 0
        # Every line once, in order, across the rotations: the follower never lost its place.
        assert numbered("\n".join(follower.lines)) == list(range(LINES)), follower.lines
    finally:
        follower.stop()
    eventually(
        lambda: kubectl.json("get", "pod", "chatty", "-n", ns)["status"].get("phase") == "Succeeded",
        what="the chatty pod to succeed",
    )

    files = log_files(plane, ns, "chatty", uid)
    assert files[0].name == "c.log" and len(files) == MAX_FILES, files
    assert all(f.name.startswith("c.log.") for f in files[1:]), files
    assert all(f.stat().st_size <= MAX_SIZE for f in files), [(f.name, f.stat().st_size) for f in files]

    # kubectl logs: the current file, as the kubelet serves it.
    current = numbered(kubectl("logs", "chatty", "-n", ns))
    assert current == list(range(LINES - len(current), LINES)) and 0 < len(current) < MAX_SIZE // 40
    # --tail: as many lines as asked, reaching into the rotated files.
    wanted = len(current) + 100
    assert numbered(kubectl("logs", "chatty", "-n", ns, f"--tail={wanted}")) == list(range(LINES - wanted, LINES))
    assert numbered(kubectl("logs", "chatty", "-n", ns, "--tail=3")) == [LINES - 3, LINES - 2, LINES - 1]


def test_previous_shows_the_last_file_of_the_run_before(plane: Plane, kubectl: Kubectl, ns: str) -> None:
    uid = create_pod(kubectl, ns, "twice", TWICE, "OnFailure", {})["metadata"]["uid"]
    eventually(
        lambda: kubectl.json("get", "pod", "twice", "-n", ns)["status"].get("phase") == "Succeeded",
        what="the second run to succeed",
    )
    assert kubectl("logs", "twice", "-n", ns) == "second run\n"
    previous = numbered(kubectl("logs", "twice", "-n", ns, "--previous"))
    assert previous == list(range(500 - len(previous), 500)) and 0 < len(previous) < 500
    # The first run's rotated files went with it: kubectl could never read them again.
    assert [f.name for f in log_files(plane, ns, "twice", uid)] == ["c.log", "c.previous.log"]
