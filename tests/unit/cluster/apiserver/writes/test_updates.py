"""Update ownership by comparison agrees with the whole-object rule, write after write.

``updates.track_update`` walks only where old and new differ and leaves the entries it does not
touch undecoded; ``fieldmanager.track_update`` walks both objects whole. Chains of random edits
(values, keys, list items, kinds of value), by several managers through the main resource and
status, must give the same ``managedFields`` from either.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from trainyard.cluster.server.apiserver.writes import fieldmanager as fm
from trainyard.cluster.server.apiserver.writes import listshapes, updates

T = "2026-01-01T00:0{}:00Z"
POD = listshapes.builtin_shape("Pod")
SPEC_LISTS = {
    "ports": {"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
    "tags": {"x-kubernetes-list-type": "set", "items": {"type": "string"}},
    "args": {"items": {"type": "string"}},  # atomic
}
JOB_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {"type": "object", "properties": {k: {"type": "array", **v} for k, v in SPEC_LISTS.items()}},
        "status": {"type": "object"},
    },
}


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"app": "web", "role": "master"}},
        "spec": {
            "nodeName": "",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "command": ["true"],
                    "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                    "ports": [{"containerPort": 23456, "protocol": "TCP", "name": "pytorchjob-port"}],
                }
            ],
            "tolerations": [{"key": "k", "operator": "Exists"}],
        },
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "c", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}],
        },
    }


def job() -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "annotations": {"a": "1"}},
        "spec": {"ports": [{"name": "x", "port": 1}], "tags": ["t1", "t2"], "args": ["a"], "replicas": {"Master": 1}},
        "status": {"conditions": [{"type": "Created", "status": "True"}], "replicaStatuses": {"Master": {}}},
    }


LEAVES = ["x", "y", "", 0, 7, 2.5, True, False, None]


def _edit(value: Any, rng: random.Random, depth: int = 0) -> Any:
    """``value`` with one random change somewhere below it."""
    if isinstance(value, dict) and value and (depth < 4 or rng.random() < 0.5):
        key = rng.choice(sorted(value))
        roll = rng.random()
        out = dict(value)
        if roll < 0.1:
            del out[key]
        elif roll < 0.2:
            out[rng.choice(["name", "extra", "value", "z"])] = rng.choice([*LEAVES, {}, {"q": 1}, ["s"]])
        else:
            out[key] = _edit(value[key], rng, depth + 1)
        return out
    if isinstance(value, list) and value and rng.random() < 0.8:
        out = list(value)
        i = rng.randrange(len(out))
        roll = rng.random()
        if roll < 0.15:
            del out[i]
        elif roll < 0.3:
            item = copy.deepcopy(out[i])
            if isinstance(item, dict):
                item["name"] = rng.choice(["n1", "n2", "A", "x", "c"])
            out.append(item)  # sometimes two items under one key: the ambiguous case
        elif roll < 0.4:
            out.insert(i, rng.choice(["t3", "t1", {"name": "q", "value": "v"}, {"port": 9}]))
        elif roll < 0.5:
            out[i] = rng.choice(["s", 3, {"value": "v"}, {}])  # an item without its key, or not a map
        else:
            out[i] = _edit(out[i], rng, depth + 1)
        return out
    return rng.choice([*LEAVES, {}, {"k": "v"}, ["l"], [{"name": "n"}]])


WRITERS = [("operator", None), ("node", "status"), ("kubectl", None), ("operator", "status"), ("scheduler", None)]


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("kind", ["pod", "job"])
def test_comparison_agrees_with_the_whole_object_rule(kind: str, seed: int) -> None:
    rng = random.Random(seed)
    shape = POD if kind == "pod" else listshapes.SchemaShape(JOB_SCHEMA, root=True)
    obj = pod() if kind == "pod" else job()
    first = fm.Write(manager="creator", api_version="v1", now=T.format(0))
    managed = fm.track_update(None, obj, shape, first)
    assert updates.track_update(None, obj, shape, first) == managed
    obj["metadata"]["managedFields"] = managed
    for step in range(60):
        manager, subresource = rng.choice(WRITERS)
        write = fm.Write(manager=manager, api_version="v1", now=T.format(step % 10), subresource=subresource)
        new = copy.deepcopy(obj)
        for _ in range(rng.randint(0, 3)):
            part = "status" if subresource == "status" or rng.random() < 0.2 else rng.choice(["spec", "metadata"])
            new[part] = _edit(new.get(part, {}), rng)
        whole = fm.track_update(copy.deepcopy(obj), copy.deepcopy(new), shape, write)
        compared = updates.track_update(copy.deepcopy(obj), copy.deepcopy(new), shape, write)
        assert compared == whole, f"step {step}: {manager}/{subresource}"
        new["metadata"]["managedFields"] = whole
        obj = new


def test_an_entry_no_change_reaches_is_kept_as_stored() -> None:
    obj = pod()
    obj["metadata"]["managedFields"] = fm.track_update(None, obj, POD, fm.Write("creator", "v1", T.format(0)))
    new = copy.deepcopy(obj)
    new["status"]["phase"] = "Running"
    managed = updates.track_update(obj, new, POD, fm.Write("node", "v1", T.format(1), subresource="status"))
    assert managed[0]["fieldsV1"] is obj["metadata"]["managedFields"][0]["fieldsV1"]
    assert managed[1]["fieldsV1"] == {"f:status": {"f:phase": {}}}
    assert managed[1]["time"] == T.format(1)


def test_a_list_item_that_stops_being_a_map_takes_its_fields_from_their_owner() -> None:
    shape = listshapes.SchemaShape(JOB_SCHEMA, root=True)
    obj = {"metadata": {"name": "j"}, "spec": {"ports": [{"port": 1}]}}
    obj["metadata"]["managedFields"] = fm.track_update(None, obj, shape, fm.Write("one", "v1", T.format(0)))
    new = {"metadata": dict(obj["metadata"]), "spec": {"ports": ["no longer a map"]}}
    write = fm.Write("two", "v1", T.format(1))
    compared = updates.track_update(obj, new, shape, write)
    assert compared == fm.track_update(obj, new, shape, write)
    assert compared[0]["fieldsV1"] == {"f:spec": {"f:ports": {"i:0": {}}}}
