"""Training progress as ``yard`` shows it: each status shape read the same way, and its text in
``yard get`` columns, ``describe``'s Training section and the progress line of ``run``/``wait``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from trainyard.api import replicaspecs as replica_specs
from trainyard.api import training
from trainyard.api.trainer import family as trainjobs
from trainyard.api.training import Best, Checkpoint, Training
from trainyard.cli.describe import print_training
from trainyard.cli.progress import progress_line
from trainyard.cli.tables import job_columns, job_headers, job_row
from trainyard.sdk.kinds import builtin_kinds, resolve

Obj = dict[str, Any]
REPLICA_JOBS = replica_specs.VIEW
TRAINJOBS = trainjobs.VIEW
NOW = datetime(2026, 1, 1, 0, 10, 0, tzinfo=UTC)
PYTORCHJOB = resolve("pytorchjobs", builtin_kinds())[0]
TRAINJOB = resolve("trainjobs", builtin_kinds())[0]

# status.trainingProgress of a kubeflow.org/v1 job, as the contract's example.
V1_PROGRESS: Obj = {
    "progressPercentage": 45,
    "progress": "45%",
    "currentEpoch": 2,
    "totalEpochs": 10,
    "currentStep": 1200,
    "totalSteps": 5000,
    "metrics": {"loss": 0.45123, "accuracy": 0.8919},
    "estimatedRemainingSeconds": 190,
    "lastCheckpoint": {"path": "/ckpt/checkpoint-epoch-2.pt", "epoch": 2, "time": "2026-01-01T00:07:00Z"},
    "best": {"metric": "accuracy", "value": 0.91, "epoch": 2},
    "lastUpdateTime": "2026-01-01T00:09:48Z",
}
# status.trainerStatus of a TrainJob, upstream's shape: metric values are strings.
TRAINER_STATUS: Obj = {
    "progressPercentage": 40,
    "estimatedRemainingSeconds": 3725,
    "metrics": [{"name": "loss", "value": "0.25"}, {"name": "epoch", "value": "3"}, {"name": "lr", "value": "1e-05"}],
    "lastUpdatedTime": "2026-01-01T00:09:00Z",
}
# Seed 004's TrainingJob status, flat.
SEED_STATUS: Obj = {
    "state": "Running",
    "progress": "45%",
    "currentEpoch": 2,
    "totalEpochs": 10,
    "metrics": {"loss": 0.45, "accuracy": 0.89},
    "checkpoint": {"path": "s3://ckpt/bert/checkpoint-epoch-2", "epoch": 2},
}


def v1_job(progress: Obj | None = None, *conditions: str) -> Obj:
    status: Obj = {"conditions": [{"type": c, "status": "True"} for c in conditions]}
    if progress is not None:
        status["trainingProgress"] = progress
    return {
        "metadata": {"name": "ddp", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}},
        "status": status,
    }


def trainjob(trainer_status: Obj | None = None, state: str = "Running", *conditions: str) -> Obj:
    status: Obj = {"state": state, "conditions": [{"type": c, "status": "True"} for c in conditions]}
    if trainer_status is not None:
        status["trainerStatus"] = trainer_status
    return {
        "metadata": {"name": "tj", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
        "status": status,
    }


def test_each_shape_reads_into_one_training() -> None:
    assert training.from_training_progress(v1_job(V1_PROGRESS)) == Training(
        percent=45,
        epoch=2,
        total_epochs=10,
        step=1200,
        total_steps=5000,
        metrics={"loss": 0.45123, "accuracy": 0.8919},
        eta_seconds=190,
        checkpoint=Checkpoint("/ckpt/checkpoint-epoch-2.pt", 2, "2026-01-01T00:07:00Z"),
        best=Best("accuracy", 0.91, 2),
        updated="2026-01-01T00:09:48Z",
    )
    # Upstream's shape has no epoch: a metric named "epoch" stands in, and leaves the metrics.
    assert training.from_trainer_status(trainjob(TRAINER_STATUS)) == Training(
        percent=40, epoch=3, metrics={"loss": "0.25", "lr": "1e-05"}, eta_seconds=3725, updated="2026-01-01T00:09:00Z"
    )
    assert training.from_flat_status({"status": SEED_STATUS}) == Training(
        percent=45,
        epoch=2,
        total_epochs=10,
        metrics={"loss": 0.45, "accuracy": 0.89},
        checkpoint=Checkpoint("s3://ckpt/bert/checkpoint-epoch-2", 2),
    )


@pytest.mark.parametrize(
    ("read", "job"),
    [
        (training.from_training_progress, v1_job()),
        (training.from_training_progress, v1_job({})),
        (training.from_training_progress, {"metadata": {}}),
        (training.from_trainer_status, trainjob()),
        (training.from_trainer_status, {"status": None}),
        (training.from_flat_status, {"status": {"state": "Pending", "conditions": [], "workers": {"active": 0}}}),
    ],
    ids=["v1-none", "v1-empty", "v1-no-status", "trainjob-none", "trainjob-null-status", "seed-pending"],
)
def test_a_job_that_never_reported_has_no_training(read: Any, job: Obj) -> None:
    assert read(job) is None


def test_values_of_the_wrong_type_are_left_out_not_raised_on() -> None:
    odd = {
        "progressPercentage": "x",
        "progress": "45%",
        "currentEpoch": True,
        "totalEpochs": 10.0,
        "metrics": {"loss": None, "accuracy": [1], "note": "warming up"},
        "lastCheckpoint": {"epoch": 2},
        "best": {"metric": "accuracy"},
    }
    read = training.from_training_progress(v1_job(odd))
    assert read == Training(percent=45, total_epochs=10, metrics={"note": "warming up"})
    assert training.cell("LOSS", read) == "" and training.cell("EPOCH", read) == ""
    junk = {"metrics": ["loss", {"name": "", "value": "1"}, {"name": "a"}], "progressPercentage": None}
    assert training.from_trainer_status(trainjob(junk)) == Training()


def test_durations_and_values_are_short() -> None:
    assert [training.duration(s) for s in (0, 45, 60, 190, 3600, 3725, 86400 * 2 + 3 * 3600 + 59, -5)] == [
        "0s",
        "45s",
        "1m",
        "3m10s",
        "1h",
        "1h2m",
        "2d3h",
        "0s",
    ]
    values = [0.45123, "0.25", 12, 3.0, 1e-05, "1e-05", 123456.7, "warming up", "inf"]
    assert [training.value_text(v) for v in values] == [
        "0.4512",
        "0.25",
        "12",
        "3",
        "1e-05",
        "1e-05",
        "123457",
        "warming up",
        "inf",
    ]
    assert training.value_text(0.45123, 3) == "0.451"
    assert training.since("2026-01-01T00:07:00Z", NOW) == "3m ago" and training.since("later", NOW) is None


def test_get_columns_of_v1_jobs_trainjobs_and_both() -> None:
    columns = job_columns([PYTORCHJOB], wide=False)
    assert job_headers(columns, wide=False, all_ns=False, show_kind=False) == [
        "NAME",
        "STATE",
        "PROGRESS",
        "EPOCH",
        "AGE",
        "REPLICAS",
    ]
    row = [
        str(c)
        for c in job_row(v1_job(V1_PROGRESS, "Running"), PYTORCHJOB, columns, wide=False, all_ns=False, show_kind=False)
    ]
    assert row[:4] == ["ddp", "Running", "45%", "2/10"]
    # Never reported: empty cells, as kubectl leaves a printer column whose field is absent.
    row = [
        str(c) for c in job_row(v1_job(None, "Running"), PYTORCHJOB, columns, wide=False, all_ns=False, show_kind=False)
    ]
    assert row[2:4] == ["", ""]

    wide = job_columns([PYTORCHJOB], wide=True)
    headers = job_headers(wide, wide=True, all_ns=False, show_kind=False)
    assert headers[6:] == ["LOSS", "ACCURACY", "ETA", "DURATION", "RESTARTS", "KIND"]
    cells = dict(
        zip(
            headers,
            map(
                str, job_row(v1_job(V1_PROGRESS, "Running"), PYTORCHJOB, wide, wide=True, all_ns=False, show_kind=False)
            ),
            strict=True,
        )
    )
    assert (cells["LOSS"], cells["ACCURACY"], cells["ETA"]) == ("0.4512", "0.8919", "3m10s")
    # A finished job has no ETA left.
    done = v1_job(V1_PROGRESS, "Running", "Succeeded")
    assert str(job_row(done, PYTORCHJOB, wide, wide=True, all_ns=False, show_kind=False)[headers.index("ETA")]) == ""

    tj_columns = job_columns([TRAINJOB], wide=True)
    tj_headers = job_headers(tj_columns, wide=True, all_ns=False, show_kind=False)
    assert tj_headers == [
        "NAME",
        "STATE",
        "RUNTIME",
        "NODES",
        "PROGRESS",
        "EPOCH",
        "AGE",
        "LOSS",
        "ACCURACY",
        "ETA",
        "JOBS",
        "KIND",
    ]
    tj_cells = dict(
        zip(
            tj_headers,
            map(str, job_row(trainjob(TRAINER_STATUS), TRAINJOB, tj_columns, wide=True, all_ns=False, show_kind=False)),
            strict=True,
        )
    )
    assert [tj_cells[h] for h in ("PROGRESS", "EPOCH", "LOSS", "ACCURACY", "ETA")] == ["40%", "3", "0.25", "", "1h2m"]

    # "jobs": each job read by its own family's shape.
    both = job_columns([PYTORCHJOB, TRAINJOB], wide=True)
    both_headers = job_headers(both, wide=True, all_ns=False, show_kind=True)
    assert both_headers == [
        "NAME",
        "STATE",
        "PROGRESS",
        "EPOCH",
        "AGE",
        "REPLICAS",
        "LOSS",
        "ACCURACY",
        "ETA",
        "DURATION",
        "RESTARTS",
        "KIND",
    ]
    v1_row = [
        str(c)
        for c in job_row(v1_job(V1_PROGRESS, "Running"), PYTORCHJOB, both, wide=True, all_ns=False, show_kind=True)
    ]
    tj_row = [
        str(c) for c in job_row(trainjob(TRAINER_STATUS), TRAINJOB, both, wide=True, all_ns=False, show_kind=True)
    ]
    assert [v1_row[both_headers.index(h)] for h in ("PROGRESS", "EPOCH", "LOSS", "ETA")] == [
        "45%",
        "2/10",
        "0.4512",
        "3m10s",
    ]
    assert [tj_row[both_headers.index(h)] for h in ("PROGRESS", "EPOCH", "LOSS", "ETA")] == ["40%", "3", "0.25", "1h2m"]
    finished_tj = trainjob(TRAINER_STATUS, "Complete", "Complete")
    assert (
        str(job_row(finished_tj, TRAINJOB, both, wide=True, all_ns=False, show_kind=True)[both_headers.index("ETA")])
        == ""
    )


def test_describe_training_section() -> None:
    read = training.from_training_progress(v1_job(V1_PROGRESS))
    assert read is not None
    assert training.fields(read, now=NOW) == [
        ("Progress", "45%"),
        ("Epoch", "2/10"),
        ("Step", "1200/5000"),
        ("ETA", "3m10s"),
        ("Metrics", "loss: 0.45123"),
        ("", "accuracy: 0.8919"),
        ("Checkpoint", "/ckpt/checkpoint-epoch-2.pt (epoch 2, 3m ago)"),
        ("Best", "accuracy 0.91 (epoch 2)"),
        ("Updated", "12s ago"),
    ]
    assert ("ETA", "3m10s") not in training.fields(read, over=True, now=NOW)
    tj = training.from_trainer_status(trainjob(TRAINER_STATUS))
    assert tj is not None
    assert training.fields(tj, now=NOW) == [
        ("Progress", "40%"),
        ("Epoch", "3"),
        ("ETA", "1h2m"),
        ("Metrics", "loss: 0.25"),
        ("", "lr: 1e-05"),
        ("Updated", "1m ago"),
    ]
    # The families read their own shape; TrainJob's describe has no second table of the same report.
    assert REPLICA_JOBS.training(v1_job(V1_PROGRESS)) == read and TRAINJOBS.training(trainjob(TRAINER_STATUS)) == tj
    assert REPLICA_JOBS.training(trainjob(TRAINER_STATUS)) is None
    assert [title for title, _, _ in TRAINJOBS.sections(trainjob(TRAINER_STATUS))] == ["Jobs"]


def test_progress_line() -> None:
    read = training.from_training_progress(v1_job(V1_PROGRESS))
    assert training.summary(read) == "45%  epoch 2/10  loss 0.451  acc 0.892  ETA 3m10s"
    assert training.summary(read, over=True) == "45%  epoch 2/10  loss 0.451  acc 0.892"
    assert training.summary(None) == ""
    # No epoch: the step; neither loss nor accuracy: the first two metrics.
    steps = Training(step=30, total_steps=100, metrics={"eval_f1": 0.7, "lr": 0.001, "x": 1})
    assert training.summary(steps) == "step 30/100  eval_f1 0.7  lr 0.001"
    pods = [
        {
            "metadata": {
                "name": "ddp-master-0",
                "labels": {"training.kubeflow.org/replica-type": "master", "training.kubeflow.org/replica-index": "0"},
            },
            "status": {"phase": "Running", "containerStatuses": [{"name": "pytorch", "state": {"running": {}}}]},
        }
    ]
    assert (
        progress_line(PYTORCHJOB, "ddp", v1_job(V1_PROGRESS, "Running"), pods)
        == "pytorchjob/ddp: Running  45%  epoch 2/10  loss 0.451  acc 0.892  ETA 3m10s  (master-0 Running)"
    )
    # Until the job reports, the line is what it always was.
    assert (
        progress_line(PYTORCHJOB, "ddp", v1_job(None, "Running"), pods) == "pytorchjob/ddp: Running (master-0 Running)"
    )
    assert (
        progress_line(TRAINJOB, "tj", trainjob(TRAINER_STATUS, "Complete", "Complete"), [])
        == "trainjob/tj: Complete  40%  epoch 3  loss 0.25  (no pods yet)"
    )


def test_describe_prints_the_training_section_only_when_reported(capsys: pytest.CaptureFixture[str]) -> None:
    job = v1_job(V1_PROGRESS, "Running")
    job["status"]["trainingProgress"]["lastUpdateTime"] = None  # no age: the output does not depend on the clock
    job["status"]["trainingProgress"]["lastCheckpoint"]["time"] = None
    print_training(REPLICA_JOBS, job)
    assert capsys.readouterr().out.splitlines() == [
        "",
        "Training:",
        "  Progress:     45%",
        "  Epoch:        2/10",
        "  Step:         1200/5000",
        "  ETA:          3m10s",
        "  Metrics:      loss: 0.45123",
        "                accuracy: 0.8919",
        "  Checkpoint:   /ckpt/checkpoint-epoch-2.pt (epoch 2)",
        "  Best:         accuracy 0.91 (epoch 2)",
    ]
    print_training(REPLICA_JOBS, v1_job(None, "Running"))
    print_training(TRAINJOBS, job)  # another family's shape is not this one's
    assert capsys.readouterr().out == ""
