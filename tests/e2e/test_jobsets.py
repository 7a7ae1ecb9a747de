"""JobSets (``jobset.x-k8s.io/v1alpha2``) on a real ``yard up``: the plane's JobSet and Job controllers.

One small JobSet per test: two replicated Jobs whose Indexed pods print their identity and exit 0
(Completed); one whose pod fails under ``maxRestarts: 1`` (restarted once, then Failed); one
created suspended and resumed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

PRINT = "import os; print('host', os.environ['HOSTNAME'], 'index', os.environ.get('JOB_COMPLETION_INDEX'), flush=True)"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-jobsets", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"jobsets-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def rjob(name: str, script: str, replicas: int = 1, completions: int = 1) -> dict[str, Any]:
    pod = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 2,
        "containers": [{"name": "main", "image": "python:3.11", "command": ["python3", "-c", script]}],
    }
    spec = {"completions": completions, "parallelism": completions, "backoffLimit": 0, "template": {"spec": pod}}
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def create(kubectl: Kubectl, ns: str, name: str, rjobs: list[dict[str, Any]], **spec: Any) -> Any:
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"replicatedJobs": rjobs, **spec},
    }
    return json.loads(kubectl("apply", "-f", "-", "-o", "json", input=json.dumps(body)))


def wait_condition(kubectl: Kubectl, ns: str, name: str, kind: str, status: str = "True") -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        js: dict[str, Any] = kubectl.json("get", "jobset", name, "-n", ns)
        found = (js.get("status") or {}).get("conditions") or []
        return js if any(c["type"] == kind and c["status"] == status for c in found) else None

    return eventually(probe, timeout=120, what=f"jobset {name} to be {kind}={status}")


def test_two_replicated_jobs_run_indexed_pods_and_complete(kubectl: Kubectl, ns: str) -> None:
    created = create(kubectl, ns, "pair", [rjob("leader", PRINT), rjob("workers", PRINT, replicas=2, completions=2)])
    assert created["spec"]["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    js = wait_condition(kubectl, ns, "pair", "Completed")
    assert js["status"]["terminalState"] == "Completed"
    done = next(c for c in js["status"]["conditions"] if c["type"] == "Completed")
    assert (done["reason"], done["message"]) == ("AllJobsCompleted", "jobset completed successfully")
    rows = {r["name"]: r for r in js["status"]["replicatedJobsStatus"]}
    assert rows["leader"]["succeeded"] == 1 and rows["workers"]["succeeded"] == 2
    jobs = kubectl.json("get", "jobs", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name=pair")["items"]
    assert sorted(j["metadata"]["name"] for j in jobs) == ["pair-leader-0", "pair-workers-0", "pair-workers-1"]
    assert all(j["spec"]["completionMode"] == "Indexed" for j in jobs)
    service = kubectl.json("get", "service", "pair", "-n", ns)
    assert service["spec"]["clusterIP"] == "None"
    pods = kubectl.json("get", "pods", "-n", ns, "-l", "jobset.sigs.k8s.io/replicatedjob-name=workers")["items"]
    hostnames = sorted(p["spec"]["hostname"] for p in pods)
    assert hostnames == ["pair-workers-0-0", "pair-workers-0-1", "pair-workers-1-0", "pair-workers-1-1"]
    assert {p["spec"]["subdomain"] for p in pods} == {"pair"}
    one = next(p for p in pods if p["spec"]["hostname"] == "pair-workers-1-1")
    assert one["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"] == "1"
    assert one["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1"
    assert kubectl("logs", one["metadata"]["name"], "-n", ns).split() == ["host", "pair-workers-1-1", "index", "1"]
    header = kubectl("get", "jobsets", "-n", ns).split("\n")[0].split()
    assert header == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]


def test_a_failing_job_restarts_the_jobset_once_then_fails_it(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, ns, "flaky", [rjob("main", "import sys; sys.exit(3)")], failurePolicy={"maxRestarts": 1})
    js = wait_condition(kubectl, ns, "flaky", "Failed")
    assert js["status"]["restarts"] == 1 and js["status"]["terminalState"] == "Failed"
    failed = next(c for c in js["status"]["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"] == "jobset failed due to reaching max number of restarts (first failed job: flaky-main-0)"
    job = kubectl.json("get", "job", "flaky-main-0", "-n", ns)
    assert job["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"


def test_suspend_and_resume(kubectl: Kubectl, ns: str) -> None:
    create(kubectl, ns, "later", [rjob("main", PRINT)], suspend=True)
    js = wait_condition(kubectl, ns, "later", "Suspended")
    assert eventually(lambda: kubectl.json("get", "job", "later-main-0", "-n", ns)["spec"]["suspend"] is True)
    assert kubectl.json("get", "pods", "-n", ns)["items"] == []
    kubectl("patch", "jobset", "later", "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"suspend": False}}))
    js = wait_condition(kubectl, ns, "later", "Completed")
    resumed = next(c for c in js["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "ResumeJobs")
