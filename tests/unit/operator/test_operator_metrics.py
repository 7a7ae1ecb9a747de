"""The job counters move once per condition a written status turned True (reference §11)."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.operator.metrics import OperatorMetrics


def status(*true: str, false: tuple[str, ...] = ()) -> dict[str, Any]:
    conditions = [{"type": t, "status": "True"} for t in true] + [{"type": t, "status": "False"} for t in false]
    return {"conditions": conditions}


def value(metrics: OperatorMetrics, name: str, namespace: str = "ns", framework: str = "pytorch") -> float:
    got = metrics.registry.get_sample_value(name, {"job_namespace": namespace, "framework": framework})
    return got or 0.0


CREATED = "training_operator_jobs_created_total"
SUCCESSFUL = "training_operator_jobs_successful_total"
FAILED = "training_operator_jobs_failed_total"
RESTARTED = "training_operator_jobs_restarted_total"
DELETED = "training_operator_jobs_deleted_total"


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # first write of a new job
        (None, status("Created"), {CREATED: 1}),
        ({}, status("Created"), {CREATED: 1}),
        # an operator restart re-writes an existing job's status: nothing new became True
        (status("Created", "Running"), status("Created", "Running"), {}),
        (status("Created"), status("Created", "Running"), {}),
        (status("Created", "Running"), status("Created", "Succeeded", false=("Running",)), {SUCCESSFUL: 1}),
        # every path to Failed counts (upstream counts only replica failures)
        (status("Created", "Running"), status("Created", "Failed", false=("Running",)), {FAILED: 1}),
        (status("Created"), status("Created", "Restarting"), {RESTARTED: 1}),
        # still restarting: the same restart is not counted again
        (status("Created", "Restarting"), status("Created", "Restarting"), {}),
        # a second restart after running again is a new event
        (status("Created", "Running"), status("Created", "Restarting"), {RESTARTED: 1}),
        # a condition going from False to True is a transition too
        (status("Created", false=("Restarting",)), status("Created", "Restarting"), {RESTARTED: 1}),
        # conditions the counters do not track
        (status("Created"), status("Created", "Suspended"), {}),
        # one write that creates and finishes at once counts both
        (None, status("Created", "Succeeded"), {CREATED: 1, SUCCESSFUL: 1}),
    ],
)
def test_status_writes_count_condition_transitions(
    before: dict[str, Any] | None, after: dict[str, Any], expected: dict[str, float]
) -> None:
    metrics = OperatorMetrics()
    metrics.status_written("PyTorchJob", "ns", before, after)
    for name in (CREATED, SUCCESSFUL, FAILED, RESTARTED, DELETED):
        assert value(metrics, name) == expected.get(name, 0.0), name


@pytest.mark.parametrize(
    ("kind", "framework"),
    [
        ("PyTorchJob", "pytorch"),
        ("TFJob", "tensorflow"),
        ("MPIJob", "mpi"),
        ("XGBoostJob", "xgboost"),
        ("PaddleJob", "paddle"),
        ("JAXJob", "jax"),
    ],
)
def test_framework_label_is_upstreams(kind: str, framework: str) -> None:
    metrics = OperatorMetrics()
    metrics.status_written(kind, "team-a", None, status("Created"))
    metrics.job_deleted(kind, "team-a")
    assert value(metrics, CREATED, "team-a", framework) == 1
    assert value(metrics, DELETED, "team-a", framework) == 1


def test_each_operator_has_its_own_registry_and_exposition() -> None:
    first, second = OperatorMetrics(), OperatorMetrics()
    first.status_written("PyTorchJob", "ns", None, status("Created"))
    first.watch_queue("pytorchjob-controller", lambda: 7)
    first.reconciled("pytorchjob-controller", 0.2, "error")
    first.leading("lease", True)
    text = first.exposition().decode()
    assert 'training_operator_jobs_created_total{framework="pytorch",job_namespace="ns"} 1.0' in text
    assert 'workqueue_depth{name="pytorchjob-controller"} 7.0' in text
    assert 'controller_runtime_reconcile_errors_total{controller="pytorchjob-controller"} 1.0' in text
    assert 'leader_election_master_status{name="lease"} 1.0' in text
    assert "_created " not in text and "jobs_created_created" not in text  # no _created series, as Go
    assert value(second, CREATED) == 0
