"""The plain-language "why" of Pending, Restarting and Failed jobs, from API objects as the plane writes them."""

from __future__ import annotations

from typing import Any

from trainyard.api import replicaspecs as replica_specs
from trainyard.sdk.explain import why
from trainyard.sdk.jobstate import replica_name, state

V1 = replica_specs.VIEW


def job(*conditions: tuple[str, str, str], backoff: int | None = None, restarts: int | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": s, "reason": f"PyTorchJob{t}", "message": m} for t, s, m in conditions]
    }
    if restarts is not None:
        status["restartCount"] = restarts
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}}
    if backoff is not None:
        spec["runPolicy"] = {"backoffLimit": backoff}
    return {"metadata": {"name": "j", "namespace": "default"}, "spec": spec, "status": status}


def pod(rtype: str, index: int, phase: str, **container: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"name": "pytorch", **container}]}
    return {
        "metadata": {
            "name": f"j-{rtype}-{index}",
            "labels": {"training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(index)},
        },
        "status": status,
    }


def unschedulable(rtype: str, index: int, message: str) -> dict[str, Any]:
    p = pod(rtype, index, "Pending")
    p["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
    }
    return p


CREATED = ("Created", "True", "PyTorchJob j is created.")
RUNNING = ("Running", "True", "PyTorchJob j is running.")


def test_replica_names_come_from_upstream_labels() -> None:
    assert replica_name(pod("worker", 1, "Running")) == "worker-1"
    assert replica_name({"metadata": {"name": "plain"}}) == "plain"


def test_a_running_or_succeeded_job_needs_no_explanation() -> None:
    running = pod("master", 0, "Running", state={"running": {}})
    assert why(job(CREATED, RUNNING), [running], [], view=V1) is None
    assert why(job(CREATED, ("Succeeded", "True", "done")), [], [], view=V1) is None


def test_pending_names_the_unschedulable_pod_and_what_to_do() -> None:
    pods = [unschedulable("worker", 0, "0/1 nodes are available: 1 Insufficient cpu.")]
    reasons = why(job(CREATED, ("Pending", "True", "pod j-worker-0 is Unschedulable")), pods, [], view=V1)
    assert reasons is not None
    assert reasons[0].startswith("The job is Pending")
    assert any(
        "worker-0 (j-worker-0) is Unschedulable: 0/1 nodes are available: 1 Insufficient cpu." in r for r in reasons
    )
    assert any("resource requests" in r for r in reasons)


def test_a_job_no_operator_touched_says_so() -> None:
    untouched = {"metadata": {"name": "j"}, "spec": {}, "status": {}}
    assert state(untouched, V1) == "Created"
    reasons = why(untouched, [], [], view=V1)
    assert reasons is not None and "yard operator" in reasons[0]


def test_restarting_lists_the_failed_replica_exit_code_and_backoff() -> None:
    crashed = pod(
        "worker",
        0,
        "Running",
        restartCount=2,
        state={"running": {}},
        lastState={"terminated": {"exitCode": 3, "reason": "Error"}},
    )
    restarting = ("Restarting", "True", "PyTorchJob j is restarting because 1 Worker replica(s) failed.")
    reasons = why(job(CREATED, restarting, backoff=3, restarts=2), [crashed], [], view=V1)
    assert reasons == [
        "The job is restarting: PyTorchJob j is restarting because 1 Worker replica(s) failed.",
        "worker-0 restarted 2 time(s); last time it exited with code 3.",
        "Restarts so far: 2 of backoffLimit 3; past the limit the job fails.",
    ]


def test_failed_explains_backoff_limit_and_shows_warnings() -> None:
    failed = ("Failed", "True", "Job j has failed because it has reached the specified backoff limit")
    dead = pod("worker", 0, "Failed", state={"terminated": {"exitCode": 137, "reason": "OOMKilled"}})
    warning = {
        "type": "Warning",
        "reason": "BackOff",
        "message": "Back-off restarting",
        "involvedObject": {"name": "j-worker-0"},
    }
    reasons = why(job(CREATED, failed, backoff=1), [dead], [warning], view=V1)
    assert reasons is not None
    assert reasons[0] == f"The job failed: {failed[2]}"
    assert "raise backoffLimit" in reasons[1]
    assert "worker-0 was killed (exit code 137, OOMKilled: out of memory or SIGKILL)." in reasons
    assert reasons[-1] == "Recent warning: j-worker-0: BackOff: Back-off restarting"


def test_suspended_jobs_say_how_to_resume() -> None:
    reasons = why(job(CREATED, ("Suspended", "True", "suspended")), [], [], view=V1)
    assert reasons is not None and "spec.runPolicy.suspend" in reasons[0]
