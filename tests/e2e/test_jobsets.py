"""JobSets (``jobset.x-k8s.io/v1alpha2``) on a real ``yard up``: the plane's JobSet and Job controllers.

On the session's plane, one small JobSet per test (each in its own namespace): two replicated Jobs
whose Indexed pods print their identity and exit 0 (Completed); one whose pod fails under
``maxRestarts: 1`` (restarted once, then Failed); one created suspended and resumed; MPI's shape,
a ``launcher`` that ``dependsOn`` its ``node`` being Ready.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, eventually
from trainyard.api.meta import format_time

pytestmark = pytest.mark.e2e

PRINT = "import os; print('host', os.environ['HOSTNAME'], 'index', os.environ.get('JOB_COMPLETION_INDEX'), flush=True)"


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
    # As Kueue does on admission: the suspended JobSet's pod template gets a label and a nodeSelector,
    # which resuming copies into the child Job before unsuspending it.
    template = "/spec/replicatedJobs/0/template/spec/template"
    ops = [
        {"op": "add", "path": f"{template}/metadata", "value": {"labels": {"kueue.x-k8s.io/flavor": "a"}}},
        {"op": "add", "path": f"{template}/spec/nodeSelector", "value": {"kubernetes.io/os": "linux"}},
        {"op": "replace", "path": "/spec/suspend", "value": False},
    ]
    kubectl("patch", "jobset", "later", "-n", ns, "--type=json", "-p", json.dumps(ops))
    js = wait_condition(kubectl, ns, "later", "Completed")
    resumed = next(c for c in js["status"]["conditions"] if c["type"] == "Suspended")
    assert (resumed["status"], resumed["reason"]) == ("False", "ResumeJobs")
    job = kubectl.json("get", "job", "later-main-0", "-n", ns)["spec"]["template"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/flavor"] == "a"
    assert job["metadata"]["labels"]["jobset.sigs.k8s.io/jobset-name"] == "later"
    assert job["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    pod = kubectl.json("get", "pods", "-n", ns, "-l", "kueue.x-k8s.io/flavor=a")["items"]
    assert len(pod) == 1 and pod[0]["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "main"


def pods_of(kubectl: Kubectl, ns: str, rjob: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json(
        "get", "pods", "-n", ns, "-l", f"jobset.sigs.k8s.io/replicatedjob-name={rjob}"
    )["items"]
    return items


def ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


def test_a_launcher_that_depends_on_its_node_starts_once_the_node_is_ready(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    # The node is Ready once the test touches `ready` and runs until the launcher touches `done`.
    flag, done = tmp_path / "ready", tmp_path / "done"
    node_script = f"import os, time\nwhile not os.path.exists({str(done)!r}): time.sleep(0.1)"
    node = rjob("node", node_script)
    probe = ["python3", "-c", f"import os, sys; sys.exit(not os.path.exists({str(flag)!r}))"]
    container = node["template"]["spec"]["template"]["spec"]["containers"][0]
    container["readinessProbe"] = {"exec": {"command": probe}, "periodSeconds": 1}
    node["template"]["spec"]["template"]["metadata"] = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "n"}}
    launcher = rjob("launcher", f"import pathlib; pathlib.Path({str(done)!r}).touch(); print('launched')")
    launcher["dependsOn"] = [{"name": "node", "status": "Ready"}]
    create(kubectl, ns, "mpi", [node, launcher])

    def launcher_job() -> bool:
        return kubectl.run("get", "job", "mpi-launcher-0", "-n", ns).returncode == 0

    def node_running_or_launcher() -> list[dict[str, Any]] | bool:
        pods = [p for p in pods_of(kubectl, ns, "node") if p["status"].get("phase") == "Running"]
        return pods or launcher_job()

    found = eventually(node_running_or_launcher, what="the node pod to run")
    # Without dependsOn both Jobs come from the JobSet's first pass; with it, none for the launcher yet.
    assert isinstance(found, list) and not launcher_job(), "the launcher Job was created before its node was Ready"
    running = found[0]
    assert not ready(running)
    labels = running["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/jobset-name"] == "mpi"
    assert labels["batch.kubernetes.io/job-completion-index"] == "0"
    assert labels["trainer.kubeflow.org/trainjob-ancestor-step"] == "n"
    assert running["metadata"]["name"].startswith("mpi-node-0-0-")

    touched = format_time(datetime.now(UTC))  # second precision, as creationTimestamp: a floor
    flag.touch()
    js = wait_condition(kubectl, ns, "mpi", "Completed")
    rows = {r["name"]: r for r in js["status"]["replicatedJobsStatus"]}
    assert rows["node"]["succeeded"] == 1 and rows["launcher"]["succeeded"] == 1
    launcher_job = kubectl.json("get", "job", "mpi-launcher-0", "-n", ns)
    assert launcher_job["metadata"]["creationTimestamp"] >= touched
    launcher_pod = pods_of(kubectl, ns, "launcher")[0]
    assert kubectl("logs", launcher_pod["metadata"]["name"], "-n", ns).split() == ["launched"]
