"""The kubectl JSONPath subset used by CRD printer columns, and the dotted scale paths."""

from __future__ import annotations

import copy

import pytest

from trainyard.cluster.server.apiserver.requests.jsonpath import JSONPathError, evaluate, get_path, set_path

JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {
        "name": "mnist",
        "labels": {"app.kubernetes.io/name": "trainer", "team": "ml"},
        "creationTimestamp": "2025-01-01T00:00:00Z",
    },
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1},
            "Worker": {"replicas": 3, "restartPolicy": "OnFailure"},
        },
        "runPolicy": {"suspend": False, "backoffLimit": 0},
    },
    "status": {
        "conditions": [
            {"type": "Created", "status": "True", "attempt": 1},
            {"type": "Running", "status": "False", "attempt": 2},
            {"type": "Succeeded", "status": "True", "attempt": 3},
        ],
        "replicaStatuses": {"Worker": {"active": 3}},
    },
    "items": [{"name": "a", "size": 1}, {"name": "b", "size": 2}, {"name": "c"}],
}

EVALUATE_CASES = [
    (".metadata.name", ["mnist"]),
    ("{.metadata.name}", ["mnist"]),
    ("$.metadata.name", ["mnist"]),
    ("{$.metadata.name}", ["mnist"]),
    (".spec.pytorchReplicaSpecs.Worker.replicas", [3]),
    (".spec.runPolicy.suspend", [False]),
    (".status.conditions[-1:].type", ["Succeeded"]),
    (".status.conditions[0].type", ["Created"]),
    (".status.conditions[-1].type", ["Succeeded"]),
    (".status.conditions[1:].type", ["Running", "Succeeded"]),
    (".status.conditions[:2].type", ["Created", "Running"]),
    (".status.conditions[::2].type", ["Created", "Succeeded"]),
    (".status.conditions[-5:1].type", ["Created"]),
    (".items[*].name", ["a", "b", "c"]),
    (".items[0]", [{"name": "a", "size": 1}]),
    (".items[0,2].name", ["a", "c"]),
    (".items[*].size", [1, 2]),
    ('.status.conditions[?(@.type=="Running")].status', ["False"]),
    (".status.conditions[?(@.type == 'Running')].status", ["False"]),
    ('.status.conditions[?(@.status!="True")].type', ["Running"]),
    (".status.conditions[?(@.attempt==2)].type", ["Running"]),
    (".status.conditions[?(@.attempt>=2)].type", ["Running", "Succeeded"]),
    (".status.conditions[?(@.attempt<2)].type", ["Created"]),
    ('.status.conditions[?(@.attempt=="2")].type', []),
    (".items[?(@.size)].name", ["a", "b"]),
    (".items[?(@.size!=1)].name", ["b"]),
    (".metadata.labels['app.kubernetes.io/name']", ["trainer"]),
    ('.metadata.labels["app.kubernetes.io/name"]', ["trainer"]),
    (".metadata.labels.app\\.kubernetes\\.io/name", ["trainer"]),
    ("['metadata']['name']", ["mnist"]),
    (".metadata.labels['team','missing']", ["ml"]),
    (".spec.pytorchReplicaSpecs.*.replicas", [1, 3]),
    (".spec.pytorchReplicaSpecs[*].replicas", [1, 3]),
    ("..replicas", [1, 3]),
    (".status.replicaStatuses.Worker.active", [3]),
    # Missing data is never an error.
    (".status.startTime", []),
    (".spec.nope.deeper[0].x", []),
    (".items[7]", []),
    (".items[-7]", []),
    (".metadata.name[0]", []),
    (".metadata.name.first", []),
    (".metadata[?(@.x==1)]", []),
    ('.status.conditions[?(@.missing=="x")].type', []),
    ('.status.conditions[?(@.missing!="x")].type', []),
]


@pytest.mark.parametrize(("expr", "expected"), EVALUATE_CASES, ids=[c[0] for c in EVALUATE_CASES])
def test_evaluate(expr: str, expected: list[object]) -> None:
    assert evaluate(expr, JOB) == expected


def test_evaluate_root_and_non_dict_documents() -> None:
    assert evaluate(".", JOB) == [JOB]
    assert evaluate("$", [1, 2]) == [[1, 2]]
    assert evaluate("[1]", ["x", "y"]) == ["y"]
    assert evaluate(".a", None) == []
    assert evaluate('[?(@ == "b")]', ["a", "b"]) == ["b"]


def test_evaluate_does_not_mutate() -> None:
    before = copy.deepcopy(JOB)
    evaluate("..name", JOB)
    assert before == JOB


SYNTAX_ERROR_CASES = [
    "",
    "{}",
    "metadata.name",
    ".metadata.",
    ".items[",
    ".items[x]",
    ".items[1:2:0]",
    ".items[1:2:3:4]",
    ".items[?(@.size==)]",
    ".items[?(@.size==1]",
    ".items['unterminated]",
    "{.a}{.b}",
    ".a b",
]


@pytest.mark.parametrize("expr", SYNTAX_ERROR_CASES, ids=[repr(e) for e in SYNTAX_ERROR_CASES])
def test_evaluate_syntax_errors(expr: str) -> None:
    with pytest.raises(JSONPathError):
        evaluate(expr, JOB)


def test_jsonpath_error_is_a_value_error() -> None:
    assert issubclass(JSONPathError, ValueError)


GET_PATH_CASES = [
    (".spec.pytorchReplicaSpecs.Worker.replicas", 3),
    ("spec.pytorchReplicaSpecs.Master.replicas", 1),
    (".status.replicaStatuses.Worker.active", 3),
    (".spec.runPolicy.suspend", False),
    (".spec.pytorchReplicaSpecs.Chief.replicas", None),
    (".metadata.name.length", None),
    (".", JOB),
]


@pytest.mark.parametrize(("path", "expected"), GET_PATH_CASES, ids=[c[0] for c in GET_PATH_CASES])
def test_get_path(path: str, expected: object) -> None:
    assert get_path(JOB, path) == expected


SET_PATH_CASES = [
    (
        {"spec": {"replicas": 1, "other": "kept"}},
        ".spec.replicas",
        5,
        {"spec": {"replicas": 5, "other": "kept"}},
    ),
    (
        {},
        ".spec.pytorchReplicaSpecs.Worker.replicas",
        2,
        {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}}}},
    ),
    ({"status": {}}, "status.selector", "app=x", {"status": {"selector": "app=x"}}),
    ({"a": {"b": None}}, ".a.b.c", 1, {"a": {"b": {"c": 1}}}),
]


@pytest.mark.parametrize(("obj", "path", "value", "expected"), SET_PATH_CASES, ids=[c[1] for c in SET_PATH_CASES])
def test_set_path(obj: dict[str, object], path: str, value: object, expected: dict[str, object]) -> None:
    before = copy.deepcopy(obj)
    result = set_path(obj, path, value)
    assert result == expected
    assert obj == before


def test_set_path_result_shares_nothing_with_input() -> None:
    obj = {"spec": {"template": {"labels": {"a": "b"}}}}
    result = set_path(obj, ".spec.replicas", 1)
    result["spec"]["template"]["labels"]["a"] = "changed"  # type: ignore[index]
    assert obj["spec"]["template"]["labels"]["a"] == "b"


@pytest.mark.parametrize(
    ("obj", "path"),
    [({"spec": "text"}, ".spec.replicas"), ({}, "."), ({}, ".a..b"), ({}, ".items[0].x")],
    ids=["through-a-string", "root", "empty-segment", "brackets"],
)
def test_set_path_errors(obj: dict[str, object], path: str) -> None:
    with pytest.raises(JSONPathError):
        set_path(obj, path, 1)
