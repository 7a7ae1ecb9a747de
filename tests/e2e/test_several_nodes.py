"""Several nodes in one plane (``yard up --nodes-file``), seen through the real kubectl.

Three nodes from a nodes file, each a Node with its own Lease, capacity, labels and taints; a
node's machine stopped and started again (``trainyard.dev/power``, what ``yard node stop|start``
write) and a spot node reclaimed after its notice (``trainyard.dev/preemption-notice``, what
``yard node preempt`` writes). Pods are pinned to their node by ``kubernetes.io/hostname`` and
run processes that wait for a file, so nothing depends on timing.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

WAIT = 90.0
NODES = {
    "nodes": [
        {
            "name": "n1",
            "capacity": {"cpu": "8", "memory": "32Gi"},
            "labels": {"topology.kubernetes.io/zone": "zone-a"},
        },
        {
            "name": "n2",
            "capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": 4},
            "labels": {"topology.kubernetes.io/zone": "zone-b", "nvidia.com/gpu.product": "A100-SXM4-80GB"},
            "taints": ["nvidia.com/gpu:NoSchedule"],
        },
        {"name": "n3", "capacity": {"cpu": "4", "memory": "16Gi"}, "labels": {"topology.kubernetes.io/zone": "zone-b"}},
    ]
}


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    spec = tmp_path_factory.mktemp("nodes-file") / "nodes.yaml"
    spec.write_text(yaml.safe_dump(NODES))
    yield from own_plane(tmp_path_factory, "yard-nodes", "--nodes-file", str(spec), "--node-lease-duration", "4")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"nodes-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "pods", "--all", "-n", name, "--grace-period=0", "--wait=false")
    kubectl.run("delete", "namespace", name, "--wait=false")


def pinned_pod(name: str, node: str, script: str, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "main", "image": "python:3.11", "command": ["python3", "-c", script]}],
                **spec,
            },
        }
    )


def waits(marker: Path, *, on_term: Path | None = None) -> str:
    """A process that records its pid in ``marker`` and runs until killed (recording a SIGTERM in ``on_term``)."""
    term = (
        f"import signal, sys\ndef bye(*_):\n    open({str(on_term)!r}, 'w').write('term')\n    sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        if on_term
        else ""
    )
    record = f"open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')"
    return f"import os, time\n{term}{record}\nwhile True: time.sleep(0.2)"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pids(marker: Path) -> list[int]:
    return [int(line) for line in marker.read_text().split()] if marker.exists() else []


def test_each_node_registers_with_its_capacity_labels_taints_and_lease(kubectl: Kubectl) -> None:
    nodes = {n["metadata"]["name"]: n for n in kubectl.json("get", "nodes")["items"]}
    assert sorted(nodes) == ["n1", "n2", "n3"]
    assert nodes["n2"]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert nodes["n3"]["status"]["capacity"]["cpu"] == "4"
    assert nodes["n2"]["metadata"]["labels"]["topology.kubernetes.io/zone"] == "zone-b"
    assert nodes["n2"]["spec"]["taints"] == [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
    roles = [name for name, n in nodes.items() if "node-role.kubernetes.io/control-plane" in n["metadata"]["labels"]]
    assert roles == ["n1"]
    lease = kubectl.json("get", "lease", "-n", "kube-node-lease", "n2")
    assert lease["spec"]["holderIdentity"] == "n2" and lease["spec"]["leaseDurationSeconds"] == 4
    assert lease["metadata"]["ownerReferences"][0]["uid"] == nodes["n2"]["metadata"]["uid"]
    first = lease["spec"]["renewTime"]
    eventually(
        lambda: kubectl.json("get", "lease", "-n", "kube-node-lease", "n2")["spec"]["renewTime"] != first,
        timeout=WAIT,
        what="the node's lease renewed",
    )


def test_a_stopped_machine_kills_its_pods_and_a_started_one_takes_them_back(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pids"
    kubectl("apply", "-n", ns, "-f", "-", input=pinned_pod("steady", "n3", waits(marker)))
    (pid,) = eventually(lambda: pids(marker), timeout=WAIT, what="the pod's process started")
    kubectl("annotate", "node", "n3", "trainyard.dev/power=off")
    eventually(lambda: not alive(pid), timeout=WAIT, what="the stopped machine's process killed")
    lease = kubectl.json("get", "lease", "-n", "kube-node-lease", "n3")["spec"]["renewTime"]
    # Nothing reports for a dead machine: its pod still reads Running, its lease is not renewed.
    assert kubectl.json("get", "pod", "-n", ns, "steady")["status"]["phase"] == "Running"
    kubectl("annotate", "node", "n3", "trainyard.dev/power-")

    def restarted() -> bool:
        status = kubectl.json("get", "pod", "-n", ns, "steady")["status"]
        (container,) = status.get("containerStatuses") or [{}]
        return bool(container.get("restartCount") == 1 and "running" in (container.get("state") or {}))

    eventually(restarted, timeout=WAIT, what="the booted node restarted the pod's container")
    # Reported running once started; the process records itself a moment later.
    eventually(lambda: len(pids(marker)) == 2, timeout=WAIT, what="the restarted process")
    assert alive(pids(marker)[1])
    assert kubectl.json("get", "lease", "-n", "kube-node-lease", "n3")["spec"]["renewTime"] != lease


def test_a_reclaimed_spot_node_terminates_its_pods_gracefully_and_goes(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    marker, term = tmp_path / "pids", tmp_path / "term"
    kubectl("apply", "-n", ns, "-f", "-", input=pinned_pod("spot", "n2", waits(marker, on_term=term)))
    eventually(lambda: pids(marker), timeout=WAIT, what="the pod's process started")
    deadline = (datetime.now(UTC) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    kubectl("annotate", "node", "n2", f"trainyard.dev/preemption-notice={deadline}")

    def noticed() -> dict[str, Any] | None:
        node = kubectl.json("get", "node", "n2")
        conditions = {c["type"]: c for c in node["status"]["conditions"]}
        tainted = any(t["key"] == "trainyard.dev/spot-interruption" for t in node["spec"].get("taints") or [])
        return conditions.get("SpotInterruption") if tainted else None

    condition = eventually(noticed, timeout=WAIT, what="the spot notice on the node")
    assert condition["reason"] == "SpotInterruptionNotice" and deadline in condition["message"]

    def terminated() -> dict[str, Any] | None:
        status = kubectl.json("get", "pod", "-n", ns, "spot")["status"]
        return status if status["phase"] == "Failed" else None

    status = eventually(terminated, timeout=WAIT, what="the pod terminated by the node's shutdown")
    assert status["reason"] == "Terminated"
    assert status["message"] == "Pod was terminated in response to imminent node shutdown."
    target = {c["type"]: c for c in status["conditions"]}["DisruptionTarget"]
    assert target["reason"] == "TerminationByKubelet"
    assert term.read_text() == "term"  # it got SIGTERM, and time to act on it
    eventually(
        lambda: kubectl.run("get", "node", "n2").returncode != 0, timeout=WAIT, what="the reclaimed node removed"
    )
    events = kubectl("get", "events", "-n", "default", "--field-selector", "involvedObject.name=n2")
    assert "SpotInterruption" in events
