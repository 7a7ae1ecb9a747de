"""The launcher-Job pass (MPIJob v2beta1) as the mpi-operator syncs, decided purely.

Children are spelled out as the API server returns them (names, labels, owners), independent of
the builders under test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from job_builders import reconciled

from trainyard.api.core import Pod
from trainyard.api.kubeflow.mpi import MPIJob
from trainyard.api.meta import TypedObject
from trainyard.controller import ChildRef, ControllerSettings, Observed, Plan, reconcile
from trainyard.frameworks.registry import plugin_for

NOW = datetime(2026, 1, 1, tzinfo=UTC)
UID = "uid-of-pi"
LAUNCHER_UID = "uid-of-pi-launcher"
PLUGIN = plugin_for("MPIJob")
SETTINGS = ControllerSettings()
KEYS_MADE: list[int] = []


def key_pair() -> tuple[str, str]:
    KEYS_MADE.append(1)
    return "-----BEGIN EC PRIVATE KEY-----\n...\n", "ecdsa-sha2-nistp521 AAAA\n"


def mpijob(*, workers: int = 2, status: dict[str, Any] | None = None, **spec: Any) -> MPIJob:
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "default", "uid": UID},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {"spec": {"containers": [{"name": "l", "image": "i", "command": ["mpirun"]}]}},
                },
                "Worker": {
                    "replicas": workers,
                    "template": {"spec": {"containers": [{"name": "w", "image": "i"}]}},
                },
            },
            **spec,
        },
    }
    if status is not None:
        body["status"] = status
    return MPIJob.model_validate(body)


def owner(kind: str = "MPIJob", name: str = "pi", uid: str = UID) -> list[dict[str, Any]]:
    api = "kubeflow.org/v2beta1" if kind == "MPIJob" else "batch/v1"
    return [{"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True}]


def worker(index: int, phase: str = "Running", *, ready: bool = True, reason: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "conditions": [{"type": "Ready", "status": str(ready)}]}
    if reason:
        status["reason"] = reason
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pi-worker-{index}",
            "namespace": "default",
            "labels": {
                "training.kubeflow.org/operator-name": "mpi-operator",
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(index),
                "training.kubeflow.org/job-role": "worker",
            },
            "ownerReferences": owner(),
        },
        "spec": {"containers": [{"name": "w"}]},
        "status": status,
    }


def launcher_pod(
    phase: str = "Running",
    *,
    reason: str = "",
    message: str = "",
    created: str = "",
    container: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A launcher Job's pod; ``container`` is its (first) container's status, less the name."""
    status: dict[str, Any] = {"phase": phase, "reason": reason, "message": message}
    if container is not None:
        status["containerStatuses"] = [{"name": "l", "image": "i", **container}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"pi-launcher-{phase.lower()}{created[-2:]}",
            "namespace": "default",
            "creationTimestamp": created or "2026-01-01T00:00:00Z",
            "labels": {
                "training.kubeflow.org/job-name": "pi",
                "training.kubeflow.org/job-role": "launcher",
                "training.kubeflow.org/replica-type": "launcher",
            },
            "ownerReferences": owner("Job", "pi-launcher", LAUNCHER_UID),
        },
        "spec": {"containers": [{"name": "l"}]},
        "status": status,
    }


def launcher_job(*, suspend: bool = False, status: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "pi-launcher",
            "namespace": "default",
            "uid": LAUNCHER_UID,
            "resourceVersion": "7",
            "ownerReferences": owner(),
        },
        "spec": {
            "suspend": suspend,
            "template": {
                "metadata": {"labels": {"batch.kubernetes.io/job-name": "pi-launcher"}},
                "spec": {"containers": [{"name": "l", "image": "i"}], "nodeSelector": {"old": "x"}},
            },
        },
        "status": status or {},
    }


def secret() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pi-ssh", "namespace": "default", "resourceVersion": "3", "ownerReferences": owner()},
        "type": "kubernetes.io/ssh-auth",
        "data": {"ssh-privatekey": "eA==", "ssh-publickey": "eQ=="},
    }


def run(job: MPIJob, *objects: dict[str, Any], now: datetime = NOW) -> Plan:
    pods = tuple(p for p in objects if p["kind"] == "Pod")
    owned = tuple(TypedObject.model_validate(o) for o in objects if o["kind"] != "Pod")
    observed = Observed(
        job, tuple(Pod.model_validate(p) for p in pods), (), now, other_children=owned, key_pairs=key_pair
    )
    return reconciled(observed, plugin=PLUGIN, settings=SETTINGS)


def kinds(objects: Any) -> list[tuple[str, str]]:
    return [(o.kind, o.name) for o in objects]


def conditions(plan: Plan) -> list[tuple[str, str, str]]:
    assert plan.status is not None
    return [(c.type.value, c.status, c.reason or "") for c in plan.status.conditions]


def test_first_pass_creates_the_companions_workers_and_launcher_and_records_created() -> None:
    KEYS_MADE.clear()
    plan = run(mpijob())
    assert kinds(plan.apply) == [
        ("Service", "pi"),
        ("ConfigMap", "pi-config"),
        ("Secret", "pi-ssh"),
        ("Job", "pi-launcher"),
    ]
    assert kinds(plan.create) == [("Pod", "pi-worker-0"), ("Pod", "pi-worker-1")]
    assert conditions(plan) == [("Created", "True", "MPIJobCreated")]
    assert plan.status is not None and plan.status.start_time == NOW
    assert [(e.reason, e.message) for e in plan.events] == [("MPIJobCreated", "MPIJob default/pi is created.")]
    assert KEYS_MADE == [1]
    launcher = plan.apply[-1].to_dict()
    assert launcher["metadata"]["ownerReferences"][0]["uid"] == UID
    assert launcher["spec"]["podReplacementPolicy"] == "Failed"


def test_an_existing_key_pair_is_kept_and_no_new_one_is_made() -> None:
    KEYS_MADE.clear()
    plan = run(mpijob(), secret(), launcher_job(), worker(0), worker(1))
    assert "Secret" not in [o.kind for o in plan.apply]
    assert KEYS_MADE == []


def test_wait_for_workers_ready_holds_the_launcher_until_every_worker_is_ready() -> None:
    job = mpijob(launcherCreationPolicy="WaitForWorkersReady")
    assert "Job" not in [o.kind for o in run(job).apply]
    assert "Job" not in [o.kind for o in run(job, worker(0), worker(1, ready=False)).apply]
    assert "Job" not in [o.kind for o in run(job, worker(0)).apply]  # one is not even there
    assert "Job" in [o.kind for o in run(job, worker(0), worker(1)).apply]


def test_running_needs_a_running_launcher_pod_and_every_worker_running() -> None:
    created = {
        "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}],
        "startTime": "2026-01-01T00:00:00Z",
    }
    job = mpijob(status=created)
    plan = run(job, launcher_job(status={"active": 1}), launcher_pod("Pending"), worker(0), worker(1))
    assert plan.status is None or ("Running", "True", "MPIJobRunning") not in conditions(plan)
    plan = run(job, launcher_job(status={"active": 1}), launcher_pod(), worker(0), worker(1, "Pending"))
    assert plan.status is None or ("Running", "True", "MPIJobRunning") not in conditions(plan)
    plan = run(job, launcher_job(status={"active": 1}), launcher_pod(), worker(0))  # worker-1 is not there yet
    assert plan.status is None or ("Running", "True", "MPIJobRunning") not in conditions(plan)
    plan = run(job, launcher_job(status={"active": 1}), launcher_pod(), worker(0), worker(1))
    assert ("Running", "True", "MPIJobRunning") in conditions(plan)
    assert plan.status is not None
    statuses = {k: (v.active, v.succeeded, v.failed) for k, v in plan.status.replica_statuses.items()}
    assert statuses == {"Launcher": (1, 0, 0), "Worker": (2, 0, 0)}


def test_the_launcher_completing_succeeds_the_job_with_its_completion_time() -> None:
    running = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
            {"type": "Running", "status": "True", "reason": "MPIJobRunning"},
        ],
        "startTime": "2026-01-01T00:00:00Z",
    }
    done = {
        "conditions": [{"type": "Complete", "status": "True"}],
        "completionTime": "2026-01-01T00:01:00Z",
        "succeeded": 1,
    }
    plan = run(mpijob(status=running), launcher_job(status=done), launcher_pod("Succeeded"), worker(0), worker(1))
    assert conditions(plan)[-2:] == [("Running", "False", "MPIJobRunning"), ("Succeeded", "True", "MPIJobSucceeded")]
    assert plan.status is not None and plan.status.completion_time == NOW + timedelta(minutes=1)
    assert plan.status.replica_statuses["Launcher"].succeeded == 1
    assert ("MPIJobSucceeded", "MPIJob default/pi successfully completed.") in [
        (e.reason, e.message) for e in plan.events
    ]
    assert plan.create == () and not [o for o in plan.apply if o.kind != "Job"]  # nothing more once it is done


def test_a_launcher_past_its_backoff_limit_fails_the_job_with_the_last_pods_reason() -> None:
    created = {
        "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}],
        "startTime": "2026-01-01T00:00:00Z",
    }
    failed = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ],
        "failed": 2,
    }
    pods = (
        launcher_pod("Failed", reason="Error", message="first", created="2026-01-01T00:00:01Z"),
        launcher_pod("Failed", reason="OOMKilled", message="rank 1 ran out of memory", created="2026-01-01T00:00:09Z"),
    )
    plan = run(mpijob(status=created), launcher_job(status=failed), *pods)
    assert plan.status is not None
    failed_cond = next(c for c in plan.status.conditions if c.type.value == "Failed")
    assert failed_cond.reason == "BackoffLimitExceeded/OOMKilled"
    assert failed_cond.message == "Job has reached the specified backoff limit: rank 1 ran out of memory"
    assert plan.status.replica_statuses["Launcher"].failed == 2
    # "finished but Running condition was never set", before the outcome so that State shows Failed
    assert conditions(plan)[-2:] == [
        ("Running", "False", "MPIJobRunning"),
        ("Failed", "True", "BackoffLimitExceeded/OOMKilled"),
    ]
    assert plan.status.completion_time == NOW
    # A pod read without a creationTimestamp counts as the oldest, not a naive/aware comparison error.
    undated = launcher_pod("Failed", reason="Error", message="undated", created="2026-01-01T00:00:05Z")
    del undated["metadata"]["creationTimestamp"]
    plan = run(mpijob(status=created), launcher_job(status=failed), undated, pods[0])
    assert plan.status is not None
    assert next(c for c in plan.status.conditions if c.type.value == "Failed").message.endswith(": first")


BACKOFF_FAILED = {
    "conditions": [
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        }
    ],
    "failed": 1,
}


def exited(code: int) -> dict[str, Any]:
    return {"terminated": {"exitCode": code, "reason": "Error"}}


def failed_condition(plan: Plan) -> tuple[str, str]:
    assert plan.status is not None
    found = next(c for c in plan.status.conditions if c.type.value == "Failed")
    return found.reason or "", found.message or ""


def test_a_failed_launcher_pod_without_a_message_names_how_mpirun_exited() -> None:
    # The kubelet leaves a pod's message empty when its container fails: mpirun's exit code (the
    # first failed rank's) is what the user needs, upstream's "...backoff limit: " says nothing.
    created = {"conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}]}
    pod = launcher_pod("Failed", container={"state": exited(3)})
    plan = run(mpijob(status=created), launcher_job(status=BACKOFF_FAILED), pod)
    assert failed_condition(plan) == (
        "BackoffLimitExceeded/",
        "Job has reached the specified backoff limit: Launcher (pod pi-launcher-failed) exited with code 3 (Error)",
    )


def test_a_launcher_that_crashed_in_place_names_its_last_exit() -> None:
    # restartPolicy OnFailure (the launcher's default): no pod failed, the container restarted in it.
    created = {"conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}]}
    crashed = {"restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": exited(3)}
    plan = run(mpijob(status=created), launcher_job(status=BACKOFF_FAILED), launcher_pod(container=crashed))
    assert failed_condition(plan) == (
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit: Launcher (pod pi-launcher-running) exited with code 3 (Error)",
    )
    # A pod that never got a container status adds nothing, as upstream.
    plan = run(mpijob(status=created), launcher_job(status=BACKOFF_FAILED), launcher_pod())
    assert failed_condition(plan) == ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


def test_an_evicted_worker_fails_the_job() -> None:
    created = {
        "conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}],
        "startTime": "2026-01-01T00:00:00Z",
    }
    plan = run(mpijob(status=created), launcher_job(), launcher_pod(), worker(0), worker(1, "Failed", reason="Evicted"))
    assert plan.status is not None
    cond = next(c for c in plan.status.conditions if c.type.value == "Failed")
    assert (cond.reason, cond.message) == ("MPIJobEvicted", "1/2 workers are evicted")
    assert ("MPIJobEvicted", "1/2 workers are evicted") in [(e.reason, e.message) for e in plan.events]


def test_suspending_suspends_the_launcher_and_deletes_the_workers() -> None:
    plan = run(mpijob(runPolicy={"suspend": True}), launcher_job(), launcher_pod(), worker(0), worker(1))
    job_write = next(o for o in plan.apply if o.kind == "Job").to_dict()
    assert job_write["spec"]["suspend"] is True and job_write["metadata"]["resourceVersion"] == "7"
    assert set(plan.delete) == {ChildRef("Pod", "pi-worker-0"), ChildRef("Pod", "pi-worker-1")}
    assert plan.create == ()
    assert ("Suspended", "True", "MPIJobSuspended") in conditions(plan)


def test_resuming_clears_the_launchers_start_time_first_then_syncs_the_template_and_unsuspends() -> None:
    suspended = {
        "conditions": [
            {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
            {"type": "Suspended", "status": "True", "reason": "MPIJobSuspended"},
        ]
    }
    template = {
        "metadata": {"labels": {"kueue": "yes"}},
        "spec": {"nodeSelector": {"new": "y"}, "containers": [{"name": "l", "image": "i"}]},
    }
    job = mpijob(status=suspended)
    job.spec.mpi_replica_specs["Launcher"].template = type(
        job.spec.mpi_replica_specs["Launcher"].template
    ).model_validate(template)
    first = run(job, launcher_job(suspend=True, status={"startTime": "2026-01-01T00:00:00Z"}))
    assert [(p.child.name, p.patch) for p in first.patch_status] == [("pi-launcher", {"startTime": None})]
    assert "Job" not in [o.kind for o in first.apply]
    second = run(job, launcher_job(suspend=True))
    written = next(o for o in second.apply if o.kind == "Job").to_dict()
    assert written["spec"]["suspend"] is False
    assert written["spec"]["template"]["spec"]["nodeSelector"] == {"new": "y"}
    assert written["spec"]["template"]["metadata"]["labels"]["kueue"] == "yes"
    assert written["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "pi-launcher"
    assert ("Suspended", "False", "MPIJobResumed") in conditions(second)
    assert second.status is not None and second.status.start_time == NOW


@pytest.mark.parametrize(
    ("policy", "deleted"), [("Running", {"pi-worker-0"}), ("All", {"pi-worker-0", "pi-worker-1"}), ("None", set())]
)
def test_a_finished_job_cleans_up_its_workers_by_clean_pod_policy(policy: str, deleted: set[str]) -> None:
    done = {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"}],
        "completionTime": "2026-01-01T00:00:00Z",
    }
    plan = run(mpijob(runPolicy={"cleanPodPolicy": policy}, status=done), worker(0), worker(1, "Succeeded"))
    assert {ref.name for ref in plan.delete} == deleted
    assert not plan.apply and not plan.create


def test_ttl_is_the_launchers_the_mpijob_itself_stays() -> None:
    done = {
        "conditions": [{"type": "Succeeded", "status": "True", "reason": "MPIJobSucceeded"}],
        "completionTime": "2026-01-01T00:00:00Z",
    }
    plan = run(mpijob(runPolicy={"ttlSecondsAfterFinished": 1}, status=done), now=NOW + timedelta(hours=1))
    assert not plan.delete_job
    assert (
        run(mpijob(runPolicy={"ttlSecondsAfterFinished": 60})).apply[-1].to_dict()["spec"]["ttlSecondsAfterFinished"]
        == 60
    )


def test_scaling_workers_down_deletes_the_surplus_by_name() -> None:
    plan = run(mpijob(workers=1, runLauncherAsWorker=True), launcher_job(), worker(0), worker(1))
    assert ChildRef("Pod", "pi-worker-1") in plan.delete and ChildRef("Pod", "pi-worker-0") not in plan.delete


def test_a_job_managed_by_another_controller_gets_nothing() -> None:
    assert run(mpijob(runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"})) == Plan()


def test_with_gang_scheduling_the_launchers_pods_join_the_group_too() -> None:
    from trainyard.api.core import Pod

    job = mpijob()
    group = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "pi", "namespace": "default", "resourceVersion": "1", "ownerReferences": owner()},
        "spec": {"minMember": 3},
    }
    observed = Observed(job, (), (), NOW, other_children=(TypedObject.model_validate(group),), key_pairs=key_pair)
    plan = reconcile(observed, PLUGIN, ControllerSettings(gang_scheduler_name="scheduler-plugins-scheduler"))
    template = next(o for o in plan.apply if o.kind == "Job").to_dict()["spec"]["template"]
    assert template["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
    assert template["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "pi"
    workers = [Pod.model_validate(p.to_dict()) for p in plan.create]
    assert all((p.metadata.labels or {})["scheduling.x-k8s.io/pod-group"] == "pi" for p in workers) and workers


def test_a_launcher_waiting_for_ready_workers_is_not_counted_in_their_gang() -> None:
    job = mpijob(launcherCreationPolicy="WaitForWorkersReady")
    settings = ControllerSettings(gang_scheduler_name="scheduler-plugins-scheduler")
    plan = reconcile(Observed(job, (), (), NOW, key_pairs=key_pair), PLUGIN, settings)
    group = next(o for o in plan.apply if o.kind == "PodGroup").to_dict()
    # Counted, the launcher (created only once both workers are Ready) would hold them back for ever.
    assert group["spec"]["minMember"] == 2
    at_startup = reconcile(Observed(mpijob(), (), (), NOW, key_pairs=key_pair), PLUGIN, settings)
    assert next(o for o in at_startup.apply if o.kind == "PodGroup").to_dict()["spec"]["minMember"] == 3
