"""PriorityClass validation and the Priority admission plugin's resolution of a pod's priority."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.builtin import priority

HIGH = {"metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "PreemptLowerPriority"}
DEFAULT = {"metadata": {"name": "batch"}, "value": 10, "globalDefault": True, "preemptionPolicy": "Never"}


def new_pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}], **spec}}


def test_a_named_class_sets_priority_and_preemption_policy() -> None:
    pod = new_pod(priorityClassName="high")
    priority.admit_pod(pod, [HIGH, DEFAULT])
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000, "PreemptLowerPriority")


def test_the_global_default_applies_to_pods_without_a_class() -> None:
    pod = new_pod()
    priority.admit_pod(pod, [HIGH, DEFAULT])
    assert pod["spec"]["priorityClassName"] == "batch"
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (10, "Never")


def test_without_a_default_priority_is_zero() -> None:
    pod = new_pod()
    priority.admit_pod(pod, [HIGH])
    assert "priorityClassName" not in pod["spec"]
    assert pod["spec"]["priority"] == 0


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param({"priorityClassName": "nope"}, 'pods "p" is forbidden: no PriorityClass with name nope was found'),
        pytest.param(
            {"priorityClassName": "high", "priority": 5},
            'pods "p" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority '
            "admission controller computed 1000 from the given PriorityClass name",
        ),
    ],
)
def test_refusals_are_403_in_kube_words(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(errors.ApiError) as caught:
        priority.admit_pod(new_pod(**spec), [HIGH])
    assert (caught.value.code, caught.value.reason, caught.value.message) == (403, "Forbidden", message)


def test_an_update_without_the_admitted_fields_keeps_them() -> None:
    old = {"containers": [], "priority": 1000, "preemptionPolicy": "Never"}
    new: dict[str, Any] = {"containers": []}
    priority.keep_on_update(old, new)
    assert (new["priority"], new["preemptionPolicy"]) == (1000, "Never")


def test_the_same_priority_given_explicitly_is_accepted() -> None:
    pod = new_pod(priorityClassName="high", priority=1000)
    priority.admit_pod(pod, [HIGH])
    assert pod["spec"]["priority"] == 1000


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        pytest.param({"metadata": {"name": "x"}}, "value", id="value-required"),
        pytest.param({"metadata": {"name": "x"}, "value": 2_000_000_000}, "value", id="too-high"),
        pytest.param({"metadata": {"name": "system-mine"}, "value": 1}, "metadata.name", id="system-prefix"),
        pytest.param({"metadata": {"name": "x"}, "value": 1, "preemptionPolicy": "Sometimes"}, "preemptionPolicy"),
    ],
)
def test_validation(obj: dict[str, Any], field: str) -> None:
    assert [c[1] for c in priority.validate(obj)] == [field]


def test_the_system_classes_are_valid_and_values_are_immutable() -> None:
    assert all(priority.validate(dict(c)) == [] for c in priority.SYSTEM_CLASSES)
    changed = priority.update_forbidden(HIGH, {**HIGH, "value": 1})
    assert [c[1] for c in changed] == ["value"]


def test_only_one_global_default() -> None:
    second = {"metadata": {"name": "other"}, "value": 1, "globalDefault": True}
    refused = priority.second_default(second, [HIGH, DEFAULT])
    assert refused is not None and refused.code == 403
    assert "PriorityClass batch is already marked as default. Only one default can exist" in refused.message
    assert priority.second_default(DEFAULT, [HIGH, DEFAULT]) is None
