"""Admission rules only an update has: upstream's CRD transition rule on the scheduling queue.

``spec.runPolicy.schedulingPolicy.queue`` carries the CEL rule ``self == oldSelf`` (reference
§1.2); as any CEL transition rule it is checked only when the queue exists before and after.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from trainyard.api import PYTORCHJOB
from trainyard.api.field_errors import ErrorType, FieldError
from trainyard.api.validation import validate_job_update

JOB: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "gang", "namespace": "default"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {"template": {"spec": {"containers": [{"name": "pytorch", "image": "python:3.11"}]}}},
        }
    },
}
QUEUE_ERROR = FieldError(
    ErrorType.INVALID,
    "spec.runPolicy.schedulingPolicy.queue",
    '"string": spec.runPolicy.schedulingPolicy.queue is immutable',
)


def with_policy(policy: dict[str, Any] | None) -> dict[str, Any]:
    body = copy.deepcopy(JOB)
    if policy is not None:
        body["spec"]["runPolicy"] = {"schedulingPolicy": policy}
    return body


CASES = [
    ("unchanged", {"queue": "a"}, {"queue": "a"}, []),
    ("changed", {"queue": "a"}, {"queue": "b"}, [QUEUE_ERROR]),
    ("changed-with-other-fields", {"queue": "a", "minAvailable": 1}, {"queue": "b", "minAvailable": 2}, [QUEUE_ERROR]),
    ("set-later", {"minAvailable": 1}, {"queue": "b"}, []),
    ("policy-added", None, {"queue": "b"}, []),
    ("removed", {"queue": "a"}, {"minAvailable": 1}, []),
    ("other-fields-change", {"minAvailable": 1}, {"minAvailable": 2}, []),
]


@pytest.mark.parametrize(("old", "new", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_queue_is_immutable_once_set(
    old: dict[str, Any] | None, new: dict[str, Any] | None, expected: list[FieldError]
) -> None:
    assert validate_job_update(with_policy(old), with_policy(new), PYTORCHJOB) == expected


def test_the_error_reads_as_the_api_server_words_a_cel_failure() -> None:
    assert str(QUEUE_ERROR) == (
        'spec.runPolicy.schedulingPolicy.queue: Invalid value: "string": spec.runPolicy.schedulingPolicy.queue '
        "is immutable"
    )


def test_a_new_body_that_does_not_parse_is_left_to_validate_job() -> None:
    broken = with_policy({"queue": 7})

    assert validate_job_update(with_policy({"queue": "a"}), broken, PYTORCHJOB) == []
