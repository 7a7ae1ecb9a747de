"""XGBoostJob's API: defaults (reference §1.1, §1.2), admission (§2.1, §2.2) and its CRD.

The common rules are ``api.validation``'s and tested with PyTorchJob (``test_validation.py``);
here each rule is checked once more with XGBoostJob's field paths and words, plus the kind's own:
a Master must be there, with one replica.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.crd import crd_for
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType
from trainyard.api.kinds import KINDS, framework_label, kind_for_plural
from trainyard.api.kubeflow.xgboost import XGBOOSTJOB, XGBoostJob
from trainyard.api.validation import invalid_status, validate_job

V1_COLUMNS = ["State", "Progress", "Epoch", "Loss", "Accuracy", "ETA", "Age"]

E = ErrorType
SPECS = "spec.xgbReplicaSpecs"


def replica(replicas: int | None = None, **container: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "template": {
            "spec": {"containers": [{"name": "xgboost", "image": "docker.io/kubeflow/xgboost-dist-iris", **container}]}
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


# Upstream's example manifest (examples/xgboost/xgboostjob.yaml), trimmed to what matters here.
UPSTREAM_MANIFEST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "XGBoostJob",
    "metadata": {"name": "xgboost-dist-iris-test-train", "namespace": "kubeflow"},
    "spec": {
        "xgbReplicaSpecs": {
            "Master": replica(1, ports=[{"containerPort": 9991, "name": "xgboostjob-port"}]),
            "Worker": replica(2, ports=[{"containerPort": 9991, "name": "xgboostjob-port"}]),
        }
    },
}


def with_specs(specs: dict[str, Any], name: str = "xgb") -> dict[str, Any]:
    body = copy.deepcopy(UPSTREAM_MANIFEST)
    body["metadata"]["name"] = name
    body["spec"]["xgbReplicaSpecs"] = specs
    return body


def causes(body: dict[str, Any]) -> list[tuple[ErrorType, str, str]]:
    return [(e.type, e.field, e.message) for e in validate_job(body, XGBOOSTJOB)]


# -- the kind ------------------------------------------------------------------------------------------


def test_the_kind_is_registered_with_upstreams_names() -> None:
    assert KINDS["XGBoostJob"] is XGBOOSTJOB
    assert kind_for_plural("xgboostjobs") is XGBOOSTJOB
    assert framework_label("XGBoostJob") == "xgboost"
    info = XGBOOSTJOB
    assert (info.api_version, info.singular, info.short_names) == ("kubeflow.org/v1", "xgboostjob", ())
    assert (info.default_container, info.default_port_name, info.default_port) == ("xgboost", "xgboostjob-port", 9999)
    assert (info.controller_name, info.scale, info.ttl_deletion_reason) == (
        "xgboostjob-controller",
        None,
        "SuccessfulDeleteJob",
    )


# -- defaults ------------------------------------------------------------------------------------------


def test_defaults_are_never_restarts_one_replica_and_port_9999() -> None:
    raw = XGBoostJob.model_validate(with_specs({"master": replica(), "Worker": replica(restartPolicy=None)}))
    job = apply_defaults(raw, XGBOOSTJOB)

    assert list(job.replica_specs) == ["Master", "Worker"]
    for spec in job.replica_specs.values():
        assert (spec.replicas, spec.restart_policy) == (1, "Never")
        ports = spec.template.spec.containers[0].ports or []
        assert [(p.name, p.container_port) for p in ports] == [("xgboostjob-port", 9999)]
    assert job.run_policy.clean_pod_policy == "None"


def test_a_declared_xgboostjob_port_is_kept() -> None:
    job = apply_defaults(XGBoostJob.model_validate(UPSTREAM_MANIFEST), XGBOOSTJOB)

    ports = job.replica_specs["Master"].template.spec.containers[0].ports or []
    assert [(p.name, p.container_port) for p in ports] == [("xgboostjob-port", 9991)]


# -- admission -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "specs",
    [
        UPSTREAM_MANIFEST["spec"]["xgbReplicaSpecs"],
        {"Master": replica(1)},
        {"Master": replica()},
        {"Master": replica(1), "Worker": replica(5)},
        {"master": replica(1), "worker": replica(2)},
    ],
    ids=["upstream-example", "master-alone", "master-replicas-defaulted", "five-workers", "lower-case-keys"],
)
def test_valid(specs: dict[str, Any]) -> None:
    assert causes(with_specs(specs)) == []


MASTER_C = f"{SPECS}.Master.template.spec.containers"

INVALID = [
    # id, replica specs, the errors in order
    ("no-master", {"Worker": replica(2)}, [(E.REQUIRED, f"{SPECS}.Master", "Required value: must be present")]),
    ("master-replicas-2", {"Master": replica(2)}, [(E.FORBIDDEN, f"{SPECS}.Master.replicas", "Forbidden: must be 1")]),
    (
        "master-replicas-0",
        {"Master": replica(0)},
        [
            (E.FORBIDDEN, f"{SPECS}.Master.replicas", "Forbidden: must be at least 1"),
            (E.FORBIDDEN, f"{SPECS}.Master.replicas", "Forbidden: must be 1"),
        ],
    ),
    (
        "unknown-type",
        {"Master": replica(1), "PS": replica(1)},
        [(E.NOT_SUPPORTED, f"{SPECS}.PS", 'Unsupported value: "PS": supported values: "Master", "Worker"')],
    ),
    (
        "no-replica-specs",
        {},
        [
            (E.REQUIRED, SPECS, "Required value: must be required"),
            (E.REQUIRED, f"{SPECS}.Master", "Required value: must be present"),
        ],
    ),
    (
        "no-containers",
        {"Master": {"replicas": 1, "template": {"spec": {"containers": []}}}},
        [(E.REQUIRED, MASTER_C, "Required value: must be specified")],
    ),
    (
        "no-image",
        {"Master": replica(1, image="")},
        [(E.REQUIRED, f"{MASTER_C}[0].image", "Required value: must be required")],
    ),
    (
        "no-xgboost-container",
        {"Master": replica(1, name="trainer")},
        [(E.REQUIRED, MASTER_C, "Required value: must have at least one container with name xgboost")],
    ),
]


@pytest.mark.parametrize(("specs", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(specs: dict[str, Any], expected: list[tuple[ErrorType, str, str]]) -> None:
    assert causes(with_specs(specs)) == expected


def test_bad_name_and_managed_by_use_the_common_rules() -> None:
    body = with_specs({"Master": replica(1)}, name="XGB_job")
    body["spec"]["runPolicy"] = {"managedBy": "someone-else"}

    assert [(t, f) for t, f, _ in causes(body)] == [
        (E.INVALID, "metadata.name"),
        (E.NOT_SUPPORTED, "spec.runPolicy.managedBy"),
    ]


def test_the_422_names_the_kind_and_every_cause() -> None:
    errors = validate_job(with_specs({"Master": replica(3), "Chief": replica(1)}), XGBOOSTJOB)
    status = invalid_status(XGBOOSTJOB, "xgb", errors)

    assert status["code"] == 422
    assert status["message"] == (
        'XGBoostJob.kubeflow.org "xgb" is invalid: ['
        'spec.xgbReplicaSpecs.Chief: Unsupported value: "Chief": supported values: "Master", "Worker", '
        "spec.xgbReplicaSpecs.Master.replicas: Forbidden: must be 1]"
    )


# -- the CRD -------------------------------------------------------------------------------------------


def test_crd_is_upstreams_shape() -> None:
    crd = crd_for(XGBOOSTJOB)
    names = crd["spec"]["names"]
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    assert crd["metadata"]["name"] == "xgboostjobs.kubeflow.org"
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        "XGBoostJob",
        "XGBoostJobList",
        "xgboostjobs",
        "xgboostjob",
    )
    assert not names.get("shortNames")
    assert version["subresources"] == {"status": {}}  # no scale subresource, as upstream
    assert [c["name"] for c in version["additionalPrinterColumns"]] == V1_COLUMNS
    assert set(spec) == {"runPolicy", "xgbReplicaSpecs"}
