"""``batch/v1`` Jobs on a real ``yard up``: the plane's Job controller runs real processes, seen through kubectl.

The plane runs with ``--restart-backoff 0.2``, which also shortens the Job controller's pod-failure
back-off (10 s upstream), so a replacement pod follows a failure in a fraction of a second.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-batch-jobs", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"jobs-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def create_job(kubectl: Kubectl, ns: str, name: str, script: str, policy: str = "Never", **spec: Any) -> Any:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": policy,
                    "terminationGracePeriodSeconds": 2,
                    "containers": [{"name": "main", "image": "python:3.11", "command": ["python3", "-c", script]}],
                }
            },
            **spec,
        },
    }
    return json.loads(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(job)))


def conditions(job: dict[str, Any]) -> list[tuple[str, str, str]]:
    found = (job.get("status") or {}).get("conditions") or []
    return [(c["type"], c["status"], c.get("reason", "")) for c in found]


def job_pods(kubectl: Kubectl, ns: str, name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", ns, "-l", f"batch.kubernetes.io/job-name={name}")[
        "items"
    ]
    return items


def wait_condition(kubectl: Kubectl, ns: str, name: str, kind: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        job: dict[str, Any] = kubectl.json("get", "job", name, "-n", ns)
        return job if any(t == kind and s == "True" for t, s, _ in conditions(job)) else None

    return eventually(probe, timeout=120, what=f"job {name} to be {kind}")


def test_a_job_whose_pod_succeeds_completes_and_shows_its_logs(kubectl: Kubectl, ns: str) -> None:
    created = create_job(kubectl, ns, "hello", "print('hello from the job', flush=True)")
    uid = created["metadata"]["uid"]
    assert created["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    job = wait_condition(kubectl, ns, "hello", "Complete")
    assert conditions(job) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached"),
        ("Complete", "True", "CompletionsReached"),
    ]
    status = job["status"]
    assert status["succeeded"] == 1 and status["startTime"] and status["completionTime"]
    assert (status["ready"], status["terminating"], "active" in status) == (0, 0, False)
    pods = job_pods(kubectl, ns, "hello")
    assert len(pods) == 1 and pods[0]["metadata"]["name"].startswith("hello-")
    owner = pods[0]["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == ("Job", uid, True, True)
    assert not pods[0]["metadata"].get("finalizers")  # counted, so the tracking finalizer is gone
    table = kubectl("get", "jobs", "-n", ns)
    assert table.split("\n")[0].split() == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert table.split("\n")[1].split()[:3] == ["hello", "Complete", "1/1"]
    assert kubectl("logs", "job/hello", "-n", ns).strip() == "hello from the job"
    described = kubectl("describe", "job", "hello", "-n", ns)
    assert "1 Succeeded" in described and "SuccessfulCreate" in described and "Completed" in described


def test_restart_never_counts_each_failed_pod_against_the_backoff_limit(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "fails", "import sys; print('bad', flush=True); sys.exit(3)", backoffLimit=1)
    job = wait_condition(kubectl, ns, "fails", "Failed")
    assert conditions(job) == [
        ("FailureTarget", "True", "BackoffLimitExceeded"),
        ("Failed", "True", "BackoffLimitExceeded"),
    ]
    assert job["status"]["conditions"][1]["message"] == "Job has reached the specified backoff limit"
    assert job["status"]["failed"] == 2 and "completionTime" not in job["status"]
    pods = job_pods(kubectl, ns, "fails")
    assert sorted(p["status"]["phase"] for p in pods) == ["Failed", "Failed"]  # finished pods are kept
    assert kubectl("get", "jobs", "-n", ns).split("\n")[1].split()[:3] == ["fails", "Failed", "0/1"]


def test_suspend_resume_and_the_kep_2926_template_update(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "later", "print('ran', flush=True)", suspend=True)
    job = wait_condition(kubectl, ns, "later", "Suspended")
    assert job["status"]["conditions"][0]["message"] == "Job suspended" and "startTime" not in job["status"]
    assert job_pods(kubectl, ns, "later") == []
    # A suspended Job that never started may get new scheduling directives, and resume, in one update.
    patch = {
        "spec": {
            "suspend": False,
            "template": {
                "metadata": {"labels": {"placed": "yes"}},
                "spec": {"nodeSelector": {"kubernetes.io/os": "linux"}},
            },
        }
    }
    kubectl("patch", "job", "later", "-n", ns, "--type=merge", "-p", json.dumps(patch))
    job = wait_condition(kubectl, ns, "later", "Complete")
    assert ("Suspended", "False", "JobResumed") in conditions(job)
    pods = job_pods(kubectl, ns, "later")
    assert pods[0]["metadata"]["labels"]["placed"] == "yes"
    assert pods[0]["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    # Once started, the template is immutable again.
    changed = {"spec": {"template": {"spec": {"nodeSelector": {"zone": "elsewhere"}}}}}
    refused = kubectl.run("patch", "job", "later", "-n", ns, "--type=merge", "-p", json.dumps(changed))
    assert refused.returncode == 1 and "spec.template: Invalid value" in refused.stderr
    assert "field is immutable" in refused.stderr


def test_active_deadline_fails_the_job_and_stops_its_pod(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "slow", "import time; time.sleep(120)", activeDeadlineSeconds=2)
    job = wait_condition(kubectl, ns, "slow", "Failed")
    assert conditions(job) == [("FailureTarget", "True", "DeadlineExceeded"), ("Failed", "True", "DeadlineExceeded")]
    assert job["status"]["conditions"][1]["message"] == "Job was active longer than specified deadline"
    assert job["status"]["failed"] == 1
    eventually(lambda: job_pods(kubectl, ns, "slow") == [], what="the deleted pod to go")


def test_ttl_after_finished_deletes_the_job_and_its_pods(kubectl: Kubectl, ns: str) -> None:
    create_job(kubectl, ns, "brief", "print('done', flush=True)", ttlSecondsAfterFinished=1)
    eventually(
        lambda: kubectl.run("get", "job", "brief", "-n", ns).returncode == 1 and not job_pods(kubectl, ns, "brief"),
        timeout=120,
        what="the finished job and its pod to be deleted",
    )
