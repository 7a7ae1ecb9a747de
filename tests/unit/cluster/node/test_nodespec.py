"""The nodes `yard up` runs: --nodes N alike, or a nodes file, validated with field paths."""

from __future__ import annotations

import pytest

from trainyard.cluster.clients.node import nodespec
from trainyard.cluster.clients.node.capacity import Capacity
from trainyard.cluster.quantity import GPU

BASE = Capacity(cpu=2000, memory=8 * 2**30, gpus=0)


def test_one_node_keeps_the_given_or_host_name() -> None:
    (only,) = nodespec.alike(1, None, "myhost", None, [])
    assert (only.name, only.control_plane) == ("myhost", True)


def test_n_nodes_are_numbered_and_only_the_first_is_the_control_plane() -> None:
    specs = nodespec.alike(3, None, "myhost", BASE, [{"key": "a", "effect": "NoSchedule"}])
    assert [s.name for s in specs] == ["node-1", "node-2", "node-3"]
    assert [s.control_plane for s in specs] == [True, False, False]
    assert all(s.capacity == BASE and s.taints == ({"key": "a", "effect": "NoSchedule"},) for s in specs)
    assert [s.name for s in nodespec.alike(2, "gpu", "myhost", None, [])] == ["gpu-1", "gpu-2"]


def test_a_node_count_out_of_range_is_refused() -> None:
    with pytest.raises(nodespec.NodesError, match="--nodes is invalid: Invalid value: 0"):
        nodespec.alike(0, None, "h", None, [])


def test_a_nodes_file_declares_capacity_labels_and_taints() -> None:
    document = {
        "nodes": [
            {
                "name": "gpu-a",
                "capacity": {"cpu": "64", "memory": "256Gi", GPU: 4},
                "labels": {"topology.kubernetes.io/zone": "zone-a", "nvidia.com/gpu.product": "A100-SXM4-80GB"},
                "taints": ["nvidia.com/gpu:NoSchedule", {"key": "spot", "value": "true", "effect": "NoExecute"}],
            },
            {"name": "cpu-b"},
        ]
    }
    first, second = nodespec.parse(document, BASE)
    assert first.capacity is not None
    assert (first.capacity.cpu, first.capacity.memory, first.capacity.gpus) == (64000, 256 * 2**30, 4)
    assert first.capacity.declared == {"cpu", "memory", GPU}
    assert first.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert first.taints == (
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
        {"key": "spot", "value": "true", "effect": "NoExecute"},
    )
    assert (first.control_plane, second.control_plane) == (True, False)
    assert second.capacity is None  # detected, as a single node's


def test_every_invalid_field_is_named_with_its_path() -> None:
    document = {
        "nodes": [
            {"name": "Bad_Name", "capacity": {"cpu": "lots", "disk": "1"}, "labels": {"a b": "x"}},
            {"name": "ok", "taints": ["nokey"], "extra": 1},
            {"name": "ok"},
        ]
    }
    with pytest.raises(nodespec.NodesError) as raised:
        nodespec.parse(document, BASE, "nodes.yaml")
    causes = raised.value.causes
    assert any(c.startswith('nodes[0].name: Invalid value: "Bad_Name"') for c in causes)
    assert any(c.startswith("nodes[0].capacity.disk: Unsupported value") for c in causes)
    assert 'nodes[0].capacity.cpu: Invalid value: "lots": must be a positive quantity such as 4 or 500m' in causes
    assert any(c.startswith("nodes[0].labels.a b: Invalid value") for c in causes)
    assert any(c.startswith("nodes[1].taints[0]: Invalid value") for c in causes)
    assert any(c.startswith("nodes[1].extra: Unsupported value") for c in causes)
    assert 'nodes[2].name: Duplicate value: "ok"' in causes
    assert str(raised.value).startswith("nodes.yaml is invalid: ")


def test_a_file_without_nodes_says_what_it_needs() -> None:
    with pytest.raises(nodespec.NodesError, match="nodes: Required value"):
        nodespec.parse({"node": []}, BASE)
