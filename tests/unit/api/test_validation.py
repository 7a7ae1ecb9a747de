"""Admission validation of PyTorchJob manifests: every error at once, each with its field path.

Rules are upstream's validating webhook (reference §2), with trainyard's two documented fixes: a
missing ``Master.replicas`` is accepted, and names whose pods would not fit 63 characters are
rejected up front.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from trainyard.api import PYTORCHJOB
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.kinds import KINDS
from trainyard.api.validation import invalid_status, review_job, validate_job

E = ErrorType
SPECS = "spec.pytorchReplicaSpecs"

# As in the Kubeflow docs: no explicit Master replicas, upstream field spellings, extra pod fields.
UPSTREAM_MANIFEST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "pytorch-simple", "namespace": "kubeflow"},
    "spec": {
        "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3, "ttlSecondsAfterFinished": 600},
        "pytorchReplicaSpecs": {
            "Master": {
                "restartPolicy": "OnFailure",
                "template": {
                    "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "pytorch",
                                "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                                "imagePullPolicy": "Always",
                                "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                                "resources": {"limits": {"nvidia.com/gpu": 1}},
                            }
                        ]
                    },
                },
            },
            "Worker": {
                "replicas": 2,
                "restartPolicy": "OnFailure",
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "pytorch",
                                "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                                "command": ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                    }
                },
            },
        },
    },
}

ELASTIC_MANIFEST: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "elastic-example-imagenet"},
    "spec": {
        "elasticPolicy": {"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 2, "maxRestarts": 100},
        "nprocPerNode": "4",
        "pytorchReplicaSpecs": {
            "Worker": {
                "replicas": 2,
                "restartPolicy": "OnFailure",
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "kubeflow/pytorch-elastic:v1"}]}},
            }
        },
    },
}


def errors(body: dict[str, Any]) -> list[FieldError]:
    return validate_job(body, PYTORCHJOB)


def causes(body: dict[str, Any]) -> set[tuple[ErrorType, str]]:
    return {(e.type, e.field) for e in errors(body)}


def edited(base: dict[str, Any], *edits: tuple[str, Any]) -> dict[str, Any]:
    """A copy of ``base`` with each dotted path set (``None`` deletes); ``containers.0`` indexes."""
    body = copy.deepcopy(base)
    for path, value in edits:
        *parents, last = path.split(".")
        node: Any = body
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
        key: Any = int(last) if isinstance(node, list) else last
        if value is None:
            del node[key]
        else:
            node[key] = value
    return body


MASTER = "spec.pytorchReplicaSpecs.Master"
WORKER = "spec.pytorchReplicaSpecs.Worker"
MASTER_C0 = f"{MASTER}.template.spec.containers.0"


@pytest.mark.parametrize("body", [UPSTREAM_MANIFEST, ELASTIC_MANIFEST], ids=["upstream-simple", "upstream-elastic"])
def test_valid_upstream_manifest_has_no_errors(body: dict[str, Any]) -> None:
    assert errors(body) == []


@pytest.mark.parametrize(
    "edits",
    [
        [(f"{MASTER}.replicas", 1)],
        [("metadata.name", None), ("metadata.generateName", "pytorch-")],
        [("spec.runPolicy.managedBy", "kubeflow.org/training-operator")],
        [("spec.runPolicy.managedBy", "kueue.x-k8s.io/multikueue")],
        [("spec.runPolicy.managedBy", "trainyard.dev/operator")],
        [(f"{WORKER}.restartPolicy", "ExitCode")],
        [("spec.runPolicy.backoffLimit", 0)],
        [("metadata.name", "a" * 54)],
    ],
    ids=[
        "explicit-master-1",
        "generateName",
        "managedBy-training-operator",
        "managedBy-multikueue",
        "managedBy-trainyard",
        "ExitCode",
        "backoffLimit-0",
        "name-fits-with-worker-1",
    ],
)
def test_also_valid(edits: list[tuple[str, Any]]) -> None:
    assert errors(edited(UPSTREAM_MANIFEST, *edits)) == []


ONE_ERROR = [
    # id, edits, error type, field, words in the message
    ("master-replicas-2", [(f"{MASTER}.replicas", 2)], E.FORBIDDEN, f"{MASTER}.replicas", "must be 1"),
    (
        "unknown-replica-type",
        [
            (
                "spec.pytorchReplicaSpecs.Chief",
                {"template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}},
            )
        ],
        E.NOT_SUPPORTED,
        f"{SPECS}.Chief",
        '"Chief": supported values: "Master", "Worker"',
    ),
    ("missing-image", [(f"{MASTER_C0}.image", None)], E.REQUIRED, f"{MASTER}.template.spec.containers[0].image", ""),
    ("empty-image", [(f"{MASTER_C0}.image", "")], E.REQUIRED, f"{MASTER}.template.spec.containers[0].image", ""),
    (
        "no-pytorch-container",
        [(f"{MASTER_C0}.name", "trainer")],
        E.REQUIRED,
        f"{MASTER}.template.spec.containers",
        "container with name pytorch",
    ),
    (
        "no-containers",
        [(f"{MASTER}.template.spec.containers", [])],
        E.REQUIRED,
        f"{MASTER}.template.spec.containers",
        "must be specified",
    ),
    ("no-replica-specs", [("spec.pytorchReplicaSpecs", {})], E.REQUIRED, SPECS, ""),
    ("worker-replicas-0", [(f"{WORKER}.replicas", 0)], E.FORBIDDEN, f"{WORKER}.replicas", "at least 1"),
    (
        "bad-restart-policy",
        [(f"{WORKER}.restartPolicy", "Sometimes")],
        E.NOT_SUPPORTED,
        f"{WORKER}.restartPolicy",
        '"Sometimes"',
    ),
    ("upper-case-name", [("metadata.name", "PyTorch-Simple")], E.INVALID, "metadata.name", "should match: a DNS-1035"),
    ("name-starts-with-digit", [("metadata.name", "1job")], E.INVALID, "metadata.name", "DNS-1035"),
    ("name-ends-with-dash", [("metadata.name", "job-")], E.INVALID, "metadata.name", "DNS-1035"),
    ("name-with-underscore", [("metadata.name", "my_job")], E.INVALID, "metadata.name", "DNS-1035"),
    ("name-with-dot", [("metadata.name", "my.job")], E.INVALID, "metadata.name", "DNS-1035"),
    ("name-over-63", [("metadata.name", "a" * 64)], E.INVALID, "metadata.name", "must be no more than 63 characters"),
    ("pod-name-over-63", [("metadata.name", "a" * 55)], E.INVALID, "metadata.name", "would exceed 63 characters"),
    (
        "pod-name-over-63-with-10-workers",
        [("metadata.name", "a" * 54), (f"{WORKER}.replicas", 11)],
        E.INVALID,
        "metadata.name",
        "-worker-10",
    ),
    ("negative-backoffLimit", [("spec.runPolicy.backoffLimit", -1)], E.INVALID, "spec.runPolicy.backoffLimit", "-1"),
    (
        "negative-activeDeadlineSeconds",
        [("spec.runPolicy.activeDeadlineSeconds", -5)],
        E.INVALID,
        "spec.runPolicy.activeDeadlineSeconds",
        "",
    ),
    (
        "negative-ttlSecondsAfterFinished",
        [("spec.runPolicy.ttlSecondsAfterFinished", -1)],
        E.INVALID,
        "spec.runPolicy.ttlSecondsAfterFinished",
        "",
    ),
    (
        "bad-managedBy",
        [("spec.runPolicy.managedBy", "example.com/other")],
        E.NOT_SUPPORTED,
        "spec.runPolicy.managedBy",
        '"example.com/other"',
    ),
    (
        "duplicate-replica-type",
        [
            (
                "spec.pytorchReplicaSpecs.worker",
                {"template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}},
            )
        ],
        E.DUPLICATE,
        "spec.pytorchReplicaSpecs.worker",
        '"Worker"',
    ),
]


@pytest.mark.parametrize(
    ("edits", "etype", "field", "words"), [c[1:] for c in ONE_ERROR], ids=[c[0] for c in ONE_ERROR]
)
def test_one_error(edits: list[tuple[str, Any]], etype: ErrorType, field: str, words: str) -> None:
    found = errors(edited(UPSTREAM_MANIFEST, *edits))

    assert [(e.type, e.field) for e in found] == [(etype, field)]
    assert words in found[0].message


ELASTIC_ERRORS = [
    (
        "elastic-without-worker",
        edited(UPSTREAM_MANIFEST, ("spec.pytorchReplicaSpecs.Worker", None), ("spec.elasticPolicy", {})),
        (E.REQUIRED, WORKER),
        "must be configured if elastic policy is used",
    ),
    (
        "both-nproc-fields",
        edited(ELASTIC_MANIFEST, ("spec.elasticPolicy.nProcPerNode", 2)),
        (E.FORBIDDEN, "spec.elasticPolicy.nProcPerNode"),
        "must not be used with spec.nprocPerNode",
    ),
]


@pytest.mark.parametrize(
    ("body", "cause", "words"), [c[1:] for c in ELASTIC_ERRORS], ids=[c[0] for c in ELASTIC_ERRORS]
)
def test_elastic_policy_errors(body: dict[str, Any], cause: tuple[ErrorType, str], words: str) -> None:
    found = errors(body)

    assert [(e.type, e.field) for e in found] == [cause]
    assert words in found[0].message


def test_every_error_is_reported_at_once() -> None:
    body = edited(
        UPSTREAM_MANIFEST,
        (f"{MASTER}.replicas", 2),
        (f"{MASTER_C0}.name", "trainer"),
        (f"{WORKER}.template.spec.containers.0.image", None),
        ("spec.pytorchReplicaSpecs.Chief", {"template": {"spec": {"containers": [{"name": "pytorch", "image": "i"}]}}}),
        ("spec.runPolicy.backoffLimit", -1),
        ("spec.runPolicy.managedBy", "someone-else"),
        ("metadata.name", "Bad_Name"),
    )

    assert causes(body) == {
        (E.FORBIDDEN, f"{MASTER}.replicas"),
        (E.REQUIRED, f"{MASTER}.template.spec.containers"),
        (E.REQUIRED, f"{WORKER}.template.spec.containers[0].image"),
        (E.NOT_SUPPORTED, f"{SPECS}.Chief"),
        (E.INVALID, "spec.runPolicy.backoffLimit"),
        (E.NOT_SUPPORTED, "spec.runPolicy.managedBy"),
        (E.INVALID, "metadata.name"),
    }
    assert len(errors(body)) == 7


def test_field_error_reads_like_a_kubernetes_status_cause() -> None:
    (found,) = errors(edited(UPSTREAM_MANIFEST, (f"{MASTER}.replicas", 2)))

    assert found.type.value == "FieldValueForbidden"
    assert found.message == "Forbidden: must be 1"
    assert str(found) == f"{MASTER}.replicas: Forbidden: must be 1"


TYPE_ERRORS = [
    # id, edits, field paths with a type error
    ("replicas-two", [(f"{WORKER}.replicas", "two")], [f"{WORKER}.replicas"]),
    ("replicas-fraction", [(f"{WORKER}.replicas", 1.5)], [f"{WORKER}.replicas"]),
    ("backoffLimit-word", [("spec.runPolicy.backoffLimit", "many")], ["spec.runPolicy.backoffLimit"]),
    ("cleanPodPolicy-unknown", [("spec.runPolicy.cleanPodPolicy", "Sometimes")], ["spec.runPolicy.cleanPodPolicy"]),
    (
        "containers-not-a-list",
        [(f"{WORKER}.template.spec.containers", "pytorch")],
        [f"{WORKER}.template.spec.containers"],
    ),
    ("replica-specs-not-a-map", [(SPECS, ["Worker"])], [SPECS]),
    (
        "container-port-word",
        [(f"{MASTER_C0}.ports", [{"containerPort": "http"}])],
        [f"{MASTER}.template.spec.containers[0].ports[0].containerPort"],
    ),
    (
        "two-type-errors-at-once",
        [(f"{WORKER}.replicas", "two"), ("spec.runPolicy.backoffLimit", "many")],
        [f"{WORKER}.replicas", "spec.runPolicy.backoffLimit"],
    ),
    # A Kubernetes API server rejects a string or a boolean where the CRD schema says integer or
    # boolean; admission must not quietly coerce them.
    ("replicas-numeric-string", [(f"{WORKER}.replicas", "2")], [f"{WORKER}.replicas"]),
    ("suspend-string", [("spec.runPolicy.suspend", "true")], ["spec.runPolicy.suspend"]),
]


@pytest.mark.parametrize(("edits", "fields"), [c[1:] for c in TYPE_ERRORS], ids=[c[0] for c in TYPE_ERRORS])
def test_type_errors_are_field_errors(edits: list[tuple[str, Any]], fields: list[str]) -> None:
    found = errors(edited(UPSTREAM_MANIFEST, *edits))

    assert sorted(e.field for e in found) == sorted(fields)
    assert {e.type for e in found} == {E.TYPE_INVALID}
    assert all(e.message.startswith("Invalid value: ") for e in found)


# -- upstream's exact wording --------------------------------------------------------------------------

DNS1035 = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

NAME_MESSAGES = [
    # id, name, the whole message (field.Invalid of ``should match: <IsDNS1035Label errors joined by ,>``)
    ("bad-characters", "Bad_Name", f'Invalid value: "Bad_Name": should match: {DNS1035}'),
    ("too-long", "a" * 64, f'Invalid value: "{"a" * 64}": should match: must be no more than 63 characters'),
    (
        "too-long-and-bad",
        "A" * 64,
        f'Invalid value: "{"A" * 64}": should match: must be no more than 63 characters,{DNS1035}',
    ),
]


@pytest.mark.parametrize(("name", "message"), [c[1:] for c in NAME_MESSAGES], ids=[c[0] for c in NAME_MESSAGES])
def test_name_message_is_upstreams(name: str, message: str) -> None:
    (found,) = errors(edited(UPSTREAM_MANIFEST, ("metadata.name", name)))

    assert (found.type, found.field, found.message) == (E.INVALID, "metadata.name", message)


UPSTREAM_MESSAGES = [
    # id, edits, str() of the one error, as kubectl prints the cause
    ("master-replicas", [(f"{MASTER}.replicas", 3)], f"{MASTER}.replicas: Forbidden: must be 1"),
    (
        "image",
        [(f"{MASTER_C0}.image", "")],
        f"{MASTER}.template.spec.containers[0].image: Required value: must be required",
    ),
    (
        "container-name",
        [(f"{MASTER_C0}.name", "main")],
        f"{MASTER}.template.spec.containers: Required value: must have at least one container with name pytorch",
    ),
    (
        "managedBy",
        [("spec.runPolicy.managedBy", "x")],
        'spec.runPolicy.managedBy: Unsupported value: "x": supported values: "kubeflow.org/training-operator", '
        '"kueue.x-k8s.io/multikueue", "trainyard.dev/operator"',
    ),
    ("no-specs", [(SPECS, {})], f"{SPECS}: Required value: must be required"),
]


@pytest.mark.parametrize(("edits", "text"), [c[1:] for c in UPSTREAM_MESSAGES], ids=[c[0] for c in UPSTREAM_MESSAGES])
def test_messages_read_as_upstreams(edits: list[tuple[str, Any]], text: str) -> None:
    assert [str(e) for e in errors(edited(UPSTREAM_MANIFEST, *edits))] == [text]


# -- warnings -------------------------------------------------------------------------------------------

DEPRECATED = "spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"

WARNINGS = [
    # id, body, warnings, error fields
    (
        "deprecated-nProcPerNode",
        edited(ELASTIC_MANIFEST, ("spec.nprocPerNode", None), ("spec.elasticPolicy.nProcPerNode", 4)),
        [DEPRECATED],
        [],
    ),
    (
        "deprecated-with-nprocPerNode-also-forbidden",
        edited(ELASTIC_MANIFEST, ("spec.elasticPolicy.nProcPerNode", 4)),
        [DEPRECATED],
        ["spec.elasticPolicy.nProcPerNode"],
    ),
    (
        "deprecated-even-when-the-job-is-invalid",
        edited(
            ELASTIC_MANIFEST, ("spec.elasticPolicy.nProcPerNode", 4), ("spec.pytorchReplicaSpecs.Worker.replicas", "x")
        ),
        [DEPRECATED],
        ["spec.pytorchReplicaSpecs.Worker.replicas"],
    ),
    ("nprocPerNode-only", ELASTIC_MANIFEST, [], []),
    ("no-elastic-policy", UPSTREAM_MANIFEST, [], []),
    (
        "elastic-nProcPerNode-null",
        edited(
            ELASTIC_MANIFEST,
            ("spec.elasticPolicy", {**ELASTIC_MANIFEST["spec"]["elasticPolicy"], "nProcPerNode": None}),
        ),
        [],
        [],
    ),
]


@pytest.mark.parametrize(("body", "warnings", "fields"), [c[1:] for c in WARNINGS], ids=[c[0] for c in WARNINGS])
def test_warnings(body: dict[str, Any], warnings: list[str], fields: list[str]) -> None:
    review = review_job(body, PYTORCHJOB)

    assert review.warnings == warnings
    assert [e.field for e in review.errors] == fields
    assert review.allowed is (not fields)


# -- updates ---------------------------------------------------------------------------------------------

MANAGED = "spec.runPolicy.managedBy"
UPDATES = [
    # id, managedBy before, managedBy after (None: absent), the error message or None
    ("unchanged-absent", None, None, None),
    ("unchanged-set", "kueue.x-k8s.io/multikueue", "kueue.x-k8s.io/multikueue", None),
    (
        "changed",
        "kueue.x-k8s.io/multikueue",
        "kubeflow.org/training-operator",
        'Invalid value: "kubeflow.org/training-operator": field is immutable',
    ),
    ("set-later", None, "kueue.x-k8s.io/multikueue", 'Invalid value: "kueue.x-k8s.io/multikueue": field is immutable'),
    ("removed", "kubeflow.org/training-operator", None, 'Invalid value: "null": field is immutable'),
]


@pytest.mark.parametrize(("before", "after", "message"), [c[1:] for c in UPDATES], ids=[c[0] for c in UPDATES])
def test_managed_by_is_immutable(before: str | None, after: str | None, message: str | None) -> None:
    old = edited(UPSTREAM_MANIFEST, (MANAGED, before)) if before else UPSTREAM_MANIFEST
    new = (
        edited(UPSTREAM_MANIFEST, (MANAGED, after), (f"{WORKER}.replicas", 5))
        if after
        else edited(UPSTREAM_MANIFEST, (f"{WORKER}.replicas", 5))
    )

    review = review_job(new, PYTORCHJOB, old)

    expected = [] if message is None else [(E.INVALID, MANAGED, message)]
    assert [(e.type, e.field, e.message) for e in review.errors] == expected


def test_an_update_is_validated_whole() -> None:
    new = edited(UPSTREAM_MANIFEST, (f"{WORKER}.replicas", 0))

    review = review_job(new, PYTORCHJOB, UPSTREAM_MANIFEST)

    assert [(e.type, e.field) for e in review.errors] == [(E.FORBIDDEN, f"{WORKER}.replicas")]


# -- the Status a denied write gets ------------------------------------------------------------------------


def test_invalid_status_is_a_422_with_causes() -> None:
    found = errors(edited(UPSTREAM_MANIFEST, (f"{MASTER}.replicas", 2), (f"{MASTER_C0}.image", "")))

    status = invalid_status(PYTORCHJOB, "pytorch-simple", found)

    assert status["code"] == 422 and status["reason"] == "Invalid" and status["status"] == "Failure"
    assert status["kind"] == "Status" and status["apiVersion"] == "v1"
    assert status["message"] == (
        'PyTorchJob.kubeflow.org "pytorch-simple" is invalid: ['
        f"{MASTER}.template.spec.containers[0].image: Required value: must be required, "
        f"{MASTER}.replicas: Forbidden: must be 1]"
    )
    assert status["details"]["kind"] == "PyTorchJob" and status["details"]["group"] == "kubeflow.org"
    assert status["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: must be required",
            "field": f"{MASTER}.template.spec.containers[0].image",
        },
        {"reason": "FieldValueForbidden", "message": "Forbidden: must be 1", "field": f"{MASTER}.replicas"},
    ]


def test_invalid_status_with_one_error_has_no_brackets() -> None:
    found = errors(edited(UPSTREAM_MANIFEST, (f"{MASTER}.replicas", 2)))

    status = invalid_status(PYTORCHJOB, "j", found)

    assert status["message"] == f'PyTorchJob.kubeflow.org "j" is invalid: {MASTER}.replicas: Forbidden: must be 1'


# -- runPolicy.earlyStopping (trainyard's success policy) ---------------------------------------------

STOPPING = "spec.runPolicy.earlyStopping"
EARLY_STOPPING_ERRORS = [
    ("metric-empty", {"metric": "", "target": 1}, E.INVALID, f"{STOPPING}.metric", "must not be empty"),
    ("mode-unknown", {"mode": "up", "target": 1}, E.NOT_SUPPORTED, f"{STOPPING}.mode", '"max", "min"'),
    ("patience-0", {"patience": 0}, E.INVALID, f"{STOPPING}.patience", "must be >= 1"),
    ("minDelta-negative", {"patience": 2, "minDelta": -0.1}, E.INVALID, f"{STOPPING}.minDelta", "must be >= 0"),
    ("nothing-to-stop-on", {"metric": "accuracy"}, E.REQUIRED, STOPPING, "must set target, patience or both"),
    ("target-a-string", {"target": "0.9"}, E.TYPE_INVALID, f"{STOPPING}.target", ""),
]


@pytest.mark.parametrize(
    ("policy", "etype", "field", "words"),
    [c[1:] for c in EARLY_STOPPING_ERRORS],
    ids=[c[0] for c in EARLY_STOPPING_ERRORS],
)
def test_early_stopping_errors(policy: dict[str, Any], etype: ErrorType, field: str, words: str) -> None:
    found = errors(edited(UPSTREAM_MANIFEST, (STOPPING, policy)))
    assert [(e.type, e.field) for e in found] == [(etype, field)]
    assert words in found[0].message


@pytest.mark.parametrize(
    "policy",
    [
        {"target": 0.95},
        {"patience": 5},
        {"metric": "val_loss", "mode": "min", "target": 0.1, "patience": 3, "minDelta": 0},
    ],
)
def test_early_stopping_valid(policy: dict[str, Any]) -> None:
    assert errors(edited(UPSTREAM_MANIFEST, (STOPPING, policy))) == []


def _mpijob(early_stopping: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "runPolicy": {"earlyStopping": early_stopping},
            "mpiReplicaSpecs": {
                "Launcher": {"template": {"spec": {"containers": [{"name": "l", "image": "i"}]}}},
                "Worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}}},
            },
        },
    }


def test_early_stopping_is_checked_for_an_mpijob_too() -> None:
    assert validate_job(_mpijob({"target": 0.9}), KINDS["MPIJob"]) == []
    found = validate_job(_mpijob({"patience": 0}), KINDS["MPIJob"])
    assert [(e.type, e.field) for e in found] == [(E.INVALID, f"{STOPPING}.patience")]


def test_early_stopping_is_refused_where_the_kind_reports_no_progress() -> None:
    silent = dataclasses.replace(KINDS["MPIJob"], training_progress=False)
    found = validate_job(_mpijob({"target": 0.9}), silent)
    assert [(e.type, e.field) for e in found] == [(E.FORBIDDEN, STOPPING)]
