"""The walking skeleton, driven only by real clients: kubectl and ``yard`` against ``yard up``.

A real PyTorchJob (DDP over gloo, two processes) is applied with plain ``kubectl apply``,
trains to completion, its master's log is read back through ``kubectl logs``, and deleting the
job garbage-collects its pods and Services through their ownerReferences.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO, Kubectl, Plane, eventually, start_plane
from trainyard.cluster import paths
from trainyard.cluster.paths import Layout
from trainyard.operator.settings import DEFAULT_HOST_PORTS, HOST_PORTS_ENV, parse_host_ports

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/pytorch-ddp/pytorchjob.yaml"
JOB_LABEL = "training.kubeflow.org/job-name=pytorch-ddp"


def job_state(kubectl: Kubectl) -> str:
    return kubectl("get", "pytorchjob", "pytorch-ddp", "-o", "jsonpath={.status.conditions[-1:].type}")


def test_pytorchjob_runs_end_to_end_through_kubectl(kubectl: Kubectl) -> None:
    assert "pytorchjob.kubeflow.org/pytorch-ddp created" in kubectl("apply", "-f", EXAMPLE)

    listing = kubectl("get", "pytorchjobs")
    assert re.search(r"^NAME\s+STATE\s+PROGRESS\s+EPOCH\s+AGE", listing, re.M), listing
    assert "pytorch-ddp" in listing

    # One headless Service per replica while the job runs; all removed once it finished.
    services = eventually(
        lambda: len(items := kubectl.json("get", "services", "-l", JOB_LABEL)["items"]) == 2 and items,
        timeout=120,
        what="the job's Services",
    )
    assert {s["metadata"]["name"] for s in services} == {"pytorch-ddp-master-0", "pytorch-ddp-worker-0"}
    assert all(s["spec"]["clusterIP"] == "None" for s in services)

    state = eventually(
        lambda: job_state(kubectl) in ("Succeeded", "Failed") and job_state(kubectl),
        timeout=300,
        what="the job to finish",
    )
    assert state == "Succeeded", kubectl("describe", "pytorchjob", "pytorch-ddp")

    job = kubectl.json("get", "pytorchjob", "pytorch-ddp")
    status = job["status"]
    assert [c["type"] for c in status["conditions"]][-1] == "Succeeded"
    assert {c["type"]: c["reason"] for c in status["conditions"]}["Created"] == "PyTorchJobCreated"
    assert status["startTime"] and status["completionTime"]
    assert status["replicaStatuses"]["Master"]["succeeded"] == 1
    # train.py reports every epoch through trainyard.runtime: the last one is in the status
    progress = status["trainingProgress"]
    assert (progress["progress"], progress["currentEpoch"], progress["totalEpochs"]) == ("100%", 10, 10), progress
    assert progress["metrics"]["accuracy"] >= 0.9 and progress["metrics"]["loss"] > 0, progress

    pods = kubectl.json("get", "pods", "-l", JOB_LABEL)["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["pytorch-ddp-master-0", "pytorch-ddp-worker-0"]
    master = next(p for p in pods if p["metadata"]["name"] == "pytorch-ddp-master-0")
    assert master["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    assert master["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
    env = {e["name"]: e.get("value") for e in master["spec"]["containers"][0]["env"]}
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["WORLD_SIZE"] == "2" and env["RANK"] == "0"
    # The master port comes from the plane's host-port range ($TRAINYARD_HOST_PORTS: a slice per xdist worker).
    low, high = parse_host_ports(os.environ.get(HOST_PORTS_ENV) or DEFAULT_HOST_PORTS)
    assert low <= int(env["MASTER_PORT"]) <= high, (env["MASTER_PORT"], low, high)
    eventually(
        lambda: not kubectl.json("get", "services", "-l", JOB_LABEL)["items"],
        what="the finished job's Services to be removed",
    )

    logs = kubectl("logs", "pytorch-ddp-master-0")
    accuracy = re.search(r"final test_accuracy=([0-9.]+)", logs)
    assert accuracy is not None, logs
    assert float(accuracy[1]) >= 0.9
    assert re.search(r"epoch 1/10 loss=\S+ train_accuracy=\S+ test_accuracy=\S+", logs)

    assert 'pytorchjob.kubeflow.org "pytorch-ddp" deleted' in kubectl("delete", "pytorchjob", "pytorch-ddp")
    eventually(
        lambda: not kubectl.json("get", "pods,services", "-l", JOB_LABEL)["items"],
        timeout=60,
        what="garbage collection of the job's pods and services",
    )


def test_invalid_job_gets_field_errors_not_a_traceback(kubectl: Kubectl) -> None:
    manifest = (REPO / EXAMPLE).read_text().replace("name: pytorch-ddp", "name: bad-job")
    manifest = manifest.replace("    Master:\n      replicas: 1", "    Master:\n      replicas: 2")
    manifest = manifest.replace("image: ghcr.io/trainyard/examples:latest", "image: ''", 1)
    result = kubectl.run("apply", "-f", "-", input=manifest)
    assert result.returncode != 0
    assert 'The PyTorchJob "bad-job" is invalid' in result.stderr
    assert "spec.pytorchReplicaSpecs.Master.replicas: Forbidden: must be 1" in result.stderr
    assert "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image: Required value" in result.stderr
    assert kubectl.run("get", "pytorchjob", "bad-job").returncode != 0


def test_errors_are_kubernetes_status_objects(kubectl: Kubectl) -> None:
    missing = kubectl.run("get", "pod", "no-such-pod")
    assert missing.returncode != 0
    assert 'Error from server (NotFound): pods "no-such-pod" not found' in missing.stderr

    manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: twice\ndata:\n  a: b\n"
    kubectl("create", "-f", "-", input=manifest)
    again = kubectl.run("create", "-f", "-", input=manifest)
    assert (
        'Error from server (AlreadyExists): error when creating "STDIN": configmaps "twice" already exists'
        in again.stderr
    )

    unknown = kubectl.run("get", "deployments")
    assert unknown.returncode != 0
    assert 'the server doesn\'t have a resource type "deployments"' in unknown.stderr


def _processes(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    return found.stdout.split()


POD_WITH_CHILD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  terminationGracePeriodSeconds: 2
  restartPolicy: Never
  containers:
    - name: main
      image: busybox
      command: ["python", "-c"]
      args:
        - |
          import signal, subprocess, sys, time
          subprocess.Popen(["sleep", "{seconds}"])
          signal.signal(signal.SIGTERM, signal.SIG_IGN)  # only SIGKILL after the grace period ends it
          print("ready", flush=True)
          time.sleep({seconds})
"""


def test_deleting_a_pod_ends_its_whole_process_group(kubectl: Kubectl) -> None:
    marker = "987651"
    kubectl("apply", "-f", "-", input=POD_WITH_CHILD.format(name="sleeper", seconds=marker))
    eventually(lambda: "ready" in kubectl("logs", "sleeper"), timeout=60, what="the pod to start")
    assert len(_processes(marker)) >= 2, "the python process and its sleep child should be running"

    assert 'pod "sleeper" deleted' in kubectl("delete", "pod", "sleeper", timeout=60)
    eventually(lambda: not _processes(marker), timeout=10, what="every process of the pod to end")
    assert kubectl.run("get", "pod", "sleeper").returncode != 0


def revision(kubectl: Kubectl) -> int:
    return int(
        json.loads(kubectl("get", "--raw", "/api/v1/namespaces/default/configmaps"))["metadata"]["resourceVersion"]
    )


def test_plane_restart_keeps_state_and_down_stops_training_processes(tmp_path_factory: pytest.TempPathFactory) -> None:
    plane = start_plane(tmp_path_factory.mktemp("restart-home"))
    try:
        kubectl = Kubectl(plane, tmp_path_factory.mktemp("cache"))
        kubectl("apply", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: keep\ndata:\n  a: b\n")
        before = revision(kubectl)
        status = plane.yard("status").stdout
        assert f"API server   {plane.url}" in status and "network mode host" in status

        plane.down()
        plane.up()
        assert kubectl("get", "configmap", "keep", "-o", "jsonpath={.data.a}") == "b"
        after = revision(kubectl)
        assert after >= before, "the global revision must never go backwards across restarts"

        marker = "987652"
        kubectl("apply", "-f", "-", input=POD_WITH_CHILD.format(name="long", seconds=marker))
        eventually(lambda: len(_processes(marker)) >= 2, timeout=60, what="the pod's processes to start")
    finally:
        plane.down()
    eventually(lambda: not _processes(marker), timeout=15, what="yard down to end the training processes")
    assert "not running" in plane.yard("status", check=False).stdout
    # Nor is anything left in memory (where the node keeps memory-backed volumes).
    assert not paths.memory_candidate(Layout(plane.home)).exists()


def test_yard_cli_is_installed_as_a_module() -> None:
    result = subprocess.run([sys.executable, "-m", "trainyard.cli.main", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "kubeconfig" in result.stdout


def test_plane_fixture_is_reachable(plane: Plane) -> None:
    assert plane.kubeconfig.exists()


def test_streaming_list_watch_ends_its_initial_events_with_a_bookmark(plane: Plane) -> None:
    # client-go's WatchList (kubectl >= 1.35 waits for deletions this way) relies on this marker.
    url = (
        f"{plane.url}/api/v1/namespaces?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
    )
    with plane.urlopen(url, timeout=10) as response:
        events = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    kinds = [e["type"] for e in events]
    assert kinds[: kinds.index("BOOKMARK")] and set(kinds[: kinds.index("BOOKMARK")]) == {"ADDED"}
    marker = events[kinds.index("BOOKMARK")]["object"]["metadata"]
    assert marker["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert int(marker["resourceVersion"]) > 0
