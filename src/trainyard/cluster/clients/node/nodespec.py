"""Which nodes the plane runs: ``yard up --nodes N`` or a nodes file, as a tuple of ``NodeSpec``.

A plane has one node unless told otherwise, named after this machine (``--node-name``). With
``--nodes N`` (N > 1) it has N alike, ``node-1`` … ``node-N`` (``<node-name>-1`` … when a name is
given), each offering the capacity ``yard up`` detects or declares. A nodes file describes each
node instead (YAML)::

    nodes:
      - name: gpu-a
        capacity: {cpu: "64", memory: 256Gi, nvidia.com/gpu: 4, pods: 110}
        labels: {topology.kubernetes.io/zone: zone-a, node-type: gpu-large}
        taints: ["nvidia.com/gpu:NoSchedule"]        # or {key: ..., value: ..., effect: ...}

A capacity it leaves out is detected, as for a single node. The first node carries the
control-plane role label (the plane runs beside it); every node its own ``kubernetes.io/hostname``.
Bad input is reported with each field's path, as the API server reports an invalid object.

Pure: parsing and validation only; ``capacity.detect`` is passed in as the base.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node import capacity as node_capacity
from trainyard.cluster.clients.node import nodestatus
from trainyard.cluster.quantity import CPU, GPU, MEMORY, PODS, amount

# RFC 1123 subdomain: what a Node's name must be.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
CAPACITY_KEYS = (CPU, MEMORY, GPU, PODS)
NODE_KEYS = ("name", "capacity", "labels", "taints")
MAX_NODES = 64


@dataclass(frozen=True)
class NodeSpec:
    """One node of the plane: its name, capacity (None: detected), extra labels and taints."""

    name: str
    capacity: node_capacity.Capacity | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Obj, ...] = ()
    control_plane: bool = True


class NodesError(ValueError):
    """What is wrong with the nodes asked for: one line per invalid field, with its path."""

    def __init__(self, source: str, causes: Sequence[str]) -> None:
        self.causes = list(causes)
        super().__init__(f"{source} is invalid: " + "; ".join(self.causes))


def alike(
    count: int, base: str | None, default_name: str, capacity: node_capacity.Capacity | None, taints: Sequence[Obj]
) -> tuple[NodeSpec, ...]:
    """``--nodes count``: one node named ``base or default_name``, or ``count`` numbered ones."""
    if not 1 <= count <= MAX_NODES:
        raise NodesError("--nodes", [f"Invalid value: {count}: must be between 1 and {MAX_NODES}"])
    if count == 1:
        return (NodeSpec(base or default_name, capacity, {}, tuple(taints)),)
    prefix = base or "node"
    return tuple(
        NodeSpec(f"{prefix}-{i}", capacity, {}, tuple(taints), control_plane=i == 1) for i in range(1, count + 1)
    )


def parse(document: Any, base: node_capacity.Capacity, source: str = "nodes file") -> tuple[NodeSpec, ...]:
    """The nodes a nodes file describes; ``NodesError`` lists every invalid field with its path."""
    causes: list[str] = []
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise NodesError(source, ["nodes: Required value: a list of nodes (see `yard up --help`)"])
    unknown = sorted(set(document) - {"nodes"})
    if unknown:
        causes.append(f"{unknown[0]}: Unsupported value: only 'nodes' is read")
    items = document["nodes"]
    if not items:
        causes.append("nodes: Required value: at least one node")
    if len(items) > MAX_NODES:
        causes.append(f"nodes: Too many: {len(items)}: must have at most {MAX_NODES} items")
    out: list[NodeSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        spec = _node(f"nodes[{i}]", item, base, causes)
        if spec is None:
            continue
        if spec.name in seen:
            causes.append(f'nodes[{i}].name: Duplicate value: "{spec.name}"')
        seen.add(spec.name)
        out.append(NodeSpec(spec.name, spec.capacity, spec.labels, spec.taints, control_plane=not out))
    if causes:
        raise NodesError(source, causes)
    return tuple(out)


def _node(path: str, item: Any, base: node_capacity.Capacity, causes: list[str]) -> NodeSpec | None:
    if not isinstance(item, dict):
        causes.append(f"{path}: Invalid value: must be a mapping with a name")
        return None
    for key in sorted(set(item) - set(NODE_KEYS)):
        causes.append(f"{path}.{key}: Unsupported value: one of {', '.join(NODE_KEYS)}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        causes.append(f"{path}.name: Required value")
        return None
    if len(name) > 253 or not _SUBDOMAIN.match(name):
        causes.append(
            f'{path}.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
            "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    labels = _labels(f"{path}.labels", item.get("labels"), causes)
    taints = _taints(f"{path}.taints", item.get("taints"), causes)
    declared = _capacity(f"{path}.capacity", item.get("capacity"), base, causes)
    return NodeSpec(name, declared, labels, taints)


def _labels(path: str, value: Any, causes: list[str]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        causes.append(f"{path}: Invalid value: must be a mapping of label keys to values")
        return {}
    out = {}
    for key, text in value.items():
        text = "" if text is None else str(text)
        problem = nodestatus.label_problem(str(key), text)
        if problem:
            causes.append(f"{path}.{key}: Invalid value: {problem}")
        else:
            out[str(key)] = text
    return out


def _taints(path: str, value: Any, causes: list[str]) -> tuple[Obj, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        causes.append(f"{path}: Invalid value: must be a list of taints (key[=value]:Effect or key/value/effect)")
        return ()
    out = []
    for i, taint in enumerate(value):
        if isinstance(taint, dict):
            key, val, effect = taint.get("key"), taint.get("value"), taint.get("effect")
            taint = f"{key or ''}{'=' + str(val) if val not in (None, '') else ''}:{effect or ''}"
        try:
            out.append(nodestatus.parse_taint(str(taint)))
        except ValueError as exc:
            causes.append(f"{path}[{i}]: Invalid value: {exc}")
    return tuple(out)


def _capacity(path: str, value: Any, base: node_capacity.Capacity, causes: list[str]) -> node_capacity.Capacity | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        causes.append(f"{path}: Invalid value: must be a mapping of resources to quantities")
        return None
    for key in sorted(set(value) - set(CAPACITY_KEYS)):
        causes.append(f"{path}.{key}: Unsupported value: one of {', '.join(CAPACITY_KEYS)}")
    try:
        gpus = None if value.get(GPU) is None else int(value[GPU])
        pods = None if value.get(PODS) is None else int(value[PODS])
    except (TypeError, ValueError):
        causes.append(f"{path}: Invalid value: {GPU} and {PODS} must be whole numbers")
        return None
    cpu, memory = value.get(CPU), value.get(MEMORY)
    for key, text, example in ((CPU, cpu, "4 or 500m"), (MEMORY, memory, "64Gi")):
        if text is None:
            continue
        try:
            positive = amount(key, str(text)) > 0
        except ValueError:
            positive = False
        if not positive:
            causes.append(f'{path}.{key}: Invalid value: "{text}": must be a positive quantity such as {example}')
            return None
    try:
        return node_capacity.declare(
            base,
            cpus=None if cpu is None else str(cpu),
            memory=None if memory is None else str(memory),
            gpus=gpus,
            pods=pods,
        )
    except ValueError as exc:
        causes.append(f"{path}: Invalid value: {exc}")
        return None
