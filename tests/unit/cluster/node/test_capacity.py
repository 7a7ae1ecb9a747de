"""Node capacity (detected or declared), quantities, and the Node object's shape."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainyard.cluster.clients.node import capacity, nodestatus
from trainyard.cluster.clients.node.capacity import Capacity, Pressure
from trainyard.cluster.quantity import amount, format_amount

BASE = Capacity(cpu=2000, memory=8 * 2**30, gpus=0)


@pytest.mark.parametrize(
    ("resource", "text", "value", "shown"),
    [
        ("cpu", "4", 4000, "4"),
        ("cpu", "1500m", 1500, "1500m"),
        ("cpu", "0.1", 100, "100m"),
        ("memory", "64Gi", 64 * 2**30, "64Gi"),
        ("memory", "1G", 10**9, "1000000000"),
        ("memory", "24682416Ki", 24682416 * 1024, "24682416Ki"),
        ("memory", "1000", 1000, "1000"),
        ("nvidia.com/gpu", "2", 2, "2"),
    ],
)
def test_amounts_and_their_display(resource: str, text: str, value: int, shown: str) -> None:
    assert amount(resource, text) == value
    assert format_amount(resource, value) == shown


def test_declared_capacity_replaces_what_was_detected() -> None:
    declared = capacity.declare(BASE, cpus="8", memory="64Gi", gpus=4)
    assert declared.resources() == {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4", "pods": "110"}
    assert declared.declared == frozenset({"cpu", "memory", "nvidia.com/gpu"})
    assert capacity.declare(BASE, pods=500).resources()["pods"] == "500"


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"cpus": "many"}, "--cpus 'many' is not a quantity"),
        ({"cpus": "0"}, "--cpus must be more than 0"),
        ({"memory": "-1Gi"}, "--memory must be more than 0"),
        ({"gpus": -1}, "--gpus must be 0 or more"),
        ({"pods": 0}, "--max-pods must be at least 1"),
    ],
)
def test_bad_declarations_say_which_flag(kw: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        capacity.declare(BASE, **kw)


def test_gpus_are_counted_from_nvidia_smi(tmp_path: Path) -> None:
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H100 (UUID: GPU-1)'\necho 'GPU 1: NVIDIA H100 (UUID: GPU-2)'\n")
    fake.chmod(0o755)
    assert capacity.count_gpus(str(fake)) == 2
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    broken.chmod(0o755)
    assert capacity.count_gpus(str(broken)) == 0
    assert capacity.count_gpus(str(tmp_path / "absent")) == 0


def test_detect_reads_this_machine() -> None:
    found = capacity.detect(Path.cwd())
    assert found.cpu >= 1000 and found.memory > 0 and found.pods == 110 and not found.simulated
    assert found.resources()["ephemeral-storage"] == format_amount("memory", found.ephemeral_storage)


@pytest.mark.parametrize(
    ("text", "taint"),
    [
        ("dedicated=ml:NoSchedule", {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}),
        ("example.com/gpu:NoExecute", {"key": "example.com/gpu", "effect": "NoExecute"}),
    ],
)
def test_taints_as_kubectl_writes_them(text: str, taint: dict) -> None:
    assert nodestatus.parse_taint(text) == taint


@pytest.mark.parametrize("text", ["dedicated", "dedicated=ml:Sometimes", "bad key:NoSchedule", ":NoSchedule"])
def test_bad_taints(text: str) -> None:
    with pytest.raises(ValueError, match="taint"):
        nodestatus.parse_taint(text)


def test_node_manifest_labels_and_declared_annotation() -> None:
    node = nodestatus.manifest("box", machine="x86_64", capacity=capacity.declare(BASE, gpus=2), taints=[])
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "box" and labels["kubernetes.io/arch"] == "amd64"
    assert "node-role.kubernetes.io/control-plane" in labels
    assert node["metadata"]["annotations"] == {nodestatus.DECLARED_ANNOTATION: "nvidia.com/gpu"}


def test_conditions_keep_their_transition_time_until_they_change() -> None:
    first = nodestatus.conditions([], Pressure(), "t1")
    assert [c["type"] for c in first] == ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    again = nodestatus.conditions(first, Pressure(), "t2")
    assert all(c["lastHeartbeatTime"] == "t2" and c["lastTransitionTime"] == "t1" for c in again)
    pressed = nodestatus.conditions(again, Pressure(memory=True), "t3")
    memory = pressed[0]
    assert (memory["status"], memory["reason"], memory["lastTransitionTime"]) == (
        "True",
        "KubeletHasInsufficientMemory",
        "t3",
    )


def test_conditions_others_set_survive_the_heartbeat() -> None:
    notice = {"type": "SpotInterruption", "status": "True", "reason": "SpotInterruptionNotice"}
    written = nodestatus.conditions([*nodestatus.conditions([], Pressure(), "t1"), notice], Pressure(), "t2")
    kubelet = ["MemoryPressure", "DiskPressure", "PIDPressure", "Ready"]
    assert [c["type"] for c in written] == [*kubelet, "SpotInterruption"]
    assert written[-1] == notice


def test_only_the_control_plane_node_carries_its_role_and_a_file_adds_labels() -> None:
    capacity = Capacity(cpu=1000, memory=2**30, gpus=0)
    node = nodestatus.manifest(
        "node-2",
        machine="x86_64",
        capacity=capacity,
        taints=[],
        extra_labels={"topology.kubernetes.io/zone": "zone-b"},
        control_plane=False,
    )
    labels = node["metadata"]["labels"]
    assert "node-role.kubernetes.io/control-plane" not in labels
    assert (labels["kubernetes.io/hostname"], labels["topology.kubernetes.io/zone"]) == ("node-2", "zone-b")
