"""PaddleJob's API: defaults (reference §1.1, §1.2), its CRD, and admission (§2.1, §2.2).

Upstream's webhook checks only the replica types; the ``elasticPolicy`` rules are trainyard's
(upstream admits any policy), worded as Kubernetes words an HPA's same fields.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.crd import crd_for
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kubeflow.paddle import PADDLEJOB, PaddleJob
from trainyard.api.validation import invalid_status, validate_job

E = ErrorType
SPECS = "spec.paddleReplicaSpecs"

# The Kubeflow docs' CPU example, as users apply it (an explicit `master` port).
UPSTREAM_MANIFEST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PaddleJob",
    "metadata": {"name": "paddle-simple-cpu", "namespace": "kubeflow"},
    "spec": {
        "paddleReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "restartPolicy": "OnFailure",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "paddle",
                                "image": "registry.baidubce.com/paddlepaddle/paddle:2.4.0rc0-cpu",
                                "command": ["python"],
                                "args": ["-m", "paddle.distributed.launch", "run_check"],
                                "ports": [{"containerPort": 37777, "name": "master"}],
                                "imagePullPolicy": "Always",
                            }
                        ]
                    }
                },
            }
        }
    },
}


def container(name: str = "paddle", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "paddle:3", **fields}


def manifest(specs: dict[str, Any] | None = None, *, elastic: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "paddleReplicaSpecs": specs
        if specs is not None
        else {"Worker": {"replicas": 3, "template": {"spec": {"containers": [container()]}}}}
    }
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    return {"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "ocr"}, "spec": spec}


def defaulted(body: dict[str, Any]) -> dict[str, Any]:
    return apply_defaults(PaddleJob.model_validate(body), PADDLEJOB).to_dict()


# -- defaults ---------------------------------------------------------------------------------------------


def test_replica_defaults_are_paddles() -> None:
    specs = {"Master": {"template": {"spec": {"containers": [container()]}}}}
    master = defaulted(manifest(specs))["spec"]["paddleReplicaSpecs"]["Master"]

    assert (master["replicas"], master["restartPolicy"]) == (1, "OnFailure")
    assert master["template"]["spec"]["containers"][0]["ports"] == [{"name": "master", "containerPort": 36543}]


def test_a_declared_master_port_is_kept() -> None:
    worker = defaulted(UPSTREAM_MANIFEST)["spec"]["paddleReplicaSpecs"]["Worker"]

    assert worker["template"]["spec"]["containers"][0]["ports"] == [{"containerPort": 37777, "name": "master"}]


@pytest.mark.parametrize(
    ("workers", "elastic", "expected"),
    [
        (3, {}, (3, 3)),
        (None, {}, (1, 1)),
        (3, {"maxReplicas": 5}, (5, 5)),
        (3, {"minReplicas": 2}, (2, 2)),
        (3, {"minReplicas": 1, "maxReplicas": 4}, (1, 4)),
    ],
    ids=["neither-takes-workers", "neither-default-replicas", "only-max", "only-min", "both-kept"],
)
def test_elastic_min_max(workers: int | None, elastic: dict[str, Any], expected: tuple[int, int]) -> None:
    worker: dict[str, Any] = {"template": {"spec": {"containers": [container()]}}}
    if workers is not None:
        worker["replicas"] = workers
    policy = defaulted(manifest({"Worker": worker}, elastic=elastic))["spec"]["elasticPolicy"]

    assert (policy["minReplicas"], policy["maxReplicas"]) == expected


def test_no_elastic_policy_is_added() -> None:
    assert "elasticPolicy" not in defaulted(manifest())["spec"]


# -- the CRD ----------------------------------------------------------------------------------------------

CRD = crd_for(PADDLEJOB)
VERSION = CRD["spec"]["versions"][0]


def test_crd_names_and_scale_subresource() -> None:
    names = CRD["spec"]["names"]
    assert CRD["metadata"]["name"] == "paddlejobs.kubeflow.org"
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        "PaddleJob",
        "PaddleJobList",
        "paddlejobs",
        "paddlejob",
    )
    assert VERSION["subresources"]["scale"] == {
        "specReplicasPath": ".spec.paddleReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }


def test_crd_elastic_policy_has_upstreams_four_fields() -> None:
    spec = VERSION["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    policy = spec["elasticPolicy"]["properties"]

    assert sorted(spec) == ["elasticPolicy", "paddleReplicaSpecs", "runPolicy"]
    assert sorted(policy) == ["maxReplicas", "maxRestarts", "metrics", "minReplicas"]
    assert policy["metrics"]["type"] == "array"


# -- admission --------------------------------------------------------------------------------------------


def errors_of(body: dict[str, Any]) -> list[FieldError]:
    return validate_job(body, PADDLEJOB)


def test_upstream_manifest_is_valid() -> None:
    assert errors_of(UPSTREAM_MANIFEST) == []


def test_a_replica_type_paddle_does_not_have_is_not_supported() -> None:
    body = copy.deepcopy(UPSTREAM_MANIFEST)
    body["spec"]["paddleReplicaSpecs"]["PS"] = body["spec"]["paddleReplicaSpecs"]["Worker"]

    assert errors_of(body) == [FieldError(E.NOT_SUPPORTED, f"{SPECS}.PS", '"PS": supported values: "Master", "Worker"')]


def test_the_container_name_is_quoted_in_paddles_message() -> None:
    body = manifest({"Worker": {"template": {"spec": {"containers": [container("main")]}}}})

    assert errors_of(body) == [
        FieldError(
            E.REQUIRED,
            f"{SPECS}.Worker.template.spec.containers",
            'must have at least one container with name "paddle"',
        )
    ]


def test_any_master_replicas_are_admitted_as_upstream() -> None:
    specs = {
        "Master": {"replicas": 2, "template": {"spec": {"containers": [container()]}}},
        "Worker": {"template": {"spec": {"containers": [container()]}}},
    }

    assert errors_of(manifest(specs)) == []


ELASTIC_OK = [
    ("empty", {}),
    ("min-and-max", {"minReplicas": 1, "maxReplicas": 4, "maxRestarts": 3}),
    ("equal", {"minReplicas": 2, "maxReplicas": 2}),
    ("only-min", {"minReplicas": 5}),
    ("zero-restarts", {"maxRestarts": 0}),
    ("metrics", {"metrics": [{"type": "Resource", "resource": {"name": "cpu"}}]}),
]


@pytest.mark.parametrize("policy", [c[1] for c in ELASTIC_OK], ids=[c[0] for c in ELASTIC_OK])
def test_sound_elastic_policies_are_admitted(policy: dict[str, Any]) -> None:
    assert errors_of(manifest(elastic=policy)) == []


def test_a_lower_case_worker_key_counts_as_the_worker() -> None:
    specs = {"worker": {"template": {"spec": {"containers": [container()]}}}}

    assert errors_of(manifest(specs, elastic={"minReplicas": 1})) == []


MIN, MAX, RESTARTS = (
    "spec.elasticPolicy.minReplicas",
    "spec.elasticPolicy.maxReplicas",
    "spec.elasticPolicy.maxRestarts",
)

ELASTIC_MISTAKES = [
    (
        "min-above-max",
        {"minReplicas": 3, "maxReplicas": 2},
        [(MAX, "2: must be greater than or equal to `minReplicas`")],
    ),
    ("min-zero", {"minReplicas": 0}, [(MIN, "0: must be greater than or equal to 1")]),
    ("max-zero", {"maxReplicas": 0}, [(MAX, "0: must be greater than 0")]),
    (
        "max-negative-below-min",
        {"minReplicas": 1, "maxReplicas": -1},
        [(MAX, "-1: must be greater than 0"), (MAX, "-1: must be greater than or equal to `minReplicas`")],
    ),
    (
        "both-below-one",
        {"minReplicas": -2, "maxReplicas": 0},
        [(MIN, "-2: must be greater than or equal to 1"), (MAX, "0: must be greater than 0")],
    ),
    ("restarts-negative", {"maxRestarts": -1}, [(RESTARTS, "-1: must be greater than or equal to 0")]),
]


@pytest.mark.parametrize(
    ("policy", "expected"), [c[1:] for c in ELASTIC_MISTAKES], ids=[c[0] for c in ELASTIC_MISTAKES]
)
def test_elastic_policy_mistakes_are_invalid_with_their_paths(
    policy: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert errors_of(manifest(elastic=policy)) == [FieldError(E.INVALID, path, detail) for path, detail in expected]


def test_an_elastic_policy_without_workers_requires_them() -> None:
    specs = {"Master": {"template": {"spec": {"containers": [container()]}}}}

    assert errors_of(manifest(specs, elastic={"minReplicas": 1})) == [
        FieldError(E.REQUIRED, f"{SPECS}.Worker", "must be configured if elastic policy is used")
    ]


def test_every_mistake_is_in_one_422() -> None:
    body = manifest(elastic={"minReplicas": 0, "maxRestarts": -1})
    body["spec"]["paddleReplicaSpecs"]["Chief"] = body["spec"]["paddleReplicaSpecs"]["Worker"]
    status = invalid_status(PADDLEJOB, "ocr", errors_of(body))

    assert (status["code"], status["reason"]) == (422, "Invalid")
    assert [c["field"] for c in status["details"]["causes"]] == [f"{SPECS}.Chief", MIN, RESTARTS]
    assert status["message"].startswith('PaddleJob.kubeflow.org "ocr" is invalid: [spec.paddleReplicaSpecs.Chief: ')
