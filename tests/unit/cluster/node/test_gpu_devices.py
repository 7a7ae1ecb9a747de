"""GPU device assignment: requests, allocation over what other pods hold, rejection, environment."""

from __future__ import annotations

import json
from typing import Any

import pytest

from trainyard.cluster.clients.node import gpus


def container(name: str, gpu: Any = None, *, via: str = "limits") -> dict[str, Any]:
    c: dict[str, Any] = {"name": name}
    if gpu is not None:
        c["resources"] = {via: {"nvidia.com/gpu": gpu, "cpu": "1"}}
    return c


def pod(*containers: dict[str, Any], init: list[dict[str, Any]] | None = None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"uid": "u", **meta}, "spec": {"containers": list(containers), "initContainers": init or []}}


@pytest.mark.parametrize(
    ("c", "count"),
    [
        (container("a"), 0),
        (container("a", 2), 2),
        (container("a", "1"), 1),
        (container("a", "3", via="requests"), 3),
        (container("a", "0.5"), 0),
        (container("a", "lots"), 0),
    ],
)
def test_requested(c: dict[str, Any], count: int) -> None:
    assert gpus.requested(c) == count


def test_init_containers_reuse_the_pods_devices() -> None:
    p = pod(container("a", 1), container("b", 2), init=[container("i", 2)])
    assert gpus.pod_need(p) == 3
    assert gpus.allocate(4, p, {0}) == {"a": [1], "b": [2, 3], "i": [1, 2]}
    assert gpus.pod_need(pod(container("a", 1), init=[container("i", 3)])) == 3


def test_devices_held_by_live_pods_on_the_node() -> None:
    def holder(uid: str, devices: dict[str, list[int]], phase: str = "Running") -> dict[str, Any]:
        annotations = {gpus.ANNOTATION: json.dumps(devices)}
        return {"metadata": {"uid": uid, "annotations": annotations}, "status": {"phase": phase}}

    pods = [
        holder("a", {"x": [0], "y": [1]}),
        holder("b", {"x": [2]}, phase="Succeeded"),
        holder("c", {"x": [3]}),
        {"metadata": {"uid": "d", "annotations": {gpus.ANNOTATION: "not json"}}},
    ]
    assert gpus.in_use(pods) == {0, 1, 3}
    assert gpus.in_use(pods, except_uid="c") == {0, 1}
    assert gpus.recorded(pods[0]) == {"x": [0], "y": [1]} and gpus.recorded(pods[3]) is None


def test_a_pod_that_does_not_fit_is_rejected_like_the_kubelet_does() -> None:
    rejected = gpus.allocate(2, pod(container("a", 2)), {1})
    assert isinstance(rejected, gpus.Rejected)
    assert rejected.reason == "OutOfnvidia.com/gpu"
    assert rejected.message == (
        "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 2, used: 1, capacity: 2"
    )
    assert isinstance(gpus.allocate(0, pod(container("a", 1)), set()), gpus.Rejected)


def test_environment_hides_or_gives_devices() -> None:
    assert gpus.environment(None, 2) == {"CUDA_VISIBLE_DEVICES": ""}
    assert gpus.environment(None, 0) == {}, "a node without GPUs has nothing to hide"
    assert gpus.environment([1, 3], 4) == {
        "CUDA_VISIBLE_DEVICES": "1,3",
        "NVIDIA_VISIBLE_DEVICES": "1,3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }


def test_count_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(gpus.ENV, raising=False)
    assert gpus.from_env() == 0
    monkeypatch.setenv(gpus.ENV, "4")
    assert gpus.from_env() == 4
    monkeypatch.setenv(gpus.ENV, "-1")
    with pytest.raises(ValueError, match="whole number of GPUs"):
        gpus.from_env()
