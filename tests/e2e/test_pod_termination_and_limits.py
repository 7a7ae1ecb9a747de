"""Graceful pod deletion and enforced resource limits on the local node, driven with the real kubectl.

Deleting a pod sends SIGTERM to each container's process group, waits up to the grace period,
then sends SIGKILL; the pod object goes only once its processes are gone, and its last status
shows how the containers ended. ``resources.limits.memory`` kills a container that goes over it
(``OOMKilled``, exit code 137); ``status.qosClass`` is computed as Kubernetes does.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually

pytestmark = pytest.mark.e2e

# Saves a "checkpoint" on SIGTERM and exits cleanly; a grandchild shares its process group.
TRAPS_TERM = """
import os, signal, subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])
def stop(*_):
    print("got SIGTERM, saving", flush=True)
    time.sleep(1)
    print("saved", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print(f"pids {os.getpid()} {child.pid}", flush=True)
while True:
    time.sleep(0.1)
"""

IGNORES_TERM = """
import os, signal, time
signal.signal(signal.SIGTERM, lambda *_: print("ignoring SIGTERM", flush=True))
print(f"pids {os.getpid()}", flush=True)
while True:
    time.sleep(0.1)
"""


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"lifecycle-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def python_pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "python:3.11", "command": ["python3", "-c", script]}
    container |= spec.pop("container", {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [container], **spec}}


def create(kubectl: Kubectl, ns: str, pod: dict[str, Any]) -> dict[str, Any]:
    created: dict[str, Any] = json.loads(kubectl("create", "-n", ns, "-f", "-", "-o", "json", input=json.dumps(pod)))
    return created


class Watch:
    """Every event of one pod from its creation on, read by a thread from the API's watch stream."""

    def __init__(self, plane: Plane, ns: str, name: str, resource_version: str) -> None:
        query = urllib.parse.urlencode(
            {"watch": "1", "fieldSelector": f"metadata.name={name}", "resourceVersion": resource_version}
        )
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._response = plane.urlopen(f"/api/v1/namespaces/{ns}/pods?{query}", timeout=120)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._response:
            event = json.loads(line)
            self.events.append((event["type"], event["object"]))
            if event["type"] == "DELETED":
                return

    def until_deleted(self) -> list[tuple[str, dict[str, Any]]]:
        self._thread.join(timeout=120)
        self._response.close()
        return self.events


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def pod_log(plane: Plane, ns: str, name: str, uid: str) -> str:
    path = plane.home / "pods" / f"{ns}_{name}_{uid}" / "logs" / "c.log"
    return path.read_text() if path.exists() else ""


def pids(plane: Plane, ns: str, name: str, uid: str) -> list[int]:
    for line in pod_log(plane, ns, name, uid).splitlines():
        text = line.split(" ", 3)[-1]
        if text.startswith("pids "):
            return [int(p) for p in text.split()[1:]]
    return []


def terminated(obj: dict[str, Any]) -> dict[str, Any] | None:
    for status in (obj.get("status") or {}).get("containerStatuses") or []:
        if "terminated" in (status.get("state") or {}):
            found: dict[str, Any] = status["state"]["terminated"]
            return found
    return None


def test_a_container_that_traps_sigterm_finishes_within_the_grace_period(
    plane: Plane, kubectl: Kubectl, ns: str
) -> None:
    created = create(kubectl, ns, python_pod("trap", TRAPS_TERM, terminationGracePeriodSeconds=30))
    uid = created["metadata"]["uid"]
    watch = Watch(plane, ns, "trap", created["metadata"]["resourceVersion"])
    main, child = eventually(lambda: pids(plane, ns, "trap", uid), what="the process to start")
    assert alive(main) and alive(child)

    kubectl("delete", "pod", "trap", "-n", ns, timeout=60)
    # kubectl waited for the object to go, and it went only once the processes were gone.
    assert not alive(main) and not alive(child)
    events = watch.until_deleted()
    assert events[-1][0] == "DELETED"
    finals = [(kind, t) for kind, obj in events if (t := terminated(obj)) is not None]
    assert finals, json.dumps([(k, o["metadata"].get("deletionTimestamp"), o.get("status")) for k, o in events])
    assert finals[0][0] == "MODIFIED"
    assert finals[0][1]["exitCode"] == 0 and finals[0][1]["reason"] == "Completed"
    assert events[-1][1]["status"]["phase"] == "Succeeded"
    log = pod_log(plane, ns, "trap", uid)
    assert "got SIGTERM, saving" in log and "saved" in log


def test_a_container_that_ignores_sigterm_is_killed_after_the_grace_period(
    plane: Plane, kubectl: Kubectl, ns: str
) -> None:
    created = create(kubectl, ns, python_pod("stubborn", IGNORES_TERM, terminationGracePeriodSeconds=2))
    uid = created["metadata"]["uid"]
    watch = Watch(plane, ns, "stubborn", created["metadata"]["resourceVersion"])
    (main,) = eventually(lambda: pids(plane, ns, "stubborn", uid), what="the process to start")

    kubectl("delete", "pod", "stubborn", "-n", ns, timeout=60)
    assert not alive(main)
    events = watch.until_deleted()
    deleting = next(obj for kind, obj in events if obj["metadata"].get("deletionTimestamp"))
    assert deleting["metadata"]["deletionGracePeriodSeconds"] == 2
    final = terminated(events[-1][1])
    assert final is not None and final["exitCode"] == 137
    assert "ignoring SIGTERM" in pod_log(plane, ns, "stubborn", uid)


def test_memory_over_the_limit_is_oom_killed(plane: Plane, kubectl: Kubectl, ns: str) -> None:
    # It holds what it took: without a cgroup the limit is enforced by polling, and a process that
    # ended within one poll of its allocation (a loaded machine) would escape it.
    script = (
        "import time\nkeep = [b'x' * (16 << 20) for _ in range(24)]\ntime.sleep(60)\nprint('survived', flush=True)\n"
    )
    pod = python_pod(
        "hog",
        script,
        restartPolicy="Never",
        container={"resources": {"limits": {"memory": "96Mi"}}},
    )
    created = create(kubectl, ns, pod)
    assert created["status"]["qosClass"] == "Burstable"
    final = eventually(
        lambda: (
            (p := kubectl.json("get", "pod", "hog", "-n", ns))["status"].get("phase") in ("Succeeded", "Failed") and p
        ),
        what="the pod to finish",
    )
    assert final["status"]["phase"] == "Failed"
    state = final["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["reason"] == "OOMKilled" and state["exitCode"] == 137
    assert "resources.limits.memory=96Mi" in state["message"]
    assert "raise resources.limits.memory" in state["message"]
    assert "survived" not in kubectl("logs", "hog", "-n", ns)
    events = kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=hog,reason=OOMKilled")
    assert "Warning" in events and "raise resources.limits.memory" in events
    assert "OOMKilled" in kubectl("describe", "pod", "hog", "-n", ns)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "100m"}}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "256Mi"}}, "Guaranteed"),
    ],
)
def test_qos_class_is_computed(kubectl: Kubectl, ns: str, resources: dict[str, Any], expected: str) -> None:
    pod = python_pod("qos", "print('ok')", restartPolicy="Never", container={"resources": resources})
    assert create(kubectl, ns, pod)["status"]["qosClass"] == expected
    done = eventually(
        lambda: (p := kubectl.json("get", "pod", "qos", "-n", ns))["status"].get("phase") == "Succeeded" and p,
        what="the pod to succeed",
    )
    assert done["status"]["qosClass"] == expected
    assert re.search(rf"QoS Class:\s+{expected}\n", kubectl("describe", "pod", "qos", "-n", ns))
