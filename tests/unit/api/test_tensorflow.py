"""TFJob's API: defaults (reference §1.1, §1.2), admission (§2.1, §2.2) and its CRD.

The common rules are ``api.validation``'s and tested with PyTorchJob (``test_validation.py``);
here each is checked once more with TFJob's field paths and words, plus the kind's own: at most
one Chief or Master, ``successPolicy`` one of upstream's two, and (unlike upstream's TFJob
webhook, which checks no type) a replica type TFJob does not have refused.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.crd import crd_for
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType
from trainyard.api.kinds import KINDS, framework_label, kind_for_plural
from trainyard.api.kubeflow.tensorflow import TFJOB, TFJob
from trainyard.api.validation import invalid_status, validate_job

V1_COLUMNS = ["State", "Progress", "Epoch", "Loss", "Accuracy", "ETA", "Age"]

E = ErrorType
SPECS = "spec.tfReplicaSpecs"


def replica(replicas: int | None = None, **container: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "template": {
            "spec": {"containers": [{"name": "tensorflow", "image": "kubeflow/tf-dist-mnist-test", **container}]}
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


# Upstream's example manifest (examples/tensorflow/dist-mnist/tf_job_mnist.yaml).
UPSTREAM_MANIFEST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "dist-mnist-for-e2e-test"},
    "spec": {"tfReplicaSpecs": {"Chief": replica(1), "PS": replica(1), "Worker": replica(2)}},
}


def with_specs(specs: dict[str, Any], name: str = "mnist", **spec: Any) -> dict[str, Any]:
    body = copy.deepcopy(UPSTREAM_MANIFEST)
    body["metadata"]["name"] = name
    body["spec"] = {"tfReplicaSpecs": specs, **spec}
    return body


def causes(body: dict[str, Any]) -> list[tuple[ErrorType, str, str]]:
    return [(e.type, e.field, e.message) for e in validate_job(body, TFJOB)]


# -- the kind ------------------------------------------------------------------------------------------


def test_the_kind_is_registered_with_upstreams_names() -> None:
    assert KINDS["TFJob"] is TFJOB
    assert kind_for_plural("tfjobs") is TFJOB
    assert framework_label("TFJob") == "tensorflow"
    info = TFJOB
    assert (info.api_version, info.singular, info.short_names) == ("kubeflow.org/v1", "tfjob", ())
    assert info.replica_types == ("Chief", "Evaluator", "Master", "PS", "Worker")
    assert (info.default_container, info.default_port_name, info.default_port) == ("tensorflow", "tfjob-port", 2222)
    assert (info.default_restart_policy, info.controller_name) == ("Never", "tfjob-controller")
    assert (info.scale, info.ttl_deletion_reason) == (None, "SuccessfulDeleteJob")


# -- defaults ------------------------------------------------------------------------------------------


def test_defaults_are_never_restarts_one_replica_port_2222_and_the_default_success_policy() -> None:
    unset = replica()
    del unset["restartPolicy"]
    raw = TFJob.model_validate(with_specs({"chief": replica(), "ps": unset, "WORKER": replica()}))
    job = apply_defaults(raw, TFJOB)

    # keys are renamed to upstream's spelling, whatever their case
    assert list(job.replica_specs) == ["Chief", "PS", "Worker"]
    for spec in job.replica_specs.values():
        assert (spec.replicas, spec.restart_policy) == (1, "Never")
        ports = spec.template.spec.containers[0].ports or []
        assert [(p.name, p.container_port) for p in ports] == [("tfjob-port", 2222)]
    assert job.spec.success_policy == ""
    assert job.spec.enable_dynamic_worker is None
    assert job.run_policy.clean_pod_policy == "None"
    # defaults are applied to a copy, never written back
    assert raw.spec.success_policy is None


def test_a_declared_success_policy_and_tfjob_port_are_kept() -> None:
    body = with_specs({"Worker": replica(2, ports=[{"name": "tfjob-port", "containerPort": 2223}])})
    body["spec"]["successPolicy"] = "AllWorkers"
    job = apply_defaults(TFJob.model_validate(body), TFJOB)

    assert job.spec.success_policy == "AllWorkers"
    ports = job.replica_specs["Worker"].template.spec.containers[0].ports or []
    assert [(p.name, p.container_port) for p in ports] == [("tfjob-port", 2223)]


def test_the_port_goes_to_the_tensorflow_container_or_else_the_first() -> None:
    sidecar = {"name": "sidecar", "image": "busybox"}
    named = {"Worker": {"template": {"spec": {"containers": [sidecar, {"name": "tensorflow", "image": "tf"}]}}}}
    unnamed = {"Worker": {"template": {"spec": {"containers": [{"name": "main", "image": "tf"}, sidecar]}}}}

    for specs, target in ((named, 1), (unnamed, 0)):
        containers = apply_defaults(TFJob.model_validate(with_specs(specs)), TFJOB).replica_specs["Worker"]
        ports = [[p.name for p in c.ports or []] for c in containers.template.spec.containers]
        assert ports[target] == ["tfjob-port"] and ports[1 - target] == [], ports


# -- admission -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("specs", "spec"),
    [
        (UPSTREAM_MANIFEST["spec"]["tfReplicaSpecs"], {}),
        ({"Worker": replica()}, {}),
        ({"Master": replica(1), "PS": replica(2), "Worker": replica(4), "Evaluator": replica(1)}, {}),
        ({"chief": replica(1), "worker": replica(2), "evaluator": replica(1)}, {}),
        ({"Worker": replica(3)}, {"successPolicy": "AllWorkers"}),
        ({"Worker": replica(3)}, {"successPolicy": ""}),
        ({"PS": replica(1), "Worker": replica(3)}, {"enableDynamicWorker": True}),
    ],
    ids=[
        "upstream-example",
        "one-worker",
        "master-ps-workers-evaluator",
        "lower-case-keys",
        "all-workers",
        "default-policy-spelt-out",
        "dynamic-workers",
    ],
)
def test_valid(specs: dict[str, Any], spec: dict[str, Any]) -> None:
    assert causes(with_specs(specs, **spec)) == []


CHIEF_C = f"{SPECS}.Chief.template.spec.containers"
LEADERS = (E.FORBIDDEN, SPECS, "Forbidden: must not have more than 1 Chief or Master role")

INVALID = [
    # id, replica specs, other spec fields, the errors in order
    ("chief-and-master", {"Chief": replica(1), "Master": replica(1), "Worker": replica(1)}, {}, [LEADERS]),
    ("chief-and-master-any-case", {"chief": replica(1), "MASTER": replica(1)}, {}, [LEADERS]),
    (
        "chief-twice",
        {"Chief": replica(1), "chief": replica(1)},
        {},
        [(E.DUPLICATE, f"{SPECS}.chief", 'Duplicate value: "chief" is the same replica type as "Chief"')],
    ),
    (
        "unknown-type",
        {"Chief": replica(1), "Workers": replica(2)},
        {},
        [
            (
                E.NOT_SUPPORTED,
                f"{SPECS}.Workers",
                'Unsupported value: "Workers": supported values: "Chief", "Evaluator", "Master", "PS", "Worker"',
            )
        ],
    ),
    (
        "unknown-success-policy",
        {"Worker": replica(2)},
        {"successPolicy": "AllWorker"},
        [(E.NOT_SUPPORTED, "spec.successPolicy", 'Unsupported value: "AllWorker": supported values: "", "AllWorkers"')],
    ),
    ("no-replica-specs", {}, {}, [(E.REQUIRED, SPECS, "Required value: must be required")]),
    (
        "no-containers",
        {"Chief": {"replicas": 1, "template": {"spec": {"containers": []}}}},
        {},
        [(E.REQUIRED, CHIEF_C, "Required value: must be specified")],
    ),
    (
        "no-image",
        {"Chief": replica(1, image="")},
        {},
        [(E.REQUIRED, f"{CHIEF_C}[0].image", "Required value: must be required")],
    ),
    (
        "no-tensorflow-container",
        {"Chief": replica(1, name="trainer")},
        {},
        [(E.REQUIRED, CHIEF_C, "Required value: must have at least one container with name tensorflow")],
    ),
    (
        "no-replicas",
        {"Worker": replica(0)},
        {},
        [(E.FORBIDDEN, f"{SPECS}.Worker.replicas", "Forbidden: must be at least 1")],
    ),
]


@pytest.mark.parametrize(("specs", "spec", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(specs: dict[str, Any], spec: dict[str, Any], expected: list[tuple[ErrorType, str, str]]) -> None:
    assert causes(with_specs(specs, **spec)) == expected


def test_bad_name_and_managed_by_use_the_common_rules() -> None:
    body = with_specs({"Worker": replica(1)}, name="TF_job")
    body["spec"]["runPolicy"] = {"managedBy": "someone-else"}

    assert [(t, f) for t, f, _ in causes(body)] == [
        (E.INVALID, "metadata.name"),
        (E.NOT_SUPPORTED, "spec.runPolicy.managedBy"),
    ]


def test_the_422_names_the_kind_and_every_cause() -> None:
    errors = validate_job(with_specs({"Chief": replica(1), "Master": replica(1), "Launcher": replica(1)}), TFJOB)
    status = invalid_status(TFJOB, "mnist", errors)

    assert status["code"] == 422
    assert status["message"] == (
        'TFJob.kubeflow.org "mnist" is invalid: ['
        'spec.tfReplicaSpecs.Launcher: Unsupported value: "Launcher": supported values: '
        '"Chief", "Evaluator", "Master", "PS", "Worker", '
        "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role]"
    )
    assert [c["field"] for c in status["details"]["causes"]] == ["spec.tfReplicaSpecs.Launcher", "spec.tfReplicaSpecs"]


# -- the CRD -------------------------------------------------------------------------------------------


def test_crd_is_upstreams_shape() -> None:
    crd = crd_for(TFJOB)
    names = crd["spec"]["names"]
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    assert crd["metadata"]["name"] == "tfjobs.kubeflow.org"
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        "TFJob",
        "TFJobList",
        "tfjobs",
        "tfjob",
    )
    assert not names.get("shortNames")
    assert version["subresources"] == {"status": {}}  # no scale subresource, as upstream
    assert [c["name"] for c in version["additionalPrinterColumns"]] == V1_COLUMNS
    assert set(spec) == {"runPolicy", "tfReplicaSpecs", "successPolicy", "enableDynamicWorker"}
    assert spec["successPolicy"]["type"] == "string"
    assert spec["enableDynamicWorker"]["type"] == "boolean"
