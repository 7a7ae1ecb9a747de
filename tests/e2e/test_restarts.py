"""Kubelet restart semantics on the local node, seen through kubectl against a real ``yard up``.

The plane here runs with ``--restart-backoff 0.2`` so the crash-loop schedule (0.2 s doubling to
6 s) plays out in seconds; real processes crash, restart in place in the same pod and leave the
previous run's log behind for ``kubectl logs --previous``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, free_port, own_plane

pytestmark = pytest.mark.e2e

# Fails the first time (no marker in the pod's working directory yet), succeeds the second.
FAIL_ONCE = (
    "import os, sys\n"
    "if os.path.exists('marker'):\n"
    "    print('second run', flush=True); sys.exit(0)\n"
    "open('marker', 'w').close()\n"
    "print('first run', flush=True); sys.exit(1)\n"
)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-restarts", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"restarts-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def run_pod(kubectl: Kubectl, ns: str, name: str, script: str, policy: str) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "restartPolicy": policy,
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "c", "image": "python:3.11", "command": ["python3", "-c", script]}],
        },
    }
    created: dict[str, Any] = json.loads(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(pod)))
    return created


def container(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    pod = kubectl.json("get", "pod", name, "-n", ns)
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return {"phase": pod["status"].get("phase"), "uid": pod["metadata"]["uid"], **statuses[0]}


def test_always_crash_loops_with_growing_back_off(kubectl: Kubectl, ns: str) -> None:
    uid = run_pod(kubectl, ns, "crash", "print('crashing', flush=True); raise SystemExit(3)", "Always")["metadata"][
        "uid"
    ]
    waiting = eventually(
        lambda: (c := container(kubectl, ns, "crash")).get("restartCount", 0) >= 2 and "waiting" in c["state"] and c,
        what="the container to wait out a back-off after restarts",
    )
    assert waiting["phase"] == "Running" and waiting["uid"] == uid
    assert waiting["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    message = waiting["state"]["waiting"]["message"]
    assert re.fullmatch(rf"back-off \d+(ms|s|\.\d+s) restarting failed container=c pod=crash_{ns}\({uid}\)", message)
    terminated = waiting["lastState"]["terminated"]
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    assert terminated["startedAt"] and terminated["finishedAt"]
    assert waiting["ready"] is False
    more = eventually(
        lambda: (c := container(kubectl, ns, "crash"))["restartCount"] >= waiting["restartCount"] + 2 and c,
        what="restartCount to keep growing",
    )
    assert more["uid"] == uid and more["phase"] == "Running"
    events = kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=crash,reason=BackOff")
    assert f"Back-off restarting failed container c in pod crash_{ns}({uid})" in events
    assert "Warning" in events
    listing = eventually(
        lambda: (out := kubectl("get", "pod", "crash", "-n", ns)) and "CrashLoopBackOff" in out and out,
        what="kubectl get to show CrashLoopBackOff",
    )
    restarts = int(listing.splitlines()[1].split()[3])
    assert restarts >= 2
    assert kubectl("logs", "crash", "-n", ns, "--previous").strip() == "crashing"


def test_on_failure_restarts_in_place_then_succeeds(kubectl: Kubectl, ns: str) -> None:
    uid = run_pod(kubectl, ns, "once", FAIL_ONCE, "OnFailure")["metadata"]["uid"]
    done = eventually(
        lambda: (c := container(kubectl, ns, "once"))["phase"] in ("Succeeded", "Failed") and c,
        what="the pod to finish",
    )
    assert done["phase"] == "Succeeded" and done["uid"] == uid and done["restartCount"] == 1
    assert done["state"]["terminated"]["exitCode"] == 0 and done["state"]["terminated"]["reason"] == "Completed"
    assert done["lastState"]["terminated"]["exitCode"] == 1 and done["lastState"]["terminated"]["reason"] == "Error"
    assert kubectl("logs", "once", "-n", ns).strip() == "second run"
    assert kubectl("logs", "once", "-n", ns, "--previous").strip() == "first run"


@pytest.mark.parametrize(("policy", "code", "phase"), [("Never", 1, "Failed"), ("OnFailure", 0, "Succeeded")])
def test_no_restart_keeps_the_pod_terminal(kubectl: Kubectl, ns: str, policy: str, code: int, phase: str) -> None:
    run_pod(kubectl, ns, "single", f"print('only run', flush=True); raise SystemExit({code})", policy)
    done = eventually(
        lambda: (c := container(kubectl, ns, "single"))["phase"] in ("Succeeded", "Failed") and c,
        what="the pod to finish",
    )
    assert done["phase"] == phase and done["restartCount"] == 0 and done["lastState"] == {}
    assert done["state"]["terminated"]["exitCode"] == code
    previous = kubectl.run("logs", "single", "-n", ns, "--previous")
    assert previous.returncode == 1
    assert 'previous terminated container "c" in pod "single" not found' in previous.stderr
    assert kubectl("logs", "single", "-n", ns).strip() == "only run"


def pytorchjob(name: str, ns: str, policy: str, script: str, **run_policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "runPolicy": run_policy,
            "pytorchReplicaSpecs": {
                "Master": {
                    "replicas": 1,
                    "restartPolicy": policy,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", script]}
                            ]
                        }
                    },
                }
            },
        },
    }


def job_condition(kubectl: Kubectl, ns: str, name: str) -> str:
    return kubectl("get", "pytorchjob", name, "-n", ns, "-o", "jsonpath={.status.conditions[-1:].type}")


def test_pytorchjob_on_failure_restarts_in_the_same_pod(kubectl: Kubectl, ns: str) -> None:
    # Upstream's per-replica restart (a one-replica world is static, so it would restart as a gang).
    body = pytorchjob("flaky", ns, "OnFailure", FAIL_ONCE, restartScope="Replica")
    kubectl("create", "-f", "-", input=json.dumps(body))
    # The operator creates the pod shortly after the job: until then `kubectl get` fails.
    eventually(lambda: kubectl.run("get", "pod", "flaky-master-0", "-n", ns).returncode == 0, what="the master pod")
    first = container(kubectl, ns, "flaky-master-0")
    state = eventually(
        lambda: (s := job_condition(kubectl, ns, "flaky")) in ("Succeeded", "Failed") and s,
        timeout=120,
        what="the job to finish",
    )
    assert state == "Succeeded"
    master = container(kubectl, ns, "flaky-master-0")
    assert master["uid"] == first["uid"] and master["restartCount"] == 1 and master["phase"] == "Succeeded"
    assert kubectl("logs", "flaky-master-0", "-n", ns, "--previous").strip() == "first run"


def test_pytorchjob_exit_code_policy_still_fails_the_pod(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "-f", "-", input=json.dumps(pytorchjob("exits", ns, "ExitCode", "raise SystemExit(1)")))
    state = eventually(
        lambda: (s := job_condition(kubectl, ns, "exits")) in ("Succeeded", "Failed") and s,
        timeout=120,
        what="the job to finish",
    )
    assert state == "Failed"
    pod = kubectl.json("get", "pod", "exits-master-0", "-n", ns)
    assert pod["spec"]["restartPolicy"] == "Never" and pod["status"]["phase"] == "Failed"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 0


def test_restart_backoff_option_is_validated(tmp_path: Path) -> None:
    result = Plane(tmp_path, free_port()).yard("up", "--restart-backoff", "0", check=False)
    assert result.returncode == 2 and "restart back-off must be a positive number of seconds" in result.stderr
