"""Indexed completion in the Job controller: one pod per index, completed indexes, the pods' identity."""

from __future__ import annotations

from typing import Any

import pytest
from test_decisions import at, ended, job, kinds, pod

from trainyard.cluster.clients.jobs import decisions
from trainyard.cluster.clients.jobs.controller import pod_for
from trainyard.cluster.clients.jobs.decisions import reconcile


def indexed(status: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return job(status, completionMode="Indexed", **{"completions": 3, "parallelism": 3, **spec})


def at_index(p: dict[str, Any], index: int) -> dict[str, Any]:
    p["metadata"]["annotations"] = {decisions.COMPLETION_INDEX: str(index)}
    return p


@pytest.mark.parametrize(
    ("text", "indexes"),
    [("", set()), ("0", {0}), ("0-2,4", {0, 1, 2, 4}), ("1,3-5,7", {1, 3, 4, 5, 7})],
)
def test_completed_indexes_round_trip(text: str, indexes: set[int]) -> None:
    assert decisions.parse_indexes(text) == indexes
    assert decisions.format_indexes(indexes) == text


def test_a_new_indexed_job_creates_one_pod_per_index() -> None:
    plan = reconcile(indexed(), [], at(0))
    assert list(plan.create_indexes) == [0, 1, 2] and plan.create == 3


def test_parallelism_bounds_the_indexes_started_lowest_first() -> None:
    running = [at_index(pod("a"), 0)]
    plan = reconcile(indexed({"startTime": "x"}, completions=4, parallelism=2), running, at(1))
    assert list(plan.create_indexes) == [1]


def test_a_failed_index_is_recreated_and_a_succeeded_one_is_not() -> None:
    pods = [at_index(ended("a", "Succeeded", 1), 0), at_index(ended("b", "Failed", 1), 1), at_index(pod("c"), 2)]
    plan = reconcile(indexed({"startTime": "x"}), pods, at(100))
    assert list(plan.create_indexes) == [1]
    assert plan.status is not None and plan.status["completedIndexes"] == "0"


def test_the_job_completes_when_every_index_succeeded() -> None:
    pods = [at_index(ended(n, "Succeeded", 1), i) for i, n in enumerate("abc")]
    first = reconcile(indexed({"startTime": "x"}), pods, at(2))
    assert first.create == 0 and first.status is not None
    assert first.status["completedIndexes"] == "0-2"
    assert kinds(first.status)[-1] == ("SuccessCriteriaMet", "True", "CompletionsReached")
    untracked = [at_index(ended(n, "Succeeded", 1, tracked=False), i) for i, n in enumerate("abc")]
    second = reconcile(indexed(first.status), untracked, at(3))
    assert second.status is not None
    assert ("Complete", "True", "CompletionsReached") in kinds(second.status)
    assert second.status["succeeded"] == 3


def test_a_duplicate_index_is_released() -> None:
    pods = [at_index(pod("a"), 0), at_index(pod("b"), 0)]
    plan = reconcile(indexed({"startTime": "x"}, completions=1, parallelism=1), pods, at(1))
    assert list(plan.release) == ["b"] and plan.create == 0


def test_an_indexed_pod_gets_its_hostname_index_label_annotation_and_env() -> None:
    owner = indexed()
    owner["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    made = pod_for(owner, 2)
    assert made["metadata"]["generateName"] == "j-2-"
    assert made["metadata"]["labels"][decisions.COMPLETION_INDEX] == "2"
    assert made["metadata"]["annotations"][decisions.COMPLETION_INDEX] == "2"
    assert made["spec"]["hostname"] == "j-2"
    env = made["spec"]["containers"][0]["env"]
    assert env[0]["name"] == "JOB_COMPLETION_INDEX" and env[1] == {"name": "A", "value": "1"}
    # the Job's own template is left as it was
    assert "hostname" not in owner["spec"]["template"]["spec"]
    assert pod_for(owner)["metadata"]["generateName"] == "j-"
