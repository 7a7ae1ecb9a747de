"""How ``yard`` reads a TrainJob next to the v1 kinds: the job-like kinds' table, STATE, pods, columns, why."""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest

from trainyard.api import replicaspecs as replica_specs
from trainyard.api.trainer import family as trainjobs
from trainyard.cli.tables import job_columns, job_headers, job_row
from trainyard.sdk import kinds as sdk_kinds
from trainyard.sdk import replicas as pod_views
from trainyard.sdk.explain import why
from trainyard.sdk.jobstate import event_names, finished, state
from trainyard.sdk.kinds import builtin_kinds, resolve, served_kinds

Obj = dict[str, Any]
REPLICA_JOBS = replica_specs.VIEW
TRAINJOBS = trainjobs.VIEW
TRAINJOB = resolve("trainjobs", builtin_kinds())[0]
PYTORCHJOB = resolve("pytorchjobs", builtin_kinds())[0]


def trainjob(*conditions: tuple[str, str], state: str | None = None, **status: Any) -> Obj:
    body: Obj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
        "status": {
            **status,
            "conditions": [
                {"type": t, "status": s, "reason": t, "message": f"TrainJob {t.lower()}"} for t, s in conditions
            ],
        },
    }
    if state is not None:
        body["status"]["state"] = state
    return body


def node_pod(index: int, phase: str = "Running", rjob: str = "node", owner: str | None = None) -> Obj:
    return {
        "metadata": {
            "name": f"tj-{rjob}-0-{index}-abcde",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "tj",
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "batch.kubernetes.io/job-completion-index": str(index),
            },
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": owner or f"tj-{rjob}-0"}],
        },
        "status": {"phase": phase, "containerStatuses": [{"name": "node", "state": {"running": {}}}]},
    }


def test_trainjob_is_a_job_like_kind_with_its_own_view() -> None:
    assert [(k.kind, k.plural, k.api_version, k.default_container) for k in builtin_kinds() if not k.open_group] == [
        ("TrainJob", "trainjobs", "trainer.kubeflow.org/v1alpha1", "node"),
        ("OptimizationJob", "optimizationjobs", "trainer.kubeflow.org/v1alpha1", None),
        ("TrainingJob", "trainingjobs", "ml.example.com/v1", None),
        ("Experiment", "experiments", "kubeflow.org/v1beta1", None),
    ]
    assert TRAINJOB.view is TRAINJOBS and PYTORCHJOB.view is REPLICA_JOBS
    assert TRAINJOB in resolve("jobs", builtin_kinds())


def test_state_is_trainyards_status_state_else_the_conditions() -> None:
    assert state(trainjob(state="Pending"), TRAINJOBS) == "Pending"
    assert state(trainjob(state="Running"), TRAINJOBS) == "Running"
    # Another controller (upstream's) writes no state: terminal and Suspended conditions, else Created.
    assert state(trainjob(("Complete", "True")), TRAINJOBS) == "Complete"
    assert state(trainjob(("Suspended", "False"), ("Failed", "True")), TRAINJOBS) == "Failed"
    assert state(trainjob(("Suspended", "True")), TRAINJOBS) == "Suspended"
    assert state(trainjob(), TRAINJOBS) == "Created"


def test_a_trainjob_is_over_on_complete_or_failed_true() -> None:
    assert finished(trainjob(("Complete", "True")), TRAINJOBS) == "Complete"
    assert finished(trainjob(("Failed", "True")), TRAINJOBS) == "Failed"
    assert finished(trainjob(("Suspended", "True")), TRAINJOBS) is None
    assert finished(trainjob(("Complete", "False")), TRAINJOBS) is None
    # A v1 job's Succeeded means nothing to a TrainJob, and the other way round.
    assert finished(trainjob(("Succeeded", "True")), TRAINJOBS) is None
    assert finished(trainjob(("Complete", "True")), REPLICA_JOBS) is None


def test_pods_of_a_jobset_are_named_by_replicated_job_and_completion_index() -> None:
    assert pod_views.replica_name(node_pod(1)) == "node-1"
    assert pod_views.replica_name(node_pod(0, rjob="launcher")) == "launcher-0"
    initializer = node_pod(0, rjob="dataset-initializer")
    del initializer["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]
    assert pod_views.replica_name(initializer) == "dataset-initializer"
    assert pod_views.job_of(node_pod(0)) == "tj" and pod_views.is_replica(node_pod(0))
    assert TRAINJOBS.pod_labels("tj") == {"jobset.sigs.k8s.io/jobset-name": "tj"}
    pods = [node_pod(1), node_pod(0), node_pod(10), initializer]
    assert [pod_views.replica_name(p) for p in sorted(pods, key=pod_views.pod_order)] == [
        "dataset-initializer",
        "node-0",
        "node-1",
        "node-10",
    ]


def test_v1_pods_keep_their_names_and_order() -> None:
    def pod(rtype: str, index: int) -> Obj:
        labels = {"training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(index)}
        return {"metadata": {"name": f"j-{rtype}-{index}", "labels": labels}}

    pods = [pod("worker", 1), pod("worker", 0), pod("master", 0)]
    assert [pod_views.replica_name(p) for p in sorted(pods, key=pod_views.pod_order)] == [
        "master-0",
        "worker-0",
        "worker-1",
    ]
    assert REPLICA_JOBS.pod_labels("j") == {"training.kubeflow.org/job-name": "j"}


def test_a_trainjobs_events_include_its_jobs() -> None:
    pods = [node_pod(0), node_pod(1)]
    assert event_names(TRAINJOB, "tj", pods) == {"tj", "tj-node-0", *(p["metadata"]["name"] for p in pods)}
    assert event_names(PYTORCHJOB, "tj", pods) == {"tj", *(p["metadata"]["name"] for p in pods)}


def test_columns_of_trainjobs_of_v1_jobs_and_of_both() -> None:
    tj = trainjob(state="Running", jobsStatus=[{"name": "node", "active": 2, "ready": 2, "succeeded": 0}])
    columns = job_columns([TRAINJOB], wide=False)
    headers = job_headers(columns, wide=False, all_ns=False, show_kind=False)
    assert headers == ["NAME", "STATE", "RUNTIME", "NODES", "PROGRESS", "EPOCH", "AGE"]
    row = [str(c) for c in job_row(tj, TRAINJOB, columns, wide=False, all_ns=False, show_kind=False)]
    assert row[:6] == ["tj", "Running", "torch-distributed", "2", "", ""] and row[6].endswith("d")
    wide = job_columns([TRAINJOB], wide=True)
    assert job_headers(wide, wide=True, all_ns=False, show_kind=False)[-2:] == ["JOBS", "KIND"]
    assert str(job_row(tj, TRAINJOB, wide, wide=True, all_ns=False, show_kind=False)[-2]) == "node: 2 active"
    # v1 kinds alone keep their table; "jobs" across both families shares the common columns.
    assert job_headers(job_columns([PYTORCHJOB], wide=False), wide=False, all_ns=False, show_kind=False) == [
        "NAME",
        "STATE",
        "PROGRESS",
        "EPOCH",
        "AGE",
        "REPLICAS",
    ]
    both = job_columns([PYTORCHJOB, TRAINJOB], wide=False)
    assert job_headers(both, wide=False, all_ns=False, show_kind=True) == [
        "NAME",
        "STATE",
        "PROGRESS",
        "EPOCH",
        "AGE",
        "REPLICAS",
        "KIND",
    ]
    row = [str(c) for c in job_row(tj, TRAINJOB, both, wide=False, all_ns=False, show_kind=True)]
    assert row[5:] == ["node: 2 active", "TrainJob"]


def test_summary_before_any_status_and_a_namespaced_runtime() -> None:
    tj = trainjob()
    assert trainjobs.jobs_summary(tj) == "node: 2 wanted"
    tj["spec"] = {"runtimeRef": {"name": "mine", "kind": "TrainingRuntime"}}
    assert trainjobs.runtime_of(tj) == "mine (TrainingRuntime)"
    assert (trainjobs.nodes_column(tj), trainjobs.jobs_summary(tj)) == ("-", "-")
    assert TRAINJOBS.wanted(tj) == [] and TRAINJOBS.wanted(trainjob()) == ["node-0", "node-1"]


def test_describe_fields_and_sections() -> None:
    tj = trainjob(
        state="Running",
        jobsStatus=[{"name": "node", "active": 2, "ready": 1, "succeeded": 0, "failed": 0, "suspended": 0}],
        trainerStatus={"progressPercentage": 40, "metrics": [{"name": "loss", "value": "0.25"}]},
    )
    tj["spec"]["trainer"].update(image="pytorch/pytorch:2.7.1", command=["torchrun", "train.py"])
    tj["spec"]["activeDeadlineSeconds"] = 600
    fields = dict(TRAINJOBS.fields(tj))
    assert fields["Runtime"] == "torch-distributed" and fields["Nodes"] == "2"
    assert fields["Command"] == "torchrun train.py" and fields["Deadline"] == "600s"
    sections = {title: (headers, rows) for title, headers, rows in TRAINJOBS.sections(tj)}
    assert sections["Jobs"][0] == ["NAME", "ACTIVE", "READY", "SUCCEEDED", "FAILED", "SUSPENDED"]
    assert sections["Jobs"][1] == [["node", "2", "1", "0", "0", "0"]]
    # The trainer's report is describe's Training section (tests/unit/sdk/test_training_trainjobs.py), no table.
    assert list(sections) == ["Jobs"]
    assert TRAINJOBS.training(tj) is not None and TRAINJOBS.training(trainjob()) is None


def test_why_reads_a_trainjob_by_its_own_words() -> None:
    assert why(trainjob(("Complete", "True"), state="Complete"), [node_pod(0, "Succeeded")], [], view=TRAINJOBS) is None
    # Pending, handled (the controller wrote a state, no condition: as upstream), a node not started.
    pending = why(trainjob(state="Pending"), [node_pod(0, "Pending")], [], view=TRAINJOBS) or []
    assert pending and not any("No operator" in line for line in pending)
    # Nothing written at all: no controller has seen it.
    untouched = trainjob()
    del untouched["status"]
    assert any("No operator" in line for line in why(untouched, [], [], view=TRAINJOBS) or [])
    assert why(trainjob(state="Running"), [node_pod(0), node_pod(1)], [], view=TRAINJOBS) is None
    suspended = why(trainjob(("Suspended", "True"), state="Suspended"), [], [], view=TRAINJOBS)
    assert suspended == ["The job is suspended (spec.suspend: true); it runs no pods until that is cleared."]
    late = trainjob(("Failed", "True"), state="Failed")
    late["status"]["conditions"][0]["message"] = "TrainJob exceeded its active deadline"
    late["spec"]["activeDeadlineSeconds"] = 30
    assert (why(late, [], [], view=TRAINJOBS) or [])[1] == "It ran longer than spec.activeDeadlineSeconds (30s)."


class Discovery:
    """``get_json`` of a cluster serving the given group/versions (others 404)."""

    def __init__(self, served: dict[str, list[Obj]]) -> None:
        self.served = served

    def __call__(self, _client: Any, path: str) -> Obj:
        group_version = path.removeprefix("/apis/")
        if group_version not in self.served:
            request = httpx.Request("GET", f"https://plane{path}")
            raise httpx.HTTPStatusError("404", request=request, response=httpx.Response(404, request=request))
        return {"resources": self.served[group_version]}


def resource(kind: str, plural: str, namespaced: bool = True) -> Obj:
    return {"kind": kind, "name": plural, "namespaced": namespaced, "singularName": kind.lower()}


V1 = {
    "kubeflow.org/v1": [resource("PyTorchJob", "pytorchjobs"), resource("PyTorchJob", "pytorchjobs/status")],
    "kubeflow.org/v2beta1": [resource("MPIJob", "mpijobs")],
}


def test_a_cluster_without_trainer_v2_serves_no_trainjobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk_kinds, "get_json", Discovery(V1))
    assert [k.kind for k in served_kinds(None)] == ["PyTorchJob", "MPIJob"]  # type: ignore[arg-type]


def test_trainer_v2s_group_gives_its_trainjobs_and_no_runtimes(monkeypatch: pytest.MonkeyPatch) -> None:
    trainer = [
        resource("TrainJob", "trainjobs"),
        resource("TrainJob", "trainjobs/status"),
        resource("TrainingRuntime", "trainingruntimes"),
        resource("ClusterTrainingRuntime", "clustertrainingruntimes", namespaced=False),
    ]
    monkeypatch.setattr(sdk_kinds, "get_json", Discovery({**V1, "trainer.kubeflow.org/v1alpha1": trainer}))
    found = served_kinds(None)  # type: ignore[arg-type]
    assert [k.kind for k in found] == ["PyTorchJob", "MPIJob", "TrainJob"]
    assert found[-1].view is TRAINJOBS and found[-1].default_container == "node"


def test_refused_discovery_falls_back_to_every_known_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(_client: Any, path: str) -> Obj:
        request = httpx.Request("GET", f"https://plane{path}")
        raise httpx.HTTPStatusError("403", request=request, response=httpx.Response(403, request=request))

    monkeypatch.setattr(sdk_kinds, "get_json", refused)
    assert served_kinds(None) == builtin_kinds()  # type: ignore[arg-type]
