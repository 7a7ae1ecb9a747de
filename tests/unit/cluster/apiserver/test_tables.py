"""The pod Table fast path (``table_encoded``) against the generic ``table``, row for row.

kubectl's ``get pods`` is served from the encoded objects without decoding them whole; whatever
shape a pod has, the answer must be the Table the generic column functions compute.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import msgspec
import pytest

from trainyard.cluster.apiserver import tables
from trainyard.cluster.apiserver.registry import Registry, ResourceType
from trainyard.cluster.storage import codec

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
    assert fast is not None
    assert json.loads(fast) == json.loads(json.dumps(generic))


def test_well_formed_pods_take_the_fast_path_and_odd_ones_fall_back() -> None:
    decodable = []
    for p in PODS:
        try:
            tables._pod_decoder.decode(codec.dumps(p))
            decodable.append(p["metadata"]["name"])
        except msgspec.ValidationError:
            pass
    assert decodable == [p["metadata"]["name"] for p in PODS if p["metadata"]["name"] != "odd"]


def test_kinds_without_a_fast_path_say_so() -> None:
    configmaps = Registry().lookup("", "v1", "configmaps")
    assert configmaps is not None
    assert tables.table_encoded(configmaps, [b"{}"], now=NOW, list_meta={}) is None


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
    assert fast is not None and json.loads(fast)["rows"][0]["cells"][1] == "0/1"


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
