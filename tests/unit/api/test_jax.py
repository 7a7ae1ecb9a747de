"""JAXJob's API: defaults (reference §1.1, §1.2), admission (§2.1, §2.2) and its CRD.

The common rules are ``api.validation``'s and tested with PyTorchJob (``test_validation.py``);
here each is checked once with JAXJob's field paths and words, plus the kind's own: Workers only.
``runPolicy.managedBy`` is checked too, though upstream's JAXJob webhook skips it.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api.crd import crd_for
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType
from trainyard.api.kinds import KINDS, framework_label, kind_for_plural
from trainyard.api.kubeflow.jax import JAXJOB, JAXJob
from trainyard.api.validation import invalid_status, review_job, validate_job

V1_COLUMNS = ["State", "Progress", "Epoch", "Loss", "Accuracy", "ETA", "Age"]

E = ErrorType
SPECS = "spec.jaxReplicaSpecs"


def replica(replicas: int | None = None, **container: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "spec": {"containers": [{"name": "jax", "image": "docker.io/kubeflow/jaxjob-dist-spmd-mnist", **container}]}
        }
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return spec


# Upstream's example manifest (examples/jax/cpu-demo/demo.yaml), trimmed to what matters here.
UPSTREAM_MANIFEST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "JAXJob",
    "metadata": {"name": "jaxjob-simple", "namespace": "kubeflow"},
    "spec": {
        "jaxReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "restartPolicy": "OnFailure",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "jax",
                                "image": "docker.io/kubeflow/jaxjob-simple:latest",
                                "command": ["python3", "train.py"],
                                "imagePullPolicy": "Always",
                            }
                        ]
                    }
                },
            }
        }
    },
}


def with_specs(specs: dict[str, Any], name: str = "jax") -> dict[str, Any]:
    body = copy.deepcopy(UPSTREAM_MANIFEST)
    body["metadata"]["name"] = name
    body["spec"]["jaxReplicaSpecs"] = specs
    return body


def causes(body: dict[str, Any]) -> list[tuple[ErrorType, str, str]]:
    return [(e.type, e.field, e.message) for e in validate_job(body, JAXJOB)]


def test_the_kind_is_registered_with_upstreams_names() -> None:
    info = JAXJOB
    assert KINDS["JAXJob"] is info and kind_for_plural("jaxjobs") is info
    assert framework_label("JAXJob") == "jax"
    assert (info.api_version, info.singular, info.short_names) == ("kubeflow.org/v1", "jaxjob", ())
    assert (info.default_container, info.default_port_name, info.default_port) == ("jax", "jaxjob-port", 6666)
    assert (info.replica_types, info.default_restart_policy) == (("Worker",), "Never")
    assert (info.controller_name, info.ttl_deletion_reason) == ("jaxjob-controller", "SuccessfulDeletePod")


# -- defaults ------------------------------------------------------------------------------------------


def test_defaults_are_one_worker_never_restarted_on_port_6666() -> None:
    job = apply_defaults(JAXJob.model_validate(with_specs({"worker": replica()})), JAXJOB)

    assert list(job.replica_specs) == ["Worker"]
    spec = job.replica_specs["Worker"]
    assert (spec.replicas, spec.restart_policy) == (1, "Never")
    assert [(p.name, p.container_port) for p in spec.template.spec.containers[0].ports or []] == [("jaxjob-port", 6666)]
    assert job.run_policy.clean_pod_policy == "None"


def test_a_declared_jaxjob_port_is_kept_and_the_port_goes_to_the_jax_container() -> None:
    sidecar = {"name": "sidecar", "image": "busybox"}
    spec = replica(2, ports=[{"name": "jaxjob-port", "containerPort": 1234}])
    spec["template"]["spec"]["containers"].insert(0, sidecar)
    job = apply_defaults(JAXJob.model_validate(with_specs({"Worker": spec})), JAXJOB)

    side, main = job.replica_specs["Worker"].template.spec.containers
    assert side.ports is None
    assert [(p.name, p.container_port) for p in main.ports or []] == [("jaxjob-port", 1234)]


# -- admission -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "specs",
    [UPSTREAM_MANIFEST["spec"]["jaxReplicaSpecs"], {"Worker": replica()}, {"worker": replica(4)}],
    ids=["upstream-example", "replicas-defaulted", "lower-case-key"],
)
def test_valid(specs: dict[str, Any]) -> None:
    assert causes(with_specs(specs)) == []


WORKER_C = f"{SPECS}.Worker.template.spec.containers"

INVALID = [
    (
        "master",
        {"Master": replica(1), "Worker": replica(2)},
        [(E.NOT_SUPPORTED, f"{SPECS}.Master", 'Unsupported value: "Master": supported values: "Worker"')],
    ),
    (
        "chief-alone",
        {"Chief": replica(1)},
        [(E.NOT_SUPPORTED, f"{SPECS}.Chief", 'Unsupported value: "Chief": supported values: "Worker"')],
    ),
    ("no-replica-specs", {}, [(E.REQUIRED, SPECS, "Required value: must be required")]),
    (
        "no-containers",
        {"Worker": {"template": {"spec": {"containers": []}}}},
        [(E.REQUIRED, WORKER_C, "Required value: must be specified")],
    ),
    (
        "no-image",
        {"Worker": replica(image="")},
        [(E.REQUIRED, f"{WORKER_C}[0].image", "Required value: must be required")],
    ),
    (
        "no-jax-container",
        {"Worker": replica(name="trainer")},
        [(E.REQUIRED, WORKER_C, "Required value: must have at least one container with name jax")],
    ),
    (
        "zero-workers",
        {"Worker": replica(0)},
        [(E.FORBIDDEN, f"{SPECS}.Worker.replicas", "Forbidden: must be at least 1")],
    ),
]


@pytest.mark.parametrize(("specs", "expected"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid(specs: dict[str, Any], expected: list[tuple[ErrorType, str, str]]) -> None:
    assert causes(with_specs(specs)) == expected


def test_managed_by_is_checked_although_upstreams_jaxjob_webhook_skips_it() -> None:
    body = with_specs({"Worker": replica(2)}, name="Jax_job")
    body["spec"]["runPolicy"] = {"managedBy": "someone-else"}

    assert [(t, f) for t, f, _ in causes(body)] == [
        (E.INVALID, "metadata.name"),
        (E.NOT_SUPPORTED, "spec.runPolicy.managedBy"),
    ]

    before = with_specs({"Worker": replica(2)})
    after = copy.deepcopy(before)
    after["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    review = review_job(after, JAXJOB, before)
    assert [(e.field, e.message) for e in review.errors] == [
        ("spec.runPolicy.managedBy", 'Invalid value: "kueue.x-k8s.io/multikueue": field is immutable')
    ]


def test_the_422_names_the_kind_and_every_cause() -> None:
    errors = validate_job(with_specs({"Master": replica(1), "Worker": replica(image="")}), JAXJOB)
    status = invalid_status(JAXJOB, "jax", errors)

    assert status["code"] == 422
    assert status["message"] == (
        'JAXJob.kubeflow.org "jax" is invalid: ['
        'spec.jaxReplicaSpecs.Master: Unsupported value: "Master": supported values: "Worker", '
        "spec.jaxReplicaSpecs.Worker.template.spec.containers[0].image: Required value: must be required]"
    )


# -- the CRD -------------------------------------------------------------------------------------------


def test_crd_is_upstreams_shape_with_a_scale_subresource_on_workers() -> None:
    crd = crd_for(JAXJOB)
    names = crd["spec"]["names"]
    version = crd["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]

    assert crd["metadata"]["name"] == "jaxjobs.kubeflow.org"
    assert (names["kind"], names["listKind"], names["plural"], names["singular"]) == (
        "JAXJob",
        "JAXJobList",
        "jaxjobs",
        "jaxjob",
    )
    assert not names.get("shortNames")
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.jaxReplicaSpecs.Worker.replicas",
        "statusReplicasPath": ".status.replicaStatuses.Worker.active",
        "labelSelectorPath": ".status.replicaStatuses.Worker.selector",
    }
    assert [c["name"] for c in version["additionalPrinterColumns"]] == V1_COLUMNS
    assert set(spec) == {"runPolicy", "jaxReplicaSpecs"}
