"""Tables from encoded objects (``table_encoded``) against the generic ``table``, row for row.

kubectl's ``get`` is served from the encoded objects without decoding them whole (a pod into the
fields its columns read, a custom resource as far as its printer columns read); whatever shape
an object has, the answer must be the Table the generic column functions compute.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from trainyard.api.crd import crd_for
from trainyard.api.kinds import KINDS
from trainyard.cluster.server.apiserver import tables
from trainyard.cluster.server.apiserver.builtin import pods as pod_printing
from trainyard.cluster.server.apiserver.registry import Registry, ResourceType
from trainyard.cluster.server.storage import codec

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def pod(name: str, *, spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None, **meta: Any) -> Any:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-03-01T11:00:00Z", **meta},
        "spec": {"containers": [{"name": "c", "image": "x"}], **(spec or {})},
    }
    if status is not None:
        body["status"] = status
    return body


def running(ready: bool, restarts: int) -> dict[str, Any]:
    return {"name": "c", "ready": ready, "restartCount": restarts, "state": {"running": {}}}


def init_state(kind: str, state: dict[str, Any]) -> dict[str, Any]:
    return {"name": "i", "ready": False, "restartCount": 0, "state": {kind: state}}


PODS = [
    pod("pending", status={"phase": "Pending"}),
    pod("no-status"),
    pod("no-metadata-times", creationTimestamp=None),
    pod(
        "running",
        spec={"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        status={
            "phase": "Running",
            "podIP": "10.0.0.1",
            "containerStatuses": [running(True, 2), running(False, 1)],
        },
    ),
    pod(
        "waiting",
        status={"phase": "Pending", "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "Pull"}}}]},
    ),
    pod(
        "failed",
        status={"phase": "Failed", "containerStatuses": [{"name": "c", "state": {"terminated": {"exitCode": 3}}}]},
    ),
    pod(
        "completed",
        status={
            "phase": "Succeeded",
            "containerStatuses": [{"name": "c", "state": {"terminated": {"reason": "Completed", "exitCode": 0}}}],
        },
    ),
    pod(
        "crash-looping",
        status={
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "c",
                    "restartCount": 3,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-03-01T11:59:25Z"}},
                }
            ],
        },
    ),
    pod("evicted", status={"phase": "Failed", "reason": "Evicted", "nominatedNodeName": "n2"}),
    pod("terminating", deletionTimestamp="2026-03-01T11:59:00Z", status={"phase": "Running"}),
    pod(
        "gated",
        spec={"readinessGates": [{"conditionType": "a"}, {"conditionType": "b"}]},
        status={"conditions": [{"type": "a", "status": "True"}, {"type": "b", "status": "False"}]},
    ),
    pod(
        "init-first",
        spec={"initContainers": [{"name": "i1"}, {"name": "i2"}]},
        status={
            "phase": "Pending",
            "conditions": [{"type": "Initialized", "status": "False"}],
            "initContainerStatuses": [init_state("running", {}), init_state("waiting", {"reason": "PodInitializing"})],
            "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "PodInitializing"}}}],
        },
    ),
    pod(
        "init-second",
        spec={"initContainers": [{"name": "i1"}, {"name": "i2"}]},
        status={
            "phase": "Pending",
            "initContainerStatuses": [init_state("terminated", {"exitCode": 0}), init_state("running", {})],
        },
    ),
    pod(
        "init-failed",
        spec={"initContainers": [{"name": "i1"}]},
        status={
            "phase": "Failed",
            "initContainerStatuses": [init_state("terminated", {"exitCode": 2, "reason": "Error"})],
        },
    ),
    pod(
        "init-signal",
        spec={"initContainers": [{"name": "i1"}]},
        status={
            "phase": "Pending",
            "initContainerStatuses": [init_state("terminated", {"exitCode": 137, "signal": 9})],
        },
    ),
    pod(
        "init-crash-looping",
        spec={"initContainers": [{"name": "i1"}]},
        status={
            "phase": "Pending",
            "initContainerStatuses": [
                {
                    "name": "i1",
                    "restartCount": 4,
                    "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                    "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-03-01T11:59:50Z"}},
                }
            ],
            "containerStatuses": [
                {"name": "c", "restartCount": 0, "state": {"waiting": {"reason": "PodInitializing"}}}
            ],
        },
    ),
    pod(
        "initialized",
        spec={"initContainers": [{"name": "i1"}]},
        status={
            "phase": "Pending",
            "conditions": [{"type": "Initialized", "status": "True"}],
            "initContainerStatuses": [init_state("terminated", {"exitCode": 0, "reason": "Completed"})],
            "containerStatuses": [{"name": "c", "state": {"waiting": {"reason": "PodInitializing"}}}],
        },
    ),
    pod(
        "one-done-one-running",
        spec={"containers": [{"name": "a"}, {"name": "b"}]},
        status={
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "False"}],
            "containerStatuses": [
                {"name": "a", "ready": True, "state": {"running": {}}},
                {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
            ],
        },
    ),
    pod(
        "gated-scheduling",
        status={"phase": "Pending", "conditions": [{"type": "PodScheduled", "reason": "SchedulingGated"}]},
    ),
    pod("deleted-after-success", deletionTimestamp="2026-03-01T11:59:00Z", status={"phase": "Succeeded"}),
    # Fields of unexpected types: the fast path must fall back, not fail or differ.
    pod("odd", status={"containerStatuses": [{"name": "c", "ready": "yes", "restartCount": "4"}]}),
    pod("labelled", labels={"app": "x"}, annotations={"a": "b"}, ownerReferences=[{"uid": "u", "name": "o"}]),
]


@pytest.fixture
def pods() -> ResourceType:
    rt = Registry().lookup("", "v1", "pods")
    assert rt is not None
    return rt


@pytest.mark.parametrize("include", ["Metadata", "Object", "None"])
def test_the_pod_fast_path_equals_the_generic_table(pods: ResourceType, include: str) -> None:
    list_meta = {"resourceVersion": "42", "continue": "token"}
    generic = tables.table(pods, PODS, now=NOW, resource_version="42", include_object=include)
    generic["metadata"] = list_meta
    encoded = [codec.dumps(p) for p in PODS]
    fast = tables.table_encoded(pods, encoded, now=NOW, list_meta=list_meta, include_object=include)
    assert json.loads(fast) == json.loads(json.dumps(generic))


def test_well_formed_pods_take_the_fast_path_and_odd_ones_fall_back() -> None:
    decodable = []
    for p in PODS:
        try:
            pod_printing.decoder.decode(codec.dumps(p))
            decodable.append(p["metadata"]["name"])
        except msgspec.ValidationError:
            pass
    assert decodable == [p["metadata"]["name"] for p in PODS if p["metadata"]["name"] != "odd"]


def pytorchjobs(columns: tuple[dict[str, Any], ...] | None = None) -> ResourceType:
    registry = Registry()
    registry.add_crd(crd_for(KINDS["PyTorchJob"]))
    rt = registry.lookup("kubeflow.org", "v1", "pytorchjobs")
    assert rt is not None
    return rt if columns is None else dataclasses.replace(rt, printer_columns=columns)


def job(name: str, status: Any = None, **meta: Any) -> dict[str, Any]:
    managed = [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "creationTimestamp": "2026-03-01T11:58:00Z", "managedFields": managed, **meta},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}},
    }
    if status is not None:
        body["status"] = status
    return body


JOBS = [
    job("new"),
    job("running", {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}),
    job(
        "training",
        {
            "conditions": [{"type": "Running", "status": "True"}],
            "trainingProgress": {"progress": "40%", "currentEpoch": 4, "metrics": {"loss": 0.25, "accuracy": 0.9}},
        },
    ),
    job("labelled", {"conditions": []}, labels={"team": "a"}, annotations={"note": "x"}),
    job("no-time", {"conditions": [{"type": "Succeeded", "status": "True"}]}, creationTimestamp=None),
    # Shapes a cell reads leniently or the partial decode cannot take: the answer must not differ.
    job("odd-status", "not an object"),
    job("odd-conditions", {"conditions": {"type": "Running"}, "trainingProgress": "x"}),
    job("null-status", None, finalizers=["f"]),
    {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bare"}},
]
JOB_COLUMNS = {
    "the group's columns": None,
    "none of its own (Name, Age)": (),
    "whole roots and metadata": (
        {"name": "Status", "type": "string", "jsonPath": ".status"},
        {"name": "Team", "type": "string", "jsonPath": ".metadata.labels.team"},
        {"name": "Note", "type": "string", "jsonPath": ".metadata.annotations['note']"},
        {"name": "Bad", "type": "string", "jsonPath": ".status[?(@"},
    ),
    "anything": (
        {"name": "Managers", "type": "string", "jsonPath": "..manager"},
        {"name": "Any", "type": "string", "jsonPath": "[*].replicas"},
    ),
}


@pytest.mark.parametrize("include", ["Metadata", "Object", "None"])
@pytest.mark.parametrize("columns", JOB_COLUMNS, ids=list(JOB_COLUMNS))
def test_custom_resources_from_their_encoded_objects_equal_the_generic_table(columns: str, include: str) -> None:
    rt = pytorchjobs(JOB_COLUMNS[columns])
    list_meta = {"resourceVersion": "7"}
    generic = tables.table(rt, JOBS, now=NOW, resource_version="7", include_object=include)
    generic["metadata"] = list_meta
    encoded = tables.table_encoded(
        rt, [codec.dumps(j) for j in JOBS], now=NOW, list_meta=list_meta, include_object=include
    )
    assert json.loads(encoded) == json.loads(json.dumps(generic))


def test_a_custom_resources_cells_read_only_what_its_columns_name() -> None:
    # A PyTorchJob's spec and managedFields (most of its bytes) are not decoded for its row.
    wanted = tables.reads(pytorchjobs())
    assert wanted is not None and wanted.fields == {
        "metadata": {"name", "creationTimestamp"},
        "status": {"conditions", "trainingProgress"},
    }
    assert tables.reads(pytorchjobs(JOB_COLUMNS["anything"])) is None


BUILTIN_OBJECTS = {
    ("", "v1", "configmaps"): [
        {
            "metadata": {"name": "a", "creationTimestamp": "2026-03-01T10:00:00Z", "managedFields": [{}]},
            "data": {"k": "v"},
        },
        {"metadata": {"name": "b"}, "data": "odd", "binaryData": {"x": "eA=="}},
    ],
    ("", "v1", "events"): [
        {
            "metadata": {"name": "e", "namespace": "ns", "creationTimestamp": "2026-03-01T11:00:00Z"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
            "reason": "Started",
            "message": "Started container c",
            "type": "Normal",
            "source": {"component": "kubelet", "host": "n"},
            "count": 3,
            "lastTimestamp": "2026-03-01T11:59:00Z",
        },
    ],
    ("", "v1", "nodes"): [
        {
            "metadata": {"name": "n", "labels": {"node-role.kubernetes.io/control-plane": ""}, "managedFields": []},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1"}},
        },
    ],
}


@pytest.mark.parametrize("include", ["Metadata", "Object"])
@pytest.mark.parametrize("key", BUILTIN_OBJECTS, ids=[k[2] for k in BUILTIN_OBJECTS])
def test_other_built_in_kinds_from_their_encoded_objects_equal_the_generic_table(
    key: tuple[str, str, str], include: str
) -> None:
    rt = Registry().lookup(*key)
    assert rt is not None
    items = [{"apiVersion": rt.group_version, "kind": rt.kind, **o} for o in BUILTIN_OBJECTS[key]]
    generic = tables.table(rt, items, now=NOW, resource_version="1", include_object=include)
    generic["metadata"] = {}
    encoded = tables.table_encoded(rt, [codec.dumps(o) for o in items], now=NOW, list_meta={}, include_object=include)
    assert json.loads(encoded) == json.loads(json.dumps(generic))


def test_splicing_the_type_into_a_stored_body() -> None:
    head = codec.type_head("kubeflow.org/v1", "PyTorchJob")
    assert json.loads(codec.splice(head, b'{"metadata":{"name":"a"}}')) == {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "a"},
    }
    assert json.loads(codec.splice(head, b"{}")) == {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob"}


def test_yaml_keys_msgspec_refuses_are_encoded_as_json_does() -> None:
    # `on:` and `null:` in a YAML body parse as True and None.
    assert json.loads(codec.dumps({"data": {True: "x", None: "y", "k": datetime(2026, 1, 1, tzinfo=UTC)}})) == {
        "data": {"true": "x", "null": "y", "k": "2026-01-01T00:00:00+00:00"}
    }


def test_lone_surrogates_round_trip_through_the_codec() -> None:
    # A JSON body may escape half a UTF-16 pair; msgspec can neither write nor read that text.
    value = json.loads('{"data": {"k": "a\\ud800b"}, "spec": {"containers": [{"name": "\\udfff"}]}}')
    encoded = codec.dumps(value)
    assert codec.loads(encoded) == value == codec.clone(value)
    assert codec.loads_many([encoded]) == [value]
    pods_rt = Registry().lookup("", "v1", "pods")
    assert pods_rt is not None
    fast = tables.table_encoded(pods_rt, [encoded], now=NOW, list_meta={})
    assert json.loads(fast)["rows"][0]["cells"][1] == "0/1"


def test_restarts_say_when_the_last_run_ended(pods: ResourceType) -> None:
    rows = {r["cells"][0]: r["cells"] for r in tables.table(pods, PODS, now=NOW, resource_version="1")["rows"]}
    assert rows["crash-looping"][2:4] == ["CrashLoopBackOff", "3 (35s ago)"]
    assert rows["running"][3] == "3" and rows["pending"][3] == "0"


def test_status_speaks_of_init_containers_as_kubectl_does(pods: ResourceType) -> None:
    rows = {r["cells"][0]: r["cells"] for r in tables.table(pods, PODS, now=NOW, resource_version="1")["rows"]}
    assert rows["init-first"][2] == "Init:0/2" and rows["init-second"][2] == "Init:1/2"
    assert rows["init-failed"][2] == "Init:Error" and rows["init-signal"][2] == "Init:Signal:9"
    assert rows["init-crash-looping"][2:4] == ["Init:CrashLoopBackOff", "4 (10s ago)"]
    assert rows["initialized"][2] == "PodInitializing"
    assert rows["one-done-one-running"][2] == "NotReady"
    assert rows["gated-scheduling"][2] == "SchedulingGated"
    assert rows["deleted-after-success"][2] == "Succeeded" and rows["terminating"][2] == "Terminating"
