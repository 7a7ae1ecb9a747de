"""PyTorchJob restart policies, backoffLimit, whole-job restart and the Pending condition, end to end.

Real ``python -c`` replicas on a real ``yard up`` (crash-loop back-off 0.2 s, pending timeout 2 s),
driven and observed through kubectl only. Replicas that must behave differently on their first and
later runs keep marker files in a directory of the test, which every incarnation of a pod sees
(pods are processes on this machine).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

BACKOFF = "has failed because it has reached the specified backoff limit"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-job-restarts", "--restart-backoff", "0.2", "--pending-timeout", "2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"jobrestarts-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def replica(policy: str, script: str, **container: Any) -> dict[str, Any]:
    main = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", script], **container}
    return {
        "replicas": 1,
        "restartPolicy": policy,
        "template": {"spec": {"terminationGracePeriodSeconds": 2, "containers": [main]}},
    }


def submit(kubectl: Kubectl, ns: str, name: str, specs: dict[str, Any], **run_policy: Any) -> None:
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": specs},
    }
    kubectl("create", "-f", "-", input=json.dumps(body))


def get_job(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    job: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
    return job


def finished(kubectl: Kubectl, ns: str, name: str, timeout: float = 180) -> dict[str, Any]:
    """The job once its last condition is Succeeded or Failed."""

    def probe() -> dict[str, Any] | None:
        job = get_job(kubectl, ns, name)
        conds = (job.get("status") or {}).get("conditions") or []
        return job if conds and conds[-1]["type"] in ("Succeeded", "Failed") and conds[-1]["status"] == "True" else None

    return eventually(probe, timeout=timeout, what=f"{name} to finish")


def last_condition(job: dict[str, Any]) -> dict[str, Any]:
    cond: dict[str, Any] = job["status"]["conditions"][-1]
    return cond


def events(kubectl: Kubectl, ns: str, name: str, reason: str) -> list[str]:
    listing = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name},reason={reason}")
    return sorted(e["message"] for e in listing["items"])


def pod(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = kubectl.json("get", "pod", name, "-n", ns)
    return got


def marker_script(runs: Path, first: str, later: str) -> str:
    """Runs ``first`` on the first run of a replica, ``later`` after that; each run leaves a file in ``runs``."""
    return (
        "import os, signal, sys, time\n"
        f"runs = {str(runs)!r}\n"
        "os.makedirs(runs, exist_ok=True)\n"
        "n = len(os.listdir(runs))\n"
        "open(os.path.join(runs, str(n)), 'w').close()\n"
        f"if n == 0:\n    {first}\n"
        f"{later}\n"
    )


SIGKILL_SELF = "os.kill(os.getpid(), signal.SIGKILL)"


def test_never_failure_fails_the_job_and_keeps_the_pod(kubectl: Kubectl, ns: str) -> None:
    submit(
        kubectl,
        ns,
        "never",
        {"Master": replica("Never", "import time; time.sleep(600)"), "Worker": replica("Never", "raise SystemExit(1)")},
    )

    job = finished(kubectl, ns, "never")

    cond = last_condition(job)
    assert (cond["type"], cond["reason"]) == ("Failed", "PyTorchJobFailed")
    assert cond["message"] == "PyTorchJob never is failed because 1 Worker replica(s) failed."
    assert "restartCount" not in job["status"]
    worker = pod(kubectl, ns, "never-worker-0")
    assert worker["status"]["phase"] == "Failed" and worker["spec"]["restartPolicy"] == "Never"
    assert events(kubectl, ns, "never", "ExitedWithCode") == [f"Pod: {ns}.never-worker-0 exited with code 1"]
    assert events(kubectl, ns, "never", "SuccessfulCreatePod") == [
        "Created pod: never-master-0",
        "Created pod: never-worker-0",
    ]


def test_on_failure_restarts_in_place_and_counts_it(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    script = marker_script(tmp_path / "master", "sys.exit(1)", "sys.exit(0)")
    submit(kubectl, ns, "inplace", {"Master": replica("OnFailure", script)}, restartScope="Replica")

    job = finished(kubectl, ns, "inplace")

    assert last_condition(job)["type"] == "Succeeded"
    assert job["status"]["restartCount"] == 1
    master = pod(kubectl, ns, "inplace-master-0")
    assert master["status"]["phase"] == "Succeeded"
    assert master["status"]["containerStatuses"][0]["restartCount"] == 1
    # One pod, so one uid ever: the restart happened in place.
    assert events(kubectl, ns, "inplace", "SuccessfulCreatePod") == ["Created pod: inplace-master-0"]
    # Once per exit seen: the first exit may go unseen if the restart outran the operator (then only
    # the latest is reported), but none is reported twice, however many passes ran.
    exits = events(kubectl, ns, "inplace", "ExitedWithCode")
    assert exits in (
        [f"Pod: {ns}.inplace-master-0 exited with code 0", f"Pod: {ns}.inplace-master-0 exited with code 1"],
        [f"Pod: {ns}.inplace-master-0 exited with code 0"],
    )


def test_exit_code_137_is_retried_by_recreating_the_pod(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    # The worker is SIGKILLed on its first run; the master finishes once the worker's second run started.
    second = tmp_path / "worker" / "1"
    master = (
        "import os, sys, time\n"
        "deadline = time.time() + 300\n"
        f"while not os.path.exists({str(second)!r}) and time.time() < deadline:\n"
        "    time.sleep(0.1)\n"
        f"sys.exit(0 if os.path.exists({str(second)!r}) else 2)\n"
    )
    worker = marker_script(tmp_path / "worker", SIGKILL_SELF, "sys.exit(0)")
    specs = {"Master": replica("ExitCode", master), "Worker": replica("ExitCode", worker)}
    submit(kubectl, ns, "killed", specs, restartScope="Replica")

    job = finished(kubectl, ns, "killed")

    assert last_condition(job)["type"] == "Succeeded", job["status"]
    assert job["status"]["restartCount"] == 1
    assert events(kubectl, ns, "killed", "SuccessfulDeletePod") == ["Deleted pod: killed-worker-0"]
    assert events(kubectl, ns, "killed", "SuccessfulCreatePod") == [
        "Created pod: killed-master-0",
        "Created pod: killed-worker-0",
        "Created pod: killed-worker-0",
    ]
    exits = events(kubectl, ns, "killed", "ExitedWithCode")
    assert exits.count(f"Pod: {ns}.killed-worker-0 exited with code 137") == 1
    assert exits.count(f"Pod: {ns}.killed-master-0 exited with code 0") == 1
    restarting = events(kubectl, ns, "killed", "PyTorchJobRestarting")
    assert restarting == ["PyTorchJob killed is restarting because 1 Worker replica(s) failed."]
    worker_pod = pod(kubectl, ns, "killed-worker-0")
    assert worker_pod["spec"]["restartPolicy"] == "Never"
    assert worker_pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_exit_code_1_is_permanent(kubectl: Kubectl, ns: str) -> None:
    submit(kubectl, ns, "broken", {"Master": replica("ExitCode", "raise SystemExit(1)")}, backoffLimit=5)

    job = finished(kubectl, ns, "broken")

    cond = last_condition(job)
    assert (cond["type"], cond["message"]) == ("Failed", 'job "broken" is failing because "Master" replica(s) failed.')
    assert job["status"]["completionTime"]
    assert "restartCount" not in job["status"]
    assert pod(kubectl, ns, "broken-master-0")["status"]["phase"] == "Failed"
    assert events(kubectl, ns, "broken", "SuccessfulCreatePod") == ["Created pod: broken-master-0"]


FAIL_3 = "print('attempt failed'); raise SystemExit(3)"
KILLED = f"print('attempt failed'); import os, signal; {SIGKILL_SELF}"
# (id, replica restartPolicy, restartScope, cleanPodPolicy, script, exit code)
BACKOFF_CASES = [
    ("gang-recreations-clean-running", "OnFailure", None, "Running", "print('attempt failed'); raise SystemExit(3)", 3),
    (
        "exit-code-recreations",
        "ExitCode",
        None,
        None,
        f"print('attempt failed'); import os, signal; {SIGKILL_SELF}",
        137,
    ),
    ("on-failure-in-place", "OnFailure", "Replica", None, "print('attempt failed'); raise SystemExit(3)", 3),
]


@pytest.mark.parametrize(
    ("policy", "scope", "clean", "script", "exit_code"),
    [c[1:] for c in BACKOFF_CASES],
    ids=[c[0] for c in BACKOFF_CASES],
)
def test_backoff_limit_exhaustion_fails_the_job_and_keeps_the_failed_pod(
    kubectl: Kubectl, ns: str, policy: str, scope: str | None, clean: str | None, script: str, exit_code: int
) -> None:
    run_policy: dict[str, Any] = {"backoffLimit": 2}
    if scope is not None:
        run_policy["restartScope"] = scope
    if clean is not None:
        run_policy["cleanPodPolicy"] = clean
    sleeper = replica("OnFailure", "import time; time.sleep(600)")
    submit(kubectl, ns, "doomed", {"Master": replica(policy, script), "Worker": sleeper}, **run_policy)

    job = finished(kubectl, ns, "doomed")

    cond = last_condition(job)
    assert (cond["type"], cond["reason"]) == ("Failed", "PyTorchJobFailed")
    assert cond["message"] == f"Job doomed {BACKOFF}"
    assert job["status"]["completionTime"]
    exits = events(kubectl, ns, "doomed", "ExitedWithCode")
    assert f"Pod: {ns}.doomed-master-0 exited with code {exit_code}" in exits
    if scope is None:
        # Two restarts of the whole gang were allowed; the third failure failed the job instead.
        assert job["status"]["restartCount"] == 2
        assert len(events(kubectl, ns, "doomed", "RestartingAllReplicas")) == 2
        assert events(kubectl, ns, "doomed", "SuccessfulCreatePod").count("Created pod: doomed-master-0") == 3
    else:
        # In place, the kubelet restarts without asking: the restart that exceeds the limit is seen after it.
        assert job["status"]["restartCount"] >= 3
        assert events(kubectl, ns, "doomed", "SuccessfulCreatePod").count("Created pod: doomed-master-0") == 1
    # As upstream since v1.9.4: cleanPodPolicy decides what stays. The replica that failed the job
    # keeps its pod and its logs (the attempt before, too, when it restarted in place).
    master = pod(kubectl, ns, "doomed-master-0")
    # Restarted in place, the current attempt may have just begun (its log still empty): every one prints it.
    eventually(
        lambda: "attempt failed" in kubectl("logs", "doomed-master-0", "-n", ns), timeout=60, what="the attempt's log"
    )
    if scope is None:
        assert master["status"]["phase"] == "Failed"
    else:
        assert "attempt failed" in kubectl("logs", "doomed-master-0", "-n", ns, "--previous")
    if clean == "Running":
        # The replica that was still running is stopped; the failed one stays.
        eventually(
            lambda: kubectl.run("get", "pod", "doomed-worker-0", "-n", ns).returncode != 0,
            what="the running worker to be deleted",
        )
        assert pod(kubectl, ns, "doomed-master-0")["status"]["phase"] == "Failed"


def test_whole_job_restart_recreates_every_replica(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    # The master waits forever on its first run (as a DDP rank would, for a peer that died); the
    # worker crashes on its first run. Only a restart of both lets the job succeed. The worker
    # crashes only once the master's first run has left its mark: the gang restart can come
    # sooner than a Python process starts, and a master stopped before it marked would count
    # its second run as its first.
    master = marker_script(tmp_path / "master", "time.sleep(600)", "sys.exit(0)")
    marks = str(tmp_path / "master")
    master_marked = f"while not (os.path.isdir({marks!r}) and os.listdir({marks!r})):\n        time.sleep(0.05)\n    "
    worker = marker_script(tmp_path / "worker", master_marked + "sys.exit(1)", "time.sleep(600)")
    submit(
        kubectl,
        ns,
        "ddp",
        {"Master": replica("OnFailure", master), "Worker": replica("OnFailure", worker)},
        restartScope="Job",
        backoffLimit=3,
    )

    job = finished(kubectl, ns, "ddp")

    assert last_condition(job)["type"] == "Succeeded", job["status"]
    assert job["status"]["restartCount"] == 1
    # Each replica ran exactly twice: once before the restart, once after.
    assert sorted(p.name for p in (tmp_path / "master").iterdir()) == ["0", "1"]
    assert sorted(p.name for p in (tmp_path / "worker").iterdir()) == ["0", "1"]
    assert events(kubectl, ns, "ddp", "SuccessfulDeletePod") == [
        "Deleted pod: ddp-master-0",
        "Deleted pod: ddp-worker-0",
    ]
    assert events(kubectl, ns, "ddp", "PyTorchJobRestarting") == [
        "PyTorchJob ddp is restarting all replicas because 1 Worker replica(s) failed"
        " (Worker 0 (pod ddp-worker-0) exited with code 1 (Error))."
    ]
    assert events(kubectl, ns, "ddp", "RestartingAllReplicas") == [
        "Restarting every replica of PyTorchJob ddp together (restart 1 of backoffLimit 3): "
        "Worker 0 (pod ddp-worker-0) exited with code 1 (Error)"
    ]
    assert f"Pod: {ns}.ddp-worker-0 exited with code 1" in events(kubectl, ns, "ddp", "ExitedWithCode")


def test_whole_job_pods_do_not_restart_in_place(kubectl: Kubectl, ns: str) -> None:
    submit(kubectl, ns, "scoped", {"Master": replica("OnFailure", "import time; time.sleep(600)")}, restartScope="Job")
    eventually(lambda: kubectl.run("get", "pod", "scoped-master-0", "-n", ns).returncode == 0, what="the pod")
    assert pod(kubectl, ns, "scoped-master-0")["spec"]["restartPolicy"] == "Never"
    assert get_job(kubectl, ns, "scoped")["spec"]["runPolicy"]["restartScope"] == "Job"


def test_restart_scope_is_validated(kubectl: Kubectl, ns: str) -> None:
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "bad-scope", "namespace": ns},
        "spec": {
            "runPolicy": {"restartScope": "Everything"},
            "pytorchReplicaSpecs": {"Master": replica("OnFailure", "")},
        },
    }
    result = kubectl.run("create", "-f", "-", input=json.dumps(body))
    assert result.returncode == 1
    assert "spec.runPolicy.restartScope" in result.stderr and "Unsupported value" in result.stderr


@pytest.mark.parametrize(
    ("container", "reason"),
    [
        ({"resources": {"requests": {"cpu": "100000"}}}, "Unschedulable"),
        (
            {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "absent", "key": "k"}}}]},
            "CreateContainerConfigError",
        ),
    ],
    ids=["unschedulable", "config-error"],
)
def test_pod_pending_too_long_gives_a_condition_naming_why(
    kubectl: Kubectl, ns: str, container: dict[str, Any], reason: str
) -> None:
    submit(kubectl, ns, "stuck", {"Master": replica("OnFailure", "pass", **container)})

    def pending() -> dict[str, Any] | None:
        conds = (get_job(kubectl, ns, "stuck").get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Pending" and c["status"] == "True"), None)

    cond = eventually(pending, timeout=60, what="the Pending condition")
    assert cond["reason"] == reason
    assert cond["message"].startswith("PyTorchJob stuck: pod stuck-master-0 has been pending for more than 2s")
    state = kubectl("get", "pytorchjob", "stuck", "-n", ns, "-o", "jsonpath={.status.conditions[-1:].type}")
    assert state == "Pending"
