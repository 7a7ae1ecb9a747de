"""Seed 004's per-job series: what each job shape shows, counted once, gone after retention or deletion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import Status
from prometheus_client.parser import text_string_to_metric_families

from trainyard.api import jobshapes
from trainyard.api.families import sample
from trainyard.api.meta import format_time
from trainyard.operator.metrics import OperatorMetrics

T0 = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def cond(ctype: str, at: datetime, reason: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": "True", "reason": reason, "lastTransitionTime": format_time(at)}


def v1_job(
    name: str = "bert",
    *,
    conditions: list[dict[str, Any]] | None = None,
    progress: dict[str, Any] | None = None,
    created: datetime = T0,
    uid: str = "uid-bert",
    gpus: str | None = "2",
    owner: str | None = None,
    **status: Any,
) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": gpus} if gpus else {}
    worker = {"containers": [{"name": "pytorch", "resources": {"limits": limits}}, {"name": "sidecar"}]}
    metadata: dict[str, Any] = {"name": name, "namespace": "ml", "uid": uid, "creationTimestamp": format_time(created)}
    if owner:
        metadata["ownerReferences"] = [{"kind": "TrainingJob", "name": name, "uid": owner, "controller": True}]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": metadata,
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [{"name": "pytorch"}]}}},
                "Worker": {"replicas": 3, "template": {"spec": worker}},
            }
        },
        "status": {"conditions": conditions or [], **({"trainingProgress": progress} if progress else {}), **status},
    }


def seed_job(state: str = "Running", *, uid: str = "uid-tj", created: datetime = T0, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ml.example.com/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "bert", "namespace": "ml", "uid": uid, "creationTimestamp": format_time(created)},
        "spec": {"model": "bert-base", "dataset": "squad", "numWorkers": 4, "gpusPerWorker": 2},
        "status": {"state": state, **status},
    }


def trainjob(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "llm", "namespace": "ml", "uid": "uid-llm", "creationTimestamp": format_time(T0)},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}},
        },
        "status": status,
    }


def families(metrics: OperatorMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The exposition as Prometheus parses it: sample name → (labels, value)."""
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


def value(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


JOB = {"namespace": "ml", "training_job": "bert", "kind": "PyTorchJob"}
RUNNING = [cond("Created", T0), cond("Running", T0 + timedelta(seconds=5))]


# -- the shapes ----------------------------------------------------------------------------------


def test_a_v1_job_shows_progress_metrics_and_its_replicas_gpus() -> None:
    job = v1_job(
        conditions=RUNNING,
        progress={"progressPercentage": 45, "currentEpoch": 2, "metrics": {"loss": 0.45, "accuracy": "0.89"}},
        startTime=format_time(T0 + timedelta(seconds=3)),
    )
    got = sample(job)
    assert got == jobshapes.JobSample(
        state="Running",
        progress=45.0,
        epoch=2.0,
        loss=0.45,
        accuracy=0.89,
        workers=4,
        gpus=6.0,  # 3 workers x 2 GPUs, the Master none
        started=T0 + timedelta(seconds=3),
    )


@pytest.mark.parametrize(
    ("conditions", "state"),
    [
        ([], "Pending"),
        ([cond("Created", T0)], "Pending"),
        (RUNNING, "Running"),
        ([cond("Created", T0), cond("Restarting", T0)], "Restarting"),
        ([cond("Created", T0), cond("Suspended", T0)], "Suspended"),
        ([cond("Created", T0), cond("Succeeded", T0)], "Completed"),
        ([cond("Created", T0), cond("Running", T0), cond("Failed", T0, "BackoffLimitExceeded")], "Failed"),
    ],
)
def test_v1_conditions_read_as_seed_states(conditions: list[dict[str, Any]], state: str) -> None:
    got = sample(v1_job(conditions=conditions))
    assert got is not None and got.state == state


def test_a_failed_v1_job_ends_at_completion_time_with_its_condition_reason() -> None:
    end = T0 + timedelta(minutes=3)
    job = v1_job(conditions=[cond("Failed", T0, "DeadlineExceeded")], completionTime=format_time(end))
    got = sample(job)
    assert got is not None and (got.finished, got.failure_reason) == (end, "DeadlineExceeded")


def test_a_trainjob_shows_trainer_status_and_num_nodes() -> None:
    job = trainjob(
        state="Running",
        trainerStatus={
            "progressPercentage": 30,
            "metrics": [
                {"name": "loss", "value": "0.25"},
                {"name": "epoch", "value": "3"},
                {"name": "note", "value": "warmup"},
            ],
        },
    )
    assert sample(job) == jobshapes.JobSample(state="Running", progress=30.0, epoch=3.0, loss=0.25, workers=2, gpus=8.0)
    done = sample(trainjob(state="Complete", conditions=[cond("Complete", T0)]))
    assert done is not None and (done.state, done.finished) == ("Completed", T0)


def test_a_trainjob_without_num_nodes_leaves_its_size_unsaid() -> None:
    job = trainjob(state="Pending")
    del job["spec"]["trainer"]
    got = sample(job)
    assert got is not None and (got.workers, got.gpus) == (None, None)


def test_the_seeds_trainingjob_shows_its_flat_status() -> None:
    job = seed_job(
        "Running", progress="45%", currentEpoch=2, metrics={"loss": 0.45, "accuracy": 0.89}, startTime=format_time(T0)
    )
    assert sample(job) == jobshapes.JobSample(
        state="Running", progress=45.0, epoch=2.0, loss=0.45, accuracy=0.89, workers=4, gpus=8.0, started=T0
    )
    failed = sample(seed_job("Failed", failureReason="OOMKilled", completionTime=format_time(T0)))
    assert failed is not None and (failed.failure_reason, failed.finished) == ("OOMKilled", T0)
    # free text in a status does not become a label value
    prose = sample(seed_job("Failed", failureReason="worker 3 ran out of memory"))
    assert prose is not None and prose.failure_reason == "Unknown"
    assert sample(seed_job("it is running")) == jobshapes.JobSample(state="Pending", workers=4, gpus=8.0)


def test_objects_of_no_known_shape_are_not_jobs() -> None:
    metrics = OperatorMetrics(clock=Clock(T0))
    for obj in ({"kind": "ConfigMap", "metadata": {"name": "x"}, "data": {}}, {"spec": {"replicas": 2}}):
        assert sample(obj) is None
        metrics.observe_job(obj, T0)
    assert "trainingjob_total" not in families(metrics)


# -- the series ----------------------------------------------------------------------------------


def test_a_running_job_is_exposed_with_bounded_labels_and_parses() -> None:
    clock = Clock(T0 + timedelta(seconds=90))
    metrics = OperatorMetrics(clock=clock, started=T0 - timedelta(hours=1))
    job = v1_job(
        conditions=RUNNING,
        progress={"progressPercentage": 45, "currentEpoch": 2, "metrics": {"loss": 0.45, "accuracy": 0.89}},
        startTime=format_time(T0 + timedelta(seconds=30)),
    )
    metrics.observe_job(job, clock.now)
    found = families(metrics)
    expected = {
        "trainingjob_progress_percent": 45.0,
        "trainingjob_current_epoch": 2.0,
        "trainingjob_loss": 0.45,
        "trainingjob_accuracy": 0.89,
        "trainingjob_allocated_workers": 4.0,
        "trainingjob_allocated_gpus": 6.0,
    }
    for name, want in expected.items():
        assert found[name] == [(JOB, want)], name
    assert found["trainingjob_duration_seconds"] == [({**JOB, "state": "Running"}, 60.0)]
    assert found["trainingjob_total"] == [({"namespace": "ml", "state": "Running"}, 1.0)]
    assert found["trainingjob_created_total"] == [({"namespace": "ml"}, 1.0)]
    assert "trainingjob_gpu_utilization_percent" not in found
    clock.now += timedelta(seconds=30)  # a running job's duration is live
    assert value(metrics, "trainingjob_duration_seconds", **JOB, state="Running") == 90.0


def test_a_finished_job_counts_once_and_its_series_go_after_retention() -> None:
    clock = Clock(T0)
    metrics = OperatorMetrics(clock=clock, started=T0 - timedelta(seconds=1), retention=timedelta(minutes=10))
    metrics.observe_job(v1_job(conditions=RUNNING, startTime=format_time(T0)), clock.now)
    end = T0 + timedelta(minutes=2)
    done = v1_job(
        conditions=[cond("Created", T0), cond("Succeeded", end)],
        progress={"progressPercentage": 100, "currentEpoch": 10},
        startTime=format_time(T0),
        completionTime=format_time(end),
    )
    clock.now = end + timedelta(seconds=5)
    for _ in range(3):  # every later reconcile observes it again
        metrics.observe_job(done, clock.now)
    assert value(metrics, "trainingjob_created_total", namespace="ml") == 1
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="succeeded") == 1
    assert value(metrics, "trainingjob_failed_total", namespace="ml", reason="Unknown") is None
    # the state moved: one duration series, frozen at the end; a finished job holds nothing
    found = families(metrics)
    assert found["trainingjob_duration_seconds"] == [({**JOB, "state": "Completed"}, 120.0)]
    assert found["trainingjob_allocated_workers"] == [(JOB, 0.0)]
    assert found["trainingjob_progress_percent"] == [(JOB, 100.0)]

    clock.now = end + timedelta(minutes=10) - timedelta(seconds=1)
    assert value(metrics, "trainingjob_progress_percent", **JOB) == 100.0
    clock.now = end + timedelta(minutes=10)
    found = families(metrics)
    assert all(labels.get("training_job") != "bert" for samples in found.values() for labels, _ in samples)
    # it still exists: counted by state, and seen again it neither comes back nor counts again
    assert found["trainingjob_total"] == [({"namespace": "ml", "state": "Completed"}, 1.0)]
    metrics.observe_job(done, clock.now)
    assert value(metrics, "trainingjob_progress_percent", **JOB) is None
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="succeeded") == 1


def test_a_failed_job_counts_its_reason() -> None:
    metrics = OperatorMetrics(clock=Clock(T0), started=T0 - timedelta(seconds=1))
    metrics.observe_job(v1_job(conditions=RUNNING), T0)
    metrics.observe_job(v1_job(conditions=[cond("Failed", T0, "BackoffLimitExceeded")]), T0)
    assert value(metrics, "trainingjob_failed_total", namespace="ml", reason="BackoffLimitExceeded") == 1
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="failed") == 1


def test_forgetting_a_deleted_job_drops_its_series_at_once() -> None:
    metrics = OperatorMetrics(clock=Clock(T0))
    metrics.observe_job(v1_job(conditions=RUNNING, progress={"progressPercentage": 5}), T0)
    metrics.observe_job(v1_job("other", uid="uid-other", conditions=RUNNING), T0)
    metrics.forget_job("PyTorchJob", "ml", "bert")
    assert value(metrics, "trainingjob_progress_percent", **JOB) is None
    assert value(metrics, "trainingjob_total", namespace="ml", state="Running") == 1
    metrics.forget_job("PyTorchJob", "ml", "never-seen")  # a key never observed: nothing to do


def test_a_job_made_again_under_the_same_name_is_a_new_job() -> None:
    metrics = OperatorMetrics(clock=Clock(T0), started=T0)
    metrics.observe_job(v1_job(conditions=RUNNING), T0)
    metrics.observe_job(v1_job(conditions=RUNNING, uid="uid-bert-2"), T0)
    assert value(metrics, "trainingjob_created_total", namespace="ml") == 2
    assert value(metrics, "trainingjob_total", namespace="ml", state="Running") == 1


# -- an operator restart --------------------------------------------------------------------------


def test_a_restarted_operator_does_not_count_what_its_predecessor_saw() -> None:
    restart = T0 + timedelta(hours=1)
    metrics = OperatorMetrics(clock=Clock(restart), started=restart)
    # created and reconciled before the restart; one still running, one finished before
    metrics.observe_job(v1_job("running", uid="u1", conditions=RUNNING), restart)
    ended = [cond("Created", T0), cond("Succeeded", T0 + timedelta(minutes=5))]
    metrics.observe_job(v1_job("ended", uid="u2", conditions=ended), restart)
    assert value(metrics, "trainingjob_created_total", namespace="ml") is None
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="succeeded") is None
    # a finished job found at start shows no per-job series (it ended long ago)
    ended_job = {"namespace": "ml", "training_job": "ended", "kind": "PyTorchJob"}
    assert value(metrics, "trainingjob_allocated_workers", **ended_job) is None
    # the running one finishes under this operator: counted
    later = restart + timedelta(minutes=1)
    metrics.observe_job(v1_job("running", uid="u1", conditions=[cond("Succeeded", later)]), later)
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="succeeded") == 1
    # created while no operator ran, first reconciled by this one: counted
    metrics.observe_job(v1_job("late", uid="u3", created=T0, conditions=[cond("Created", restart)]), later)
    assert value(metrics, "trainingjob_created_total", namespace="ml") == 1


def test_a_job_ending_in_the_first_reconcile_after_a_restart_counts() -> None:
    restart = T0 + timedelta(hours=1)
    metrics = OperatorMetrics(clock=Clock(restart), started=restart)
    end = restart + timedelta(seconds=2)
    metrics.observe_job(v1_job(conditions=[cond("Created", T0), cond("Succeeded", end)]), end)
    assert value(metrics, "trainingjob_created_total", namespace="ml") is None
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="succeeded") == 1


# -- a TrainingJob and the job it compiles to --------------------------------------------------------


@pytest.mark.parametrize("owner_first", [True, False])
def test_a_controlled_job_counts_once_under_its_controller(owner_first: bool) -> None:
    metrics = OperatorMetrics(clock=Clock(T0), started=T0)
    owner = seed_job("Running", progress="45%")
    owned = v1_job(conditions=RUNNING, uid="uid-owned", owner="uid-tj")
    for job in (owner, owned) if owner_first else (owned, owner):
        metrics.observe_job(job, T0)
    assert value(metrics, "trainingjob_created_total", namespace="ml") == 1
    assert value(metrics, "trainingjob_total", namespace="ml", state="Running") == 1
    # both keep their series, told apart by kind
    assert value(metrics, "trainingjob_allocated_workers", namespace="ml", training_job="bert", kind="TrainingJob") == 4
    assert value(metrics, "trainingjob_allocated_workers", **JOB) == 4
    done = v1_job(conditions=[cond("Succeeded", T0)], uid="uid-owned", owner="uid-tj")
    for job in (done, seed_job("Completed", conditions=[cond("Completed", T0)])):
        metrics.observe_job(job, T0)
    assert value(metrics, "trainingjob_completed_total", namespace="ml", result="succeeded") == 1
    assert value(metrics, "trainingjob_total", namespace="ml", state="Completed") == 1


# -- per-job reconciles ---------------------------------------------------------------------------


def test_reconciles_are_counted_per_observed_job_beside_the_controllers() -> None:
    metrics = OperatorMetrics(clock=Clock(T0))
    metrics.watch_queue("pytorchjob-controller", lambda: 0, kind="PyTorchJob")
    metrics.reconciled("pytorchjob-controller", 0.02, "success", ("ml", "bert"))  # not observed yet
    metrics.observe_job(v1_job(conditions=RUNNING), T0)
    metrics.reconciled("pytorchjob-controller", 0.03, "success", ("ml", "bert"))
    conflict = ApiError(status=Status(code=409, reason="Conflict", message="changed"))
    metrics.reconciled("pytorchjob-controller", 0.2, "error", ("ml", "bert"), conflict)
    metrics.reconciled("pytorchjob-controller", 0.1, "error", ("ml", "bert"), RuntimeError("x"))
    assert value(metrics, "trainingjob_reconciliation_total", **JOB, result="success") == 1
    assert value(metrics, "trainingjob_reconciliation_total", **JOB, result="error") == 2
    assert value(metrics, "trainingjob_reconciliation_errors_total", **JOB, error_type="Conflict") == 1
    assert value(metrics, "trainingjob_reconciliation_errors_total", **JOB, error_type="RuntimeError") == 1
    assert value(metrics, "trainingjob_reconciliation_duration_seconds_count", **JOB) == 3
    assert value(metrics, "trainingjob_reconciliation_duration_seconds_bucket", **JOB, le="0.05") == 1
    assert value(metrics, "trainingjob_reconciliation_duration_seconds_sum", **JOB) == pytest.approx(0.33)
    # the controller's own series count all four
    controller = {"controller": "pytorchjob-controller"}
    assert value(metrics, "controller_runtime_reconcile_total", **controller, result="success") == 2
