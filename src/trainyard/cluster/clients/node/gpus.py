"""``nvidia.com/gpu`` on the local node: which GPUs each container sees, as the NVIDIA device plugin decides.

A container asks for whole GPUs with ``resources.limits["nvidia.com/gpu"]`` (``requests`` alone is
read too; Kubernetes requires the two to be equal). Its process gets distinct device indices in
``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES`` (with ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so
CUDA numbers devices as ``nvidia-smi`` does). A container that asks for none gets
``CUDA_VISIBLE_DEVICES`` set to the empty string, so CUDA finds no device, as under the NVIDIA
container runtime where such a container is given none.

Allocation is recorded on the pod itself (annotation ``trainyard.dev/gpu-devices``, container name
→ indices) before any of its containers starts, so it survives node-agent restarts and is visible
with ``kubectl get pod -o yaml``. The GPUs in use are those recorded on the non-terminal pods bound
to this node: a pod that finishes or is deleted releases its devices. Init containers reuse the
pod's devices, as the kubelet's device manager lets them, so a pod needs
``max(largest init request, sum of main requests)`` GPUs. A pod that cannot get them is rejected
like the kubelet's admission does: phase Failed, reason ``OutOfnvidia.com/gpu``. Pure: the node
agent lists the pods and writes the annotation.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from trainyard.api.meta import Obj
from trainyard.api.quantity import parse_quantity

RESOURCE = "nvidia.com/gpu"
ANNOTATION = "trainyard.dev/gpu-devices"
# How many GPUs the node offers when nothing else says so (tests simulate a count here).
ENV = "TRAINYARD_GPUS"
TERMINAL = ("Succeeded", "Failed")


def from_env() -> int:
    raw = os.environ.get(ENV, "").strip()
    if not raw:
        return 0
    if not raw.isdigit():
        raise ValueError(f"${ENV} must be a whole number of GPUs, not {raw!r}")
    return int(raw)


def requested(container: Obj) -> int:
    """The whole GPUs a container asks for (limits, else requests); 0 for none or a malformed quantity."""
    resources = container.get("resources") or {}
    for table in (resources.get("limits") or {}, resources.get("requests") or {}):
        if RESOURCE in table:
            try:
                value = parse_quantity(str(table[RESOURCE]))
            except ValueError:
                return 0
            return int(value) if value > 0 and value == int(value) else 0
    return 0


def pod_need(pod: Obj) -> int:
    spec = pod.get("spec") or {}
    init = max((requested(c) for c in spec.get("initContainers") or []), default=0)
    return max(init, sum(requested(c) for c in spec.get("containers") or []))


def recorded(pod: Obj) -> dict[str, list[int]] | None:
    """The devices written on the pod by this node, or None when it has none recorded."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    return {
        str(k): [i for i in v if isinstance(i, int) and not isinstance(i, bool)]
        for k, v in value.items()
        if isinstance(v, list)
    }


def in_use(pods: list[Obj], *, except_uid: str = "") -> set[int]:
    """Device indices held by the non-terminal pods among ``pods`` (those bound to this node)."""
    held: set[int] = set()
    for pod in pods:
        if (pod.get("metadata") or {}).get("uid") == except_uid:
            continue
        if (pod.get("status") or {}).get("phase") in TERMINAL:
            continue
        for indices in (recorded(pod) or {}).values():
            held.update(indices)
    return held


@dataclass(frozen=True)
class Rejected:
    """The kubelet's admission failure for a pod whose GPUs do not fit."""

    requested: int
    used: int
    capacity: int

    reason = f"OutOf{RESOURCE}"

    @property
    def event(self) -> str:
        return (
            f"Node didn't have enough resource: {RESOURCE}, requested: {self.requested}, used: {self.used}, "
            f"capacity: {self.capacity}"
        )

    @property
    def message(self) -> str:
        return f"Pod was rejected: {self.event}"


def allocate(capacity: int, pod: Obj, held: set[int]) -> dict[str, list[int]] | Rejected:
    """Devices for each container that asks for GPUs: the lowest free indices, distinct per main container."""
    need = pod_need(pod)
    free = [i for i in range(capacity) if i not in held]
    if need > len(free):
        return Rejected(need, len([i for i in held if i < capacity]), capacity)
    spec = pod.get("spec") or {}
    pool = free[:need]
    out: dict[str, list[int]] = {}
    start = 0
    for container in spec.get("containers") or []:
        if n := requested(container):
            out[container["name"]] = pool[start : start + n]
            start += n
    for container in spec.get("initContainers") or []:
        if n := requested(container):
            out[container["name"]] = pool[:n]
    return out


def environment(devices: list[int] | None, node_gpus: int) -> dict[str, str]:
    """The variables that give a container exactly ``devices`` (none: CUDA sees none of the node's).

    On a node without GPUs nothing is set, as a container on such a node sees nothing: an empty
    ``CUDA_VISIBLE_DEVICES`` is not neutral (PaddlePaddle's launcher takes its presence for GPU mode).
    """
    if not devices:
        return {"CUDA_VISIBLE_DEVICES": ""} if node_gpus else {}
    visible = ",".join(str(i) for i in devices)
    return {"CUDA_VISIBLE_DEVICES": visible, "NVIDIA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
