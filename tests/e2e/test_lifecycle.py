"""A PyTorchJob's lifecycle on a real ``yard up``, driven by kubectl: status, run policy, suspend.

Replicas are real processes running ``python3 -c`` scripts that finish at a chosen moment or
sleep for an hour, so every outcome is caused by the operator: success and its status fields,
``activeDeadlineSeconds`` on a job where nothing else happens (only the operator's timed requeue
can wake it, upstream #3358), ``ttlSecondsAfterFinished``, each ``cleanPodPolicy`` (Services
always go), suspend and resume through ``kubectl patch``, and a job ``managedBy`` someone else.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

SLEEP = "import time; time.sleep(3600)"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-lifecycle")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"life-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def replica(script: str, *, replicas: int = 1, policy: str = "OnFailure") -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", script]}
    return {
        "replicas": replicas,
        "restartPolicy": policy,
        "template": {"spec": {"terminationGracePeriodSeconds": 2, "containers": [container]}},
    }


def create_job(
    kubectl: Kubectl, ns: str, name: str, *, master: str, worker: str | None = None, workers: int = 1, **run_policy: Any
) -> dict[str, Any]:
    specs = {"Master": replica(master)}
    if worker is not None:
        specs["Worker"] = replica(worker, replicas=workers)
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": specs},
    }
    created: dict[str, Any] = json.loads(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(body)))
    return created


def get_job(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    job: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
    return job


def conditions(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (job.get("status") or {}).get("conditions") or []}


def last_condition(job: dict[str, Any]) -> tuple[str, str] | None:
    conds = (job.get("status") or {}).get("conditions") or []
    return (conds[-1]["type"], conds[-1]["status"]) if conds else None


def wait_for(kubectl: Kubectl, ns: str, name: str, ctype: str, *, timeout: float = 120) -> dict[str, Any]:
    """The job once its last condition is ``ctype``=True (the State column kubectl shows)."""
    job: dict[str, Any] = eventually(
        lambda: last_condition(j := get_job(kubectl, ns, name)) == (ctype, "True") and j,
        timeout=timeout,
        what=f"{name} to be {ctype}",
    )
    return job


def pods(kubectl: Kubectl, ns: str, name: str) -> dict[str, str]:
    items = kubectl.json("get", "pods", "-n", ns, "-l", f"training.kubeflow.org/job-name={name}")["items"]
    return {p["metadata"]["name"]: p["status"].get("phase", "") for p in items}


def services(kubectl: Kubectl, ns: str, name: str) -> set[str]:
    items = kubectl.json("get", "services", "-n", ns, "-l", f"training.kubeflow.org/job-name={name}")["items"]
    return {s["metadata"]["name"] for s in items}


def events(kubectl: Kubectl, ns: str, name: str) -> list[tuple[str, str, str]]:
    items = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name}")["items"]
    return [(e["type"], e["reason"], e["message"]) for e in items]


def time_of(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_success_sets_every_status_field_and_removes_the_services(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "ok", master="import time; time.sleep(5)", worker="import time; time.sleep(1)")
    eventually(lambda: services(kubectl, ns, "ok") == {"ok-master-0", "ok-worker-0"}, what="one Service per replica")

    job = wait_for(kubectl, ns, "ok", "Succeeded")

    status = job["status"]
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Created", "True", "PyTorchJobCreated"),
        ("Running", "False", "PyTorchJobRunning"),
        ("Succeeded", "True", "PyTorchJobSucceeded"),
    ]
    assert conditions(job)["Succeeded"]["message"] == "PyTorchJob ok is successfully completed."
    start, end = time_of(status["startTime"]), time_of(status["completionTime"])
    assert start <= end <= time_of(status["lastReconcileTime"])
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1
    assert status["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=ok,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )
    assert eventually(lambda: not services(kubectl, ns, "ok"), what="the Services to be removed")
    # cleanPodPolicy defaults to None: the pods stay, with their logs.
    assert pods(kubectl, ns, "ok") == {"ok-master-0": "Succeeded", "ok-worker-0": "Succeeded"}
    reasons = {r for _, r, _ in events(kubectl, ns, "ok")}
    assert {"PyTorchJobCreated", "PyTorchJobRunning", "PyTorchJobSucceeded", "SuccessfulCreatePod"} <= reasons
    assert "SuccessfulCreateService" in reasons


def test_active_deadline_fails_an_idle_job_on_time(kubectl: Kubectl, ns: str) -> None:
    # Both replicas sleep for an hour: once they run, no pod or job event happens any more.
    create_job(kubectl, ns, "idle", master=SLEEP, worker=SLEEP, activeDeadlineSeconds=8)
    running = wait_for(kubectl, ns, "idle", "Running")
    assert eventually(lambda: set(pods(kubectl, ns, "idle").values()) == {"Running"}, what="both replicas running")

    job = wait_for(kubectl, ns, "idle", "Failed", timeout=90)

    failed = conditions(job)["Failed"]
    assert failed["reason"] == "PyTorchJobFailed"
    assert failed["message"] == "Job idle has failed because it was active longer than specified deadline"
    start = time_of(running["status"]["startTime"])
    assert time_of(job["status"]["completionTime"]) >= start + timedelta(seconds=8)
    assert conditions(job)["Running"]["status"] == "False"
    eventually(lambda: not pods(kubectl, ns, "idle") and not services(kubectl, ns, "idle"), what="replicas stopped")
    assert ("Warning", "PyTorchJobFailed", failed["message"]) in events(kubectl, ns, "idle")


def test_ttl_deletes_the_finished_job(kubectl: Kubectl, ns: str) -> None:
    uid = create_job(kubectl, ns, "brief", master="pass", ttlSecondsAfterFinished=3)["metadata"]["uid"]
    finished = wait_for(kubectl, ns, "brief", "Succeeded")
    assert finished["metadata"]["uid"] == uid and finished["status"]["completionTime"]

    eventually(
        lambda: "NotFound" in kubectl.run("get", "pytorchjob", "brief", "-n", ns).stderr,
        timeout=60,
        what="the job to be deleted by its TTL",
    )
    eventually(lambda: not pods(kubectl, ns, "brief"), what="its pods to be garbage-collected")
    assert ("Normal", "SuccessfulDeletePod", "Deleted job: brief") in events(kubectl, ns, "brief")


# Master waits for worker-1 to have finished, then succeeds; worker-0 sleeps on. RANK tells them apart.
def clean_policy_scripts(marker: Path) -> tuple[str, str]:
    master = f"import os, time\nwhile not os.path.exists({str(marker)!r}): time.sleep(0.1)\ntime.sleep(1)\n"
    worker = (
        f"import os, time\nif os.environ['RANK'] == '2': open({str(marker)!r}, 'w').close()\nelse: time.sleep(3600)\n"
    )
    return master, worker


CLEAN_POD_POLICY = [
    # cleanPodPolicy, pods left once the finished job cleaned up
    ("None", {"clean-master-0": "Succeeded", "clean-worker-0": "Running", "clean-worker-1": "Succeeded"}),
    ("Running", {"clean-master-0": "Succeeded", "clean-worker-1": "Succeeded"}),
    ("All", {}),
]


@pytest.mark.parametrize(("policy", "left"), CLEAN_POD_POLICY, ids=[c[0] for c in CLEAN_POD_POLICY])
def test_clean_pod_policy(kubectl: Kubectl, ns: str, tmp_path: Path, policy: str, left: dict[str, str]) -> None:
    master, worker = clean_policy_scripts(tmp_path / "worker-1-done")
    create_job(kubectl, ns, "clean", master=master, worker=worker, workers=2, cleanPodPolicy=policy)

    wait_for(kubectl, ns, "clean", "Succeeded")

    # The pass that removes the Services also applies the policy to the pods.
    eventually(
        lambda: not services(kubectl, ns, "clean") and pods(kubectl, ns, "clean") == left,
        what=f"cleanPodPolicy {policy} to leave {sorted(left)} and no Service",
    )


def test_suspend_and_resume_with_kubectl_patch(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "pause", master=SLEEP, worker=SLEEP, suspend=True)
    created = wait_for(kubectl, ns, "pause", "Suspended")
    assert "startTime" not in created["status"]  # created suspended: the clock never started
    assert not pods(kubectl, ns, "pause")

    def patch(suspend: bool) -> None:
        body = json.dumps({"spec": {"runPolicy": {"suspend": suspend}}})
        kubectl("patch", "pytorchjob", "pause", "-n", ns, "--type=merge", "-p", body)

    patch(False)
    first = wait_for(kubectl, ns, "pause", "Running")
    assert eventually(lambda: set(pods(kubectl, ns, "pause").values()) == {"Running"}, what="both replicas running")
    assert services(kubectl, ns, "pause") == {"pause-master-0", "pause-worker-0"}

    patch(True)
    suspended = wait_for(kubectl, ns, "pause", "Suspended")
    eventually(lambda: not pods(kubectl, ns, "pause") and not services(kubectl, ns, "pause"), what="all children gone")
    assert conditions(suspended)["Running"]["status"] == "False"
    assert conditions(suspended)["Running"]["reason"] == "PyTorchJobSuspended"
    assert suspended["status"]["replicaStatuses"]["Master"]["active"] == 0

    resumed_at = datetime.now(UTC).replace(microsecond=0)
    patch(False)
    again = wait_for(kubectl, ns, "pause", "Running")
    resumed = conditions(again)["Suspended"]
    assert (resumed["status"], resumed["reason"]) == ("False", "PyTorchJobResumed")
    assert time_of(again["status"]["startTime"]) >= resumed_at >= time_of(first["status"]["startTime"])
    assert eventually(lambda: set(pods(kubectl, ns, "pause").values()) == {"Running"}, what="replicas back")
    reasons = [r for _, r, _ in events(kubectl, ns, "pause")]
    assert reasons.count("PyTorchJobSuspended") >= 2 and "PyTorchJobResumed" in reasons


def test_a_job_managed_by_another_controller_is_left_alone(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "theirs", master="pass", managedBy="kueue.x-k8s.io/multikueue")
    # A job of ours created afterwards gets all the way to Succeeded: the operator has long
    # seen the other one by then.
    create_job(kubectl, ns, "ours", master="pass")
    wait_for(kubectl, ns, "ours", "Succeeded")

    theirs = get_job(kubectl, ns, "theirs")
    assert "status" not in theirs or not theirs["status"]
    assert not pods(kubectl, ns, "theirs") and not services(kubectl, ns, "theirs")
    assert events(kubectl, ns, "theirs") == []
