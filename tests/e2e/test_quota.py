"""ResourceQuota and LimitRange on a real plane through the real kubectl: seed 001's quota applied
verbatim, a 4th PyTorchJob refused in kube-apiserver's words, a pod past the quota told as a job
event and created once the quota frees, ``status.used`` going down as pods finish."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

SEED_QUOTA = """
apiVersion: v1
kind: ResourceQuota
metadata:
  name: training-quota
spec:
  hard:
    # Max resources for all training jobs
    requests.cpu: "8"
    requests.memory: "16Gi"
    limits.cpu: "12"
    limits.memory: "24Gi"

    # Max concurrent jobs
    count/tfjobs.kubeflow.org: "3"
    count/pytorchjobs.kubeflow.org: "3"
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    # The node declares 16 CPUs: the seed's quota (8 CPUs of requests) binds before the node does.
    yield from own_plane(tmp_path_factory, "yard-quota", "--cpus", "16")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"quota-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def pytorchjob(name: str, cpu: str, seconds: float) -> dict[str, Any]:
    container = {
        "name": "pytorch",
        "image": "python:3.11",
        "command": ["python3", "-c", f"import time; time.sleep({seconds})"],
        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}, "limits": {"cpu": cpu, "memory": "256Mi"}},
    }
    template = {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template}}},
    }


def used(kubectl: Kubectl, ns: str) -> dict[str, str]:
    found: dict[str, str] = kubectl.json("get", "resourcequota", "training-quota", "-n", ns)["status"]["used"]
    return found


def test_the_seed_quota_refuses_a_fourth_job_and_a_pod_past_it_waits_for_room(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=SEED_QUOTA)
    assert kubectl.json("get", "quota", "training-quota", "-n", ns)["status"]["hard"]["requests.cpu"] == "8"
    kubectl("create", "-n", ns, "-f", "-", input=json.dumps(pytorchjob("big", "6", 4)))
    eventually(lambda: used(kubectl, ns).get("requests.cpu") == "6", timeout=60, what="the big pod to be charged")
    kubectl("create", "-n", ns, "-f", "-", input=json.dumps(pytorchjob("waits", "4", 0.1)))
    kubectl("create", "-n", ns, "-f", "-", input=json.dumps(pytorchjob("third", "1", 0.1)))
    fourth = kubectl.run("create", "-n", ns, "-f", "-", input=json.dumps(pytorchjob("fourth", "1", 0.1)))
    assert fourth.returncode != 0
    assert (
        'Error from server (Forbidden): error when creating "STDIN": pytorchjobs.kubeflow.org "fourth" is forbidden: '
        "exceeded quota: training-quota, requested: count/pytorchjobs.kubeflow.org=1, "
        "used: count/pytorchjobs.kubeflow.org=3, limited: count/pytorchjobs.kubeflow.org=3"
    ) in fourth.stderr, fourth.stderr

    def refused() -> str | None:
        events = kubectl.json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=waits")["items"]
        return next((e["message"] for e in events if e["reason"] == "FailedCreatePod"), None)

    told = eventually(refused, timeout=60, what="the quota refusal as the job's event")
    assert "exceeded quota: training-quota, requested: limits.cpu=4,requests.cpu=4" not in told  # only what is over
    assert 'pods "waits-master-0" is forbidden: exceeded quota: training-quota, requested: requests.cpu=4' in told, told

    def succeeded(name: str) -> bool:
        found = kubectl.json("get", "pytorchjob", name, "-n", ns)
        return any(c["type"] == "Succeeded" and c["status"] == "True" for c in found["status"].get("conditions", []))

    # When the big pod ends its cpu is given back, and the waiting job's pod is created.
    eventually(lambda: succeeded("waits"), timeout=120, what="the job that waited for quota to succeed")
    eventually(lambda: succeeded("third"), timeout=60, what="the third job to succeed")
    eventually(lambda: used(kubectl, ns)["requests.cpu"] == "0", timeout=60, what="status.used to go down")
    assert used(kubectl, ns)["count/pytorchjobs.kubeflow.org"] == "3"
    table = kubectl("get", "quota", "-n", ns)
    assert table.split("\n")[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"], table
    assert "count/pytorchjobs.kubeflow.org: 3/3" in table and "limits.cpu: 0/12" in table, table
