"""The webhook's answer to an ``AdmissionReview``, as a pure function (HTTPS is tests/e2e/test_webhook.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api import PYTORCHJOB
from trainyard.api.kinds import KINDS
from trainyard.operator.webhook import path_for, review, webhook_configuration

JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "mnist", "namespace": "team-a"},
    "spec": {
        "runPolicy": {"managedBy": "kubeflow.org/training-operator"},
        "pytorchReplicaSpecs": {
            "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}},
            "Worker": {"replicas": 2, "template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}},
        },
    },
}


def job(**spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(JOB)
    body["spec"].update(spec)
    return body


def bad_job() -> dict[str, Any]:
    body = copy.deepcopy(JOB)
    body["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    return body


def request(operation: str, obj: Any = None, old: Any = None, version: str = "admission.k8s.io/v1") -> dict[str, Any]:
    req: dict[str, Any] = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"},
        "resource": {"group": "kubeflow.org", "version": "v1", "resource": "pytorchjobs"},
        "name": "mnist",
        "namespace": "team-a",
        "operation": operation,
        "object": obj,
        "oldObject": old,
        "dryRun": False,
    }
    return {"apiVersion": version, "kind": "AdmissionReview", "request": req}


DEPRECATED = "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"
MANAGED_OTHER = job(runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})

CASES = [
    # id, review request, allowed, status code (None: no status), causes' fields, warnings
    ("create-valid", request("CREATE", JOB), True, None, [], []),
    ("create-invalid", request("CREATE", bad_job()), False, 422, ["spec.pytorchReplicaSpecs.Master.replicas"], []),
    (
        "create-deprecated-field",
        request("CREATE", job(elasticPolicy={"nProcPerNode": 2})),
        True,
        None,
        [],
        [DEPRECATED],
    ),
    ("update-valid", request("UPDATE", job(), JOB), True, None, [], []),
    ("update-managed-by", request("UPDATE", MANAGED_OTHER, JOB), False, 422, ["spec.runPolicy.managedBy"], []),
    ("update-invalid", request("UPDATE", bad_job(), JOB), False, 422, ["spec.pytorchReplicaSpecs.Master.replicas"], []),
    ("delete", request("DELETE", None, JOB), True, None, [], []),
    ("update-without-old-object", request("UPDATE", JOB), False, 400, [], []),
    ("create-without-object", request("CREATE"), False, 400, [], []),
    (
        "v1beta1",
        request("CREATE", bad_job(), version="admission.k8s.io/v1beta1"),
        False,
        422,
        ["spec.pytorchReplicaSpecs.Master.replicas"],
        [],
    ),
]


@pytest.mark.parametrize(
    ("body", "allowed", "code", "fields", "warnings"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_review(body: dict[str, Any], allowed: bool, code: int | None, fields: list[str], warnings: list[str]) -> None:
    out = review(body, PYTORCHJOB)

    assert (out["apiVersion"], out["kind"]) == (body["apiVersion"], "AdmissionReview")
    response = out["response"]
    assert response["uid"] == body["request"]["uid"]
    assert response["allowed"] is allowed
    assert (response.get("status") or {}).get("code") == code
    assert [c["field"] for c in ((response.get("status") or {}).get("details") or {}).get("causes", [])] == fields
    assert response.get("warnings", []) == warnings


def test_denial_is_the_status_the_embedded_plane_answers() -> None:
    status = review(request("CREATE", bad_job()), PYTORCHJOB)["response"]["status"]

    assert status == {
        "metadata": {},
        "status": "Failure",
        "message": 'PyTorchJob.kubeflow.org "mnist" is invalid: '
        "spec.pytorchReplicaSpecs.Master.replicas: Forbidden: must be 1",
        "reason": "Invalid",
        "details": {
            "name": "mnist",
            "group": "kubeflow.org",
            "kind": "PyTorchJob",
            "causes": [
                {
                    "reason": "FieldValueForbidden",
                    "message": "Forbidden: must be 1",
                    "field": "spec.pytorchReplicaSpecs.Master.replicas",
                }
            ],
        },
        "code": 422,
    }


@pytest.mark.parametrize(
    "body",
    [None, [], "text", {"apiVersion": "v1", "kind": "Pod"}, {"apiVersion": "admission.k8s.io/v1", "request": "x"}],
    ids=["null", "list", "string", "not-a-review", "request-not-an-object"],
)
def test_unreadable_reviews_are_denied_with_400(body: Any) -> None:
    out = review(body, PYTORCHJOB)

    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["code"] == 400
    assert "AdmissionReview" in out["response"]["status"]["message"]


def test_path_is_upstreams() -> None:
    assert path_for(PYTORCHJOB) == "/validate-kubeflow-org-v1-pytorchjob"


def test_configuration_names_the_served_paths() -> None:
    config = webhook_configuration(service_name="trainyard-operator", namespace="ops", ca_bundle="Q0E=")

    assert config["metadata"]["name"] == "validator.training-operator.kubeflow.org"
    hooks = {h["name"]: h for h in config["webhooks"]}
    # one per served kind, as upstream registers one per kind
    assert set(hooks) == {f"validator.{info.kind.lower()}.training-operator.kubeflow.org" for info in KINDS.values()}
    hook = hooks["validator.pytorchjob.training-operator.kubeflow.org"]
    assert hook["name"] == "validator.pytorchjob.training-operator.kubeflow.org"
    assert hook["clientConfig"] == {
        "service": {"name": "trainyard-operator", "namespace": "ops", "path": path_for(PYTORCHJOB), "port": 443},
        "caBundle": "Q0E=",
    }
    assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
    assert hook["rules"] == [
        {
            "apiGroups": ["kubeflow.org"],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["pytorchjobs"],
        }
    ]
