"""In-memory defaulting (reference §1.2) and the CRD generated from the models (§0)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from trainyard.api import PYTORCHJOB, CleanPodPolicy, PyTorchJob
from trainyard.api.crd import crd_for
from trainyard.api.defaults import apply_defaults, canonical_replica_type

DEFAULT_PORT = {"name": "pytorchjob-port", "containerPort": 23456}


def container(name: str = "pytorch", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "pytorch:2", **fields}


def manifest(
    specs: dict[str, Any] | None = None, *, elastic: dict[str, Any] | None = None, nproc: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "pytorchReplicaSpecs": specs
        if specs is not None
        else {
            "Master": {"template": {"spec": {"containers": [container()]}}},
            "Worker": {"replicas": 3, "template": {"spec": {"containers": [container()]}}},
        }
    }
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "mnist"}, "spec": spec}


def defaulted(body: dict[str, Any]) -> dict[str, Any]:
    return apply_defaults(PyTorchJob.model_validate(body), PYTORCHJOB).to_dict()


def one_replica(containers: list[dict[str, Any]], **replica: Any) -> dict[str, Any]:
    return {"Worker": {**replica, "template": {"spec": {"containers": containers}}}}


# -- replicas, restartPolicy, cleanPodPolicy -------------------------------------------------------------


@pytest.mark.parametrize(
    ("replica", "expected"),
    [
        ({}, {"replicas": 1, "restartPolicy": "OnFailure"}),
        ({"replicas": 4}, {"replicas": 4, "restartPolicy": "OnFailure"}),
        ({"restartPolicy": "Never"}, {"replicas": 1, "restartPolicy": "Never"}),
        ({"replicas": 0, "restartPolicy": "ExitCode"}, {"replicas": 0, "restartPolicy": "ExitCode"}),
    ],
    ids=["nothing-set", "replicas-set", "restartPolicy-set", "both-set"],
)
def test_replicas_and_restart_policy(replica: dict[str, Any], expected: dict[str, Any]) -> None:
    out = defaulted(manifest(one_replica([container()], **replica)))["spec"]["pytorchReplicaSpecs"]["Worker"]

    assert {k: out[k] for k in expected} == expected


def test_master_without_replicas_gets_one() -> None:
    specs = defaulted(manifest())["spec"]["pytorchReplicaSpecs"]

    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 3)


@pytest.mark.parametrize(
    ("given", "expected"),
    [(None, CleanPodPolicy.NONE), ("All", CleanPodPolicy.ALL), ("Running", CleanPodPolicy.RUNNING)],
    ids=["unset", "All", "Running"],
)
def test_clean_pod_policy(given: str | None, expected: CleanPodPolicy) -> None:
    body = manifest()
    if given is not None:
        body["spec"]["runPolicy"] = {"cleanPodPolicy": given}

    job = apply_defaults(PyTorchJob.model_validate(body), PYTORCHJOB)

    assert job.run_policy.clean_pod_policy is expected


# -- default port ---------------------------------------------------------------------------------------

PORTS = [
    # id, containers, expected ports of each container after defaulting
    ("added-to-pytorch", [container()], [[DEFAULT_PORT]]),
    (
        "pytorch-is-second",
        [container("sidecar"), container()],
        [None, [DEFAULT_PORT]],
    ),
    (
        "no-pytorch-uses-container-0",
        [container("trainer"), container("sidecar")],
        [[DEFAULT_PORT], None],
    ),
    (
        "declared-port-kept",
        [container(ports=[{"name": "pytorchjob-port", "containerPort": 29500}])],
        [[{"name": "pytorchjob-port", "containerPort": 29500}]],
    ),
    (
        "other-ports-kept-and-default-appended",
        [container(ports=[{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}])],
        [[{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}, DEFAULT_PORT]],
    ),
]


@pytest.mark.parametrize(("containers", "ports"), [p[1:] for p in PORTS], ids=[p[0] for p in PORTS])
def test_default_port(containers: list[dict[str, Any]], ports: list[list[dict[str, Any]] | None]) -> None:
    out = defaulted(manifest(one_replica(containers)))["spec"]["pytorchReplicaSpecs"]["Worker"]

    assert [c.get("ports") for c in out["template"]["spec"]["containers"]] == ports


def test_replica_without_containers_is_left_alone() -> None:
    out = defaulted(manifest(one_replica([])))["spec"]["pytorchReplicaSpecs"]["Worker"]

    assert out["template"]["spec"]["containers"] == []


# -- replica-type keys ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "canonical"),
    [("worker", "Worker"), ("WORKER", "Worker"), ("master", "Master"), ("Master", "Master"), ("Chief", "Chief")],
    ids=["worker", "WORKER", "master", "Master", "unknown-kept"],
)
def test_replica_type_keys_are_canonicalised(key: str, canonical: str) -> None:
    assert canonical_replica_type(key, PYTORCHJOB) == canonical

    out = defaulted(manifest({key: {"template": {"spec": {"containers": [container()]}}}}))

    assert list(out["spec"]["pytorchReplicaSpecs"]) == [canonical]


# -- PyTorch: nprocPerNode and elasticPolicy ----------------------------------------------------------------

NPROC = [
    # id, nprocPerNode, elasticPolicy, defaulted nprocPerNode
    ("default-auto", None, None, "auto"),
    ("kept", "4", None, "4"),
    ("auto-with-elastic", None, {"minReplicas": 1}, "auto"),
    ("deprecated-elastic-field-stops-default", None, {"nProcPerNode": 2}, None),
]


@pytest.mark.parametrize(("nproc", "elastic", "expected"), [n[1:] for n in NPROC], ids=[n[0] for n in NPROC])
def test_nproc_per_node(nproc: str | None, elastic: dict[str, Any] | None, expected: str | None) -> None:
    out = defaulted(manifest(elastic=elastic, nproc=nproc))

    assert out["spec"].get("nprocPerNode") == expected


ELASTIC = [
    # id, Worker replicas, elasticPolicy, (minReplicas, maxReplicas)
    ("both-set", 3, {"minReplicas": 1, "maxReplicas": 5}, (1, 5)),
    ("only-max", 3, {"maxReplicas": 5}, (5, 5)),
    ("only-min", 3, {"minReplicas": 2}, (2, 2)),
    ("neither-uses-worker-replicas", 3, {}, (3, 3)),
    ("neither-with-default-worker-replicas", None, {}, (1, 1)),
]


@pytest.mark.parametrize(("workers", "elastic", "expected"), [e[1:] for e in ELASTIC], ids=[e[0] for e in ELASTIC])
def test_elastic_min_max(workers: int | None, elastic: dict[str, Any], expected: tuple[int, int]) -> None:
    replica: dict[str, Any] = {} if workers is None else {"replicas": workers}
    out = defaulted(manifest(one_replica([container()], **replica), elastic=elastic))

    policy = out["spec"]["elasticPolicy"]
    assert (policy["minReplicas"], policy["maxReplicas"]) == expected


def test_elastic_defaults_read_a_lower_case_worker_key() -> None:
    body = manifest({"worker": {"replicas": 4, "template": {"spec": {"containers": [container()]}}}}, elastic={})

    policy = defaulted(body)["spec"]["elasticPolicy"]

    assert (policy["minReplicas"], policy["maxReplicas"]) == (4, 4)


def test_no_elastic_policy_is_added() -> None:
    assert "elasticPolicy" not in defaulted(manifest())["spec"]


# -- purity ------------------------------------------------------------------------------------------------


def test_input_is_not_mutated() -> None:
    body = manifest(
        {
            "worker": {"template": {"spec": {"containers": [container("sidecar"), container()]}}},
            "Master": {"template": {"spec": {"containers": [container()]}}},
        },
        elastic={"maxReplicas": 4},
    )
    job = PyTorchJob.model_validate(body)
    before = job.to_dict()

    out = apply_defaults(job, PYTORCHJOB)

    assert job.to_dict() == before
    assert out is not job
    assert out.to_dict() != before
    assert list(job.replica_specs) == ["worker", "Master"]
    assert job.run_policy.clean_pod_policy is None
    assert job.spec.elastic_policy is not None
    assert job.spec.elastic_policy.min_replicas is None


def test_defaulting_is_idempotent() -> None:
    once = apply_defaults(PyTorchJob.model_validate(manifest(elastic={})), PYTORCHJOB)

    assert apply_defaults(once, PYTORCHJOB) == once


def test_unknown_fields_survive_defaulting() -> None:
    body = manifest(
        one_replica([container(resources={"limits": {"cpu": "1"}})], extraReplicaField="x"),
    )
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["volumes"] = [{"name": "v", "emptyDir": {}}]

    out = defaulted(body)["spec"]["pytorchReplicaSpecs"]["Worker"]

    assert out["extraReplicaField"] == "x"
    assert out["template"]["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]
    assert out["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}


# -- the CRD ---------------------------------------------------------------------------------------------

CRD = crd_for(PYTORCHJOB)
VERSION = CRD["spec"]["versions"][0]
SCHEMA = VERSION["schema"]["openAPIV3Schema"]


def walk(node: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node (not the ``properties`` maps themselves), with a readable path."""
    if not isinstance(node, dict):
        return
    yield path, node
    for name, sub in (node.get("properties") or {}).items():
        yield from walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{*}}")


def all_keys(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from all_keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from all_keys(item)


def at(path: str) -> dict[str, Any]:
    return dict(walk(SCHEMA))[path]


def test_crd_names() -> None:
    assert CRD["apiVersion"] == "apiextensions.k8s.io/v1"
    assert CRD["kind"] == "CustomResourceDefinition"
    assert CRD["metadata"]["name"] == "pytorchjobs.kubeflow.org"
    assert CRD["spec"]["group"] == "kubeflow.org"
    assert CRD["spec"]["scope"] == "Namespaced"
    names = CRD["spec"]["names"]
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        "PyTorchJob",
        "PyTorchJobList",
        "pytorchjobs",
        "pytorchjob",
    )
    assert [v["name"] for v in CRD["spec"]["versions"]] == ["v1"]
    assert (VERSION["served"], VERSION["storage"]) == (True, True)


def test_crd_subresources() -> None:
    assert VERSION["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
            "statusReplicasPath": ".status.replicaStatuses.Worker.active",
            "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
        },
    }


def test_crd_printer_columns() -> None:
    assert VERSION["additionalPrinterColumns"] == [
        {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
        {"name": "Progress", "type": "string", "jsonPath": ".status.trainingProgress.progress"},
        {"name": "Epoch", "type": "integer", "jsonPath": ".status.trainingProgress.currentEpoch"},
        {"name": "Loss", "type": "number", "jsonPath": ".status.trainingProgress.metrics.loss", "priority": 1},
        {"name": "Accuracy", "type": "number", "jsonPath": ".status.trainingProgress.metrics.accuracy", "priority": 1},
        {
            "name": "ETA",
            "type": "integer",
            "jsonPath": ".status.trainingProgress.estimatedRemainingSeconds",
            "priority": 1,
        },
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]


@pytest.mark.parametrize("key", ["$ref", "$defs", "anyOf", "allOf", "oneOf", "title", "const"])
def test_schema_has_no_non_structural_keys(key: str) -> None:
    assert key not in set(all_keys(SCHEMA))


def test_only_run_policy_and_suspend_have_server_defaults() -> None:
    # pydantic's defaults must not leak into the CRD: the server would write them into every job.
    defaulted = {path: node["default"] for path, node in walk(SCHEMA) if "default" in node}
    run_policy = SCHEMA["properties"]["spec"]["properties"]["runPolicy"]
    assert list(defaulted.values()) == [{}, False]
    assert run_policy["default"] == {} and run_policy["properties"]["suspend"]["default"] is False


def test_every_schema_node_has_a_type_or_keeps_unknown_fields() -> None:
    open_or_either = ("x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string")
    untyped = [p for p, n in walk(SCHEMA) if "type" not in n and not any(n.get(k) for k in open_or_either)]

    assert untyped == []


def test_scheduling_policy_schema_has_quantities_and_the_queue_rule() -> None:
    policy = SCHEMA["properties"]["spec"]["properties"]["runPolicy"]["properties"]["schedulingPolicy"]["properties"]

    assert policy["minResources"]["additionalProperties"] == {"x-kubernetes-int-or-string": True}
    assert policy["queue"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "spec.runPolicy.schedulingPolicy.queue is immutable"}
    ]


def test_no_node_has_both_properties_and_additional_properties() -> None:
    assert [p for p, n in walk(SCHEMA) if "properties" in n and "additionalProperties" in n] == []


def test_top_level_schema() -> None:
    assert SCHEMA["type"] == "object"
    assert set(SCHEMA["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    assert SCHEMA["properties"]["metadata"] == {"type": "object"}


@pytest.mark.parametrize(
    "path",
    [
        ".spec.pytorchReplicaSpecs{*}.template",
        ".spec.pytorchReplicaSpecs{*}.template.spec",
        ".spec.pytorchReplicaSpecs{*}.template.spec.containers[]",
        ".spec.pytorchReplicaSpecs{*}.template.metadata",
    ],
    ids=["template", "pod-spec", "container", "template-metadata"],
)
def test_pod_template_keeps_unknown_fields(path: str) -> None:
    node = at(path)

    assert node["x-kubernetes-preserve-unknown-fields"] is True
    assert node["type"] == "object"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".spec.pytorchReplicaSpecs", {"type": "object"}),
        (".spec.pytorchReplicaSpecs{*}.replicas", {"type": "integer", "nullable": True}),
        (".spec.pytorchReplicaSpecs{*}.restartPolicy", {"type": "string", "nullable": True}),
        (".spec.nprocPerNode", {"type": "string", "nullable": True}),
        (".spec.elasticPolicy.rdzvConf", {"type": "array", "nullable": True}),
        (".spec.runPolicy.cleanPodPolicy", {"type": "string", "enum": ["None", "Running", "All"], "nullable": True}),
        (".spec.runPolicy.backoffLimit", {"type": "integer", "nullable": True}),
        (".status.conditions", {"type": "array"}),
        (".status.replicaStatuses{*}.selector", {"type": "string", "nullable": True}),
        (".status.startTime", {"type": "string", "format": "date-time", "nullable": True}),
    ],
    ids=[
        "replica-specs-map",
        "replicas",
        "restartPolicy",
        "nprocPerNode",
        "rdzvConf",
        "cleanPodPolicy",
        "backoffLimit",
        "conditions",
        "selector",
        "startTime",
    ],
)
def test_schema_fields(path: str, expected: dict[str, Any]) -> None:
    node = at(path)

    assert {k: node.get(k) for k in expected} == expected


def test_condition_type_enum_lists_every_condition() -> None:
    node = at(".status.conditions[].type")

    assert node["type"] == "string"
    assert set(node["enum"]) == {"Created", "Running", "Restarting", "Succeeded", "Suspended", "Failed", "Pending"}
