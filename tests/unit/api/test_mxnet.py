"""MXJob's API as Training Operator v1.7 served it: names, defaults, the CRD's required ``jobMode``, and
admission (v1.7 had no webhook; the common rules refuse what its controller only logged).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.crd import crd_for, openapi_schema
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType
from trainyard.api.kinds import KINDS, framework_label, kind_for_plural
from trainyard.api.kubeflow.mxnet import MXJOB, MXJob
from trainyard.api.validation import validate_job
from trainyard.cluster.server.apiserver.writes import schema

V1_COLUMNS = ["State", "Progress", "Epoch", "Loss", "Accuracy", "ETA", "Age"]

E = ErrorType
SPECS = "spec.mxReplicaSpecs"
TYPES = ("Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner")


def replica(replicas: int | None = 1, **container: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "template": {"spec": {"containers": [{"name": "mxnet", "image": "mxjob/mxnet:gpu", **container}]}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


# v1.7's examples/mxnet/mxjob_dist_v1.yaml, trimmed to what matters here.
TRAIN: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MXJob",
    "metadata": {"name": "mxnet-job"},
    "spec": {
        "jobMode": "MXTrain",
        "mxReplicaSpecs": {
            "Scheduler": replica(ports=[{"containerPort": 9991, "name": "mxjob-port"}]),
            "Server": replica(ports=[{"containerPort": 9991, "name": "mxjob-port"}]),
            "Worker": replica(command=["python"], ports=[{"containerPort": 9991, "name": "mxjob-port"}]),
        },
    },
}

# v1.7's examples/mxnet/tune/mx_job_tune_gpu_v1.yaml, without the stray ``label`` field its CRD prunes.
TUNE: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MXJob",
    "metadata": {"name": "auto-tuning-job"},
    "spec": {
        "jobMode": "MXTune",
        "mxReplicaSpecs": {t: replica(image="mxjob/auto-tuning:gpu") for t in ("TunerTracker", "TunerServer", "Tuner")},
    },
}


def with_specs(specs: dict[str, Any], mode: str | None = "MXTrain") -> dict[str, Any]:
    body = copy.deepcopy(TRAIN)
    body["spec"]["mxReplicaSpecs"] = specs
    if mode is None:
        del body["spec"]["jobMode"]
    else:
        body["spec"]["jobMode"] = mode
    return body


def causes(body: dict[str, Any]) -> list[tuple[ErrorType, str, str]]:
    return [(e.type, e.field, e.message) for e in validate_job(body, MXJOB)]


def test_the_kind_is_registered_with_v1_7s_names() -> None:
    info = MXJOB
    assert KINDS["MXJob"] is info and kind_for_plural("mxjobs") is info
    assert framework_label("MXJob") == "mxnet"
    assert (info.api_version, info.singular, info.short_names) == ("kubeflow.org/v1", "mxjob", ())
    assert (info.default_container, info.default_port_name, info.default_port) == ("mxnet", "mxjob-port", 9091)
    assert (info.replica_types, info.default_restart_policy) == (TYPES, "Never")
    assert (info.controller_name, info.scale, info.ttl_deletion_reason) == (
        "mxjob-controller",
        None,
        "SuccessfulDeletePod",
    )


# -- defaults ------------------------------------------------------------------------------------------


def test_defaults_are_one_replica_never_restarted_on_port_9091_and_no_job_mode() -> None:
    body = with_specs({"scheduler": replica(None), "Server": replica(None, restartPolicy=None)}, mode=None)
    job = apply_defaults(MXJob.model_validate(body), MXJOB)

    assert list(job.replica_specs) == ["Scheduler", "Server"]
    for spec in job.replica_specs.values():
        assert (spec.replicas, spec.restart_policy) == (1, "Never")
        ports = spec.template.spec.containers[0].ports or []
        assert [(p.name, p.container_port) for p in ports] == [("mxjob-port", 9091)]
    assert job.run_policy.clean_pod_policy == "None"
    assert job.spec.job_mode == ""  # v1.7 defaults nothing here: its CRD requires the field instead


def test_a_declared_mxjob_port_is_kept() -> None:
    job = apply_defaults(MXJob.model_validate(TRAIN), MXJOB)

    ports = job.replica_specs["Worker"].template.spec.containers[0].ports or []
    assert [(p.name, p.container_port) for p in ports] == [("mxjob-port", 9991)]


# -- the CRD: jobMode is required ----------------------------------------------------------------------


def test_the_api_server_refuses_a_job_without_job_mode_as_v1_7s_crd_did() -> None:
    crd_schema = openapi_schema(MXJOB)

    assert crd_schema["properties"]["spec"]["required"] == ["jobMode"]
    assert schema.validate(with_specs(TRAIN["spec"]["mxReplicaSpecs"], mode=None), crd_schema) == [
        ("FieldValueRequired", "spec.jobMode", "Required value")
    ]


@pytest.mark.parametrize("mode", ["MXTrain", "MXTune", "anything"])
def test_any_job_mode_string_is_accepted_as_v1_7_did(mode: str) -> None:
    body = with_specs(TRAIN["spec"]["mxReplicaSpecs"], mode=mode)

    assert schema.validate(body, openapi_schema(MXJOB)) == []
    assert causes(body) == []


def test_crd_is_v1_7s_shape() -> None:
    crd = crd_for(MXJOB)
    names = crd["spec"]["names"]
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    assert crd["metadata"]["name"] == "mxjobs.kubeflow.org"
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        "MXJob",
        "MXJobList",
        "mxjobs",
        "mxjob",
    )
    assert not names.get("shortNames")
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == V1_COLUMNS
    assert set(spec) == {"runPolicy", "jobMode", "mxReplicaSpecs"}


# -- admission -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        TRAIN,
        TUNE,
        with_specs({"Worker": replica()}),
        with_specs({"scheduler": replica(), "server": replica(2), "worker": replica(4)}),
    ],
    ids=["v1.7-train-example", "v1.7-tune-example", "single-worker", "lower-case-keys"],
)
def test_valid(body: dict[str, Any]) -> None:
    assert causes(body) == []


SCHEDULER_C = f"{SPECS}.Scheduler.template.spec.containers"
SUPPORTED = 'supported values: "Scheduler", "Server", "Worker", "TunerTracker", "TunerServer", "Tuner"'

# v1.7's controller said "MXJobSpec is not valid" in an event for each of these, and ran nothing.
INVALID = [
    ("no-replica-specs", {}, [(E.REQUIRED, SPECS, "Required value: must be required")]),
    (
        "no-containers",
        {"Scheduler": {"template": {"spec": {"containers": []}}}},
        [(E.REQUIRED, SCHEDULER_C, "Required value: must be specified")],
    ),
    (
        "no-image",
        {"Scheduler": replica(image="")},
        [(E.REQUIRED, f"{SCHEDULER_C}[0].image", "Required value: must be required")],
    ),
    (
        "no-mxnet-container",
        {"Scheduler": replica(name="ps")},
        [(E.REQUIRED, SCHEDULER_C, "Required value: must have at least one container with name mxnet")],
    ),
    # v1.7 let an unknown type through (it made pods nobody's rules read); refused here
    ("unknown-type", {"PS": replica()}, [(E.NOT_SUPPORTED, f"{SPECS}.PS", f'Unsupported value: "PS": {SUPPORTED}')]),
    (
        "two-schedulers-by-case",
        {"Scheduler": replica(), "scheduler": replica()},
        [(E.DUPLICATE, f"{SPECS}.scheduler", 'Duplicate value: "scheduler" is the same replica type as "Scheduler"')],
    ),
]


@pytest.mark.parametrize(("specs", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(specs: dict[str, Any], expected: list[tuple[ErrorType, str, str]]) -> None:
    assert causes(with_specs(specs)) == expected


def test_a_bad_name_is_refused_with_its_path() -> None:
    body = with_specs({"Worker": replica()})
    body["metadata"]["name"] = "MX_job"

    assert [(t, f) for t, f, _ in causes(body)] == [(E.INVALID, "metadata.name")]
