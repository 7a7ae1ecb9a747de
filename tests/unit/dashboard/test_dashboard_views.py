"""What the dashboard shows of a job, from objects as the API returns them: the JobRow of a v1 job,
a TrainJob and seed 004's TrainingJob; when each finished and whether it is suspended (each family's
own suspend field); the chart point of a report; pods grouped by replica; events in time order."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.dashboard import views

CREATED = "2026-03-01T11:00:00Z"


def condition(type_: str, at: str, status: str = "True", **extra: Any) -> dict[str, Any]:
    return {"type": type_, "status": status, "lastTransitionTime": at, "lastUpdateTime": at, **extra}


def pytorchjob(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist", "namespace": "team", "uid": "u-pt", "creationTimestamp": CREATED},
        "spec": {
            "runPolicy": {"suspend": False},
            "pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 2}},
        },
        "status": {
            "conditions": [condition("Created", CREATED), condition("Running", "2026-03-01T11:00:05Z")],
            "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 2}},
            **status,
        },
    }


PROGRESS = {
    "currentEpoch": 3,
    "totalEpochs": 10,
    "currentStep": 300,
    "totalSteps": 1000,
    "progressPercentage": 30,
    "estimatedRemainingSeconds": 70,
    "metrics": {"loss": 0.5, "accuracy": 0.8, "phase": "train"},
    "lastUpdateTime": "2026-03-01T11:05:00Z",
}


def trainjob(suspend: bool = False, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default", "uid": "u-tj", "creationTimestamp": CREATED},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": suspend},
        "status": status,
    }


TRAINER_STATUS = {
    "progressPercentage": 40,
    "estimatedRemainingSeconds": 120,
    # upstream's shape: every value a string (the official SDK's update_trainjob_status)
    "metrics": [{"name": "loss", "value": "0.25"}, {"name": "epoch", "value": "2"}, {"name": "stage", "value": "fit"}],
    "lastUpdatedTime": "2026-03-01T11:06:00Z",
}


def trainingjob(suspend: bool = False, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "ml.example.com/v1",
        "kind": "TrainingJob",
        "metadata": {"name": "bert", "namespace": "default", "uid": "u-trj", "creationTimestamp": CREATED},
        "spec": {"model": "bert", "dataset": "wiki", "numWorkers": 2, "suspend": suspend},
        "status": status,
    }


def test_a_v1_jobs_row_reads_its_conditions_and_training_progress() -> None:
    row = views.row(pytorchjob(trainingProgress=PROGRESS))
    assert row == {
        "uid": "u-pt",
        "namespace": "team",
        "name": "mnist",
        "kind": "PyTorchJob",
        "group": "kubeflow.org",
        "version": "v1",
        "plural": "pytorchjobs",
        "family": "replica-specs",
        "state": "Running",
        "conditions": ["Created", "Running"],
        "progress": 30,
        "epoch": 3,
        "totalEpochs": 10,
        "step": 300,
        "totalSteps": 1000,
        "eta": 70,
        "metrics": {"loss": 0.5, "accuracy": 0.8, "phase": "train"},
        "replicas": "Master: 1 active; Worker: 2 active",
        "created": CREATED,
        "finished": None,
        "deleted": None,
        "suspended": False,
    }


def test_a_v1_job_before_any_report_has_no_training_cells() -> None:
    row = views.row(pytorchjob())
    assert (row["progress"], row["epoch"], row["eta"], row["metrics"]) == (None, None, None, {})
    assert views.point(pytorchjob()) is None


def test_a_finished_or_deleted_job_has_no_eta() -> None:
    done = pytorchjob(trainingProgress=PROGRESS)
    done["status"]["conditions"] += [
        condition("Running", "2026-03-01T11:20:00Z", status="False"),
        condition("Succeeded", "2026-03-01T11:20:00Z"),
    ]
    row = views.row(done)
    assert row["finished"] == "2026-03-01T11:20:00Z" and row["eta"] is None
    assert row["state"] == "Succeeded"
    gone = views.row(pytorchjob(trainingProgress=PROGRESS), deleted="2026-03-01T11:30:00Z")
    assert gone["deleted"] == "2026-03-01T11:30:00Z" and gone["eta"] is None and gone["finished"] is None


def test_finished_at_is_when_the_outcome_condition_turned_true() -> None:
    failed = pytorchjob()
    failed["status"]["conditions"].append(condition("Failed", "2026-03-01T11:09:00Z", reason="BackoffLimitExceeded"))
    assert views.finished_at(failed) == "2026-03-01T11:09:00Z"
    assert views.finished_at(pytorchjob()) is None
    # an outcome condition that is False is no outcome
    not_yet = pytorchjob()
    not_yet["status"]["conditions"].append(condition("Succeeded", "2026-03-01T11:09:00Z", status="False"))
    assert views.finished_at(not_yet) is None
    complete = trainjob(conditions=[condition("Complete", "2026-03-01T12:00:00Z")])
    assert views.finished_at(complete) == "2026-03-01T12:00:00Z"


def test_a_trainjobs_row_reads_trainer_status() -> None:
    row = views.row(trainjob(trainerStatus=TRAINER_STATUS, conditions=[condition("Suspended", CREATED)], suspend=True))
    assert (row["kind"], row["group"], row["version"], row["plural"]) == (
        "TrainJob",
        "trainer.kubeflow.org",
        "v1alpha1",
        "trainjobs",
    )
    assert row["state"] == "Suspended" and row["conditions"] == ["Suspended"]
    assert (row["progress"], row["eta"], row["epoch"]) == (40, 120, 2), "a metric named epoch stands in"
    assert row["metrics"] == {"loss": "0.25", "stage": "fit"}
    assert row["suspended"] is True


def test_seed_004s_trainingjob_reads_its_flat_status() -> None:
    job = trainingjob(
        state="Completed",
        progress="100%",
        currentEpoch=5,
        totalEpochs=5,
        metrics={"loss": 0.1},
        workers={"succeeded": 2},
        conditions=[condition("Created", CREATED), condition("Succeeded", "2026-03-01T11:30:00Z")],
    )
    row = views.row(job)
    assert (row["kind"], row["group"], row["plural"], row["family"]) == (
        "TrainingJob",
        "ml.example.com",
        "trainingjobs",
        "trainingjobs",
    )
    assert row["state"] == "Completed"
    assert (row["progress"], row["epoch"], row["totalEpochs"], row["metrics"]) == (100, 5, 5, {"loss": 0.1})
    assert row["replicas"] == "2 succeeded"
    assert row["finished"] == "2026-03-01T11:30:00Z" and row["eta"] is None


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (pytorchjob(), False),
        ({**pytorchjob(), "spec": {"runPolicy": {"suspend": True}}}, True),
        ({**pytorchjob(), "spec": {}}, False),
        (trainjob(suspend=True), True),
        (trainjob(suspend=False), False),
        (trainingjob(suspend=True), True),
        (trainingjob(suspend=False), False),
        # another family's field does not count
        ({**trainjob(), "spec": {"runPolicy": {"suspend": True}}}, False),
        ({**pytorchjob(), "spec": {"suspend": True}}, False),
    ],
)
def test_suspended_reads_each_familys_own_field(job: dict[str, Any], expected: bool) -> None:
    assert views.suspended(job) is expected
    assert views.row(job)["suspended"] is expected


def test_a_point_is_the_latest_report_with_its_numeric_metrics_only() -> None:
    assert views.point(pytorchjob(trainingProgress=PROGRESS)) == {
        "time": "2026-03-01T11:05:00Z",
        "step": 300,
        "epoch": 3,
        "metrics": {"loss": 0.5, "accuracy": 0.8},
    }
    flags = {**PROGRESS, "metrics": {"loss": 0.5, "done": True, "phase": "train"}}
    assert views.point(pytorchjob(trainingProgress=flags))["metrics"] == {"loss": 0.5}  # type: ignore[index]


def test_no_point_without_a_report_time_or_without_a_number() -> None:
    undated = {k: v for k, v in PROGRESS.items() if k != "lastUpdateTime"}
    assert views.point(pytorchjob(trainingProgress=undated)) is None
    words = {**PROGRESS, "metrics": {"phase": "train"}}
    assert views.point(pytorchjob(trainingProgress=words)) is None
    # seed 004's flat status carries no report time: its charts are its owned v1 job's
    assert views.point(trainingjob(currentEpoch=1, metrics={"loss": 1.0})) is None


def test_a_trainjobs_point_reads_its_string_values_as_numbers() -> None:
    # Trainer v2 reports every metric as a string: a chart needs the numbers in them.
    point = views.point(trainjob(trainerStatus=TRAINER_STATUS))
    assert point == {"time": "2026-03-01T11:06:00Z", "step": None, "epoch": 2, "metrics": {"loss": 0.25}}
    diverged = {**TRAINER_STATUS, "metrics": [{"name": "loss", "value": "nan"}, {"name": "lr", "value": "1e-3"}]}
    assert views.point(trainjob(trainerStatus=diverged))["metrics"] == {"lr": 0.001}  # type: ignore[index]


def pod(name: str, labels: dict[str, str], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"u-{name}", "labels": labels},
        "spec": {"nodeName": "node-1", "containers": [{"name": "pytorch"}, {"name": "sidecar"}]},
        "status": {"phase": "Running", "startTime": CREATED, **status},
    }


def test_pods_group_by_the_replica_type_or_the_jobsets_replicated_job() -> None:
    v1 = "training.kubeflow.org/replica-type"
    jobset = "jobset.sigs.k8s.io/replicatedjob-name"
    ready = [
        {"name": "pytorch", "ready": True, "restartCount": 1},
        {"name": "sidecar", "ready": True, "restartCount": 2},
    ]
    pods = [
        pod("mnist-worker-1", {v1: "worker"}),
        pod("mnist-master-0", {v1: "master"}, containerStatuses=ready),
        pod("mnist-worker-0", {v1: "worker"}),
        pod("tj-node-0-0", {jobset: "node"}),
        pod("loose", {}),
    ]
    groups = views.replica_groups(pods)
    assert [(g["type"], [p["name"] for p in g["pods"]]) for g in groups] == [
        ("master", ["mnist-master-0"]),
        ("node", ["tj-node-0-0"]),
        ("pod", ["loose"]),
        ("worker", ["mnist-worker-0", "mnist-worker-1"]),
    ]
    master = groups[0]["pods"][0]
    assert master == {
        "name": "mnist-master-0",
        "phase": "Running",
        "node": "node-1",
        "restarts": 3,
        "ready": True,
        "containers": ["pytorch", "sidecar"],
        "started": CREATED,
        "reason": None,
    }
    assert groups[3]["pods"][0]["ready"] is False, "a pod without container statuses is not ready"


def test_a_pods_row_names_why_it_waits_and_a_terminating_pod() -> None:
    waiting = [{"name": "pytorch", "ready": False, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]
    assert views.pod_row(pod("p", {}, phase="Pending", containerStatuses=waiting))["reason"] == "ImagePullBackOff"
    going = pod("p", {})
    going["metadata"]["deletionTimestamp"] = "2026-03-01T11:10:00Z"
    assert views.pod_row(going)["phase"] == "Terminating"


def test_events_are_in_time_order_core_and_events_v1_alike() -> None:
    core = {
        "type": "Normal",
        "reason": "Started",
        "message": "Started container pytorch",
        "count": 2,
        "firstTimestamp": "2026-03-01T11:00:03Z",
        "lastTimestamp": "2026-03-01T11:00:09Z",
        "involvedObject": {"kind": "Pod", "name": "mnist-master-0"},
    }
    earlier = {**core, "reason": "Scheduled", "count": None, "lastTimestamp": "2026-03-01T11:00:01Z"}
    events_v1 = {
        "type": "Warning",
        "reason": "BackOff",
        "note": "Back-off restarting failed container",
        "eventTime": "2026-03-01T11:00:05Z",
        "series": {"count": 4},
        "regarding": {"kind": "Pod", "name": "mnist-worker-0"},
    }
    rows = views.events_table([core, events_v1, earlier])
    assert [e["reason"] for e in rows] == ["Scheduled", "BackOff", "Started"]
    assert rows[0]["count"] == 1, "an event seen once says 1"
    assert rows[1] == {
        "type": "Warning",
        "reason": "BackOff",
        "message": "Back-off restarting failed container",
        "count": 4,
        "firstTimestamp": "2026-03-01T11:00:05Z",
        "lastTimestamp": "2026-03-01T11:00:05Z",
        "object": "Pod/mnist-worker-0",
    }
    assert rows[2]["object"] == "Pod/mnist-master-0" and rows[2]["count"] == 2


def test_the_condition_timeline_is_in_transition_order_and_the_yaml_drops_managed_fields() -> None:
    job = pytorchjob()
    job["status"]["conditions"].reverse()
    job["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    assert [c["type"] for c in views.condition_timeline(job)] == ["Created", "Running"]
    text = views.as_yaml(job)
    assert "managedFields" not in text and text.startswith("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n")
