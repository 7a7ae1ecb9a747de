"""ResourceQuota on the real plane through the real kubectl: seed 001's quota applied verbatim,
the 4th PyTorchJob and a pod past ``requests.cpu`` refused with kube-apiserver's words,
``status.used`` falling when a pod finishes, and the operator (``FailedCreatePod``) and the
embedded Job controller (``FailedCreate``) telling a quota-refused pod on its job and going on
once the namespace's usage falls."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from gang_jobs import job_events, state

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e

SEED_QUOTA = """
apiVersion: v1
kind: ResourceQuota
metadata:
  name: training-quota
spec:
  hard:
    requests.cpu: "8"
    requests.memory: "16Gi"
    limits.cpu: "12"
    limits.memory: "24Gi"
    count/tfjobs.kubeflow.org: "3"
    count/pytorchjobs.kubeflow.org: "3"
"""


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"quota-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def pytorchjob(name: str, *, suspend: bool = False, command: str = "print('ok')") -> str:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", command]}
    spec: dict[str, Any] = {
        "pytorchReplicaSpecs": {"Master": {"restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}}
    }
    if suspend:
        spec["runPolicy"] = {"suspend": True}
    return json.dumps({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": spec})


def pod(name: str, cpu: str, command: str = "pass") -> str:
    resources = {"cpu": cpu, "memory": "64Mi"}
    container = {
        "name": "main",
        "image": "python:3.11",
        "command": ["python3", "-c", command],
        "resources": {"requests": resources, "limits": resources},
    }
    spec = {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1, "containers": [container]}
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


def used(kubectl: Kubectl, ns: str, quota: str, key: str) -> str:
    return str(kubectl.json("get", "resourcequota", quota, "-n", ns)["status"]["used"][key])


def test_seed_001s_quota_counts_jobs_and_pods_as_kube_does(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input=SEED_QUOTA)
    listed = kubectl("get", "resourcequota", "-n", ns).splitlines()
    assert listed[0].split() == ["NAME", "AGE", "REQUEST", "LIMIT"], listed
    assert "count/pytorchjobs.kubeflow.org: 0/3, count/tfjobs.kubeflow.org: 0/3, requests.cpu: 0/8," in listed[1]
    assert "limits.cpu: 0/12, limits.memory: 0/24Gi" in listed[1], listed
    described = [line.split() for line in kubectl("describe", "quota", "training-quota", "-n", ns).splitlines()]
    assert ["requests.memory", "0", "16Gi"] in described, described

    for i in range(3):
        kubectl("apply", "-n", ns, "-f", "-", input=pytorchjob(f"job-{i}", suspend=True))
    fourth = kubectl.run("apply", "-n", ns, "-f", "-", input=pytorchjob("job-3", suspend=True))
    assert fourth.returncode != 0
    assert (
        'Error from server (Forbidden): error when creating "STDIN": pytorchjobs.kubeflow.org "job-3" is '
        "forbidden: exceeded quota: training-quota, requested: count/pytorchjobs.kubeflow.org=1, "
        "used: count/pytorchjobs.kubeflow.org=3, limited: count/pytorchjobs.kubeflow.org=3"
    ) in fourth.stderr, fourth.stderr

    big = kubectl.run("apply", "-n", ns, "-f", "-", input=pod("big", "9"))
    assert big.returncode != 0
    assert (
        'pods "big" is forbidden: exceeded quota: training-quota, requested: requests.cpu=9, '
        "used: requests.cpu=0, limited: requests.cpu=8"
    ) in big.stderr, big.stderr
    bare = kubectl.run("run", "bare", "-n", ns, "--image=python:3.11", "--restart=Never", "--", "true")
    assert "failed quota: training-quota: must specify limits.cpu for: bare; limits.memory for: bare;" in bare.stderr

    kubectl("apply", "-n", ns, "-f", "-", input=pod("small", "1500m", "import time; time.sleep(1)"))
    assert used(kubectl, ns, "training-quota", "requests.cpu") == "1500m"
    eventually(
        lambda: used(kubectl, ns, "training-quota", "requests.cpu") == "0",
        timeout=30,
        what="the finished pod's CPU to leave the quota's usage",
    )
    assert kubectl("get", "pod", "small", "-n", ns, "-o", "jsonpath={.status.phase}") == "Succeeded"


def batch_job(name: str) -> str:
    container = {"name": "main", "image": "python:3.11", "command": ["python3", "-c", "pass"]}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return json.dumps(
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": {"template": template}}
    )


def test_controllers_tell_a_quota_refused_pod_and_go_on_once_usage_falls(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "quota", "slots", "-n", ns, "--hard=pods=2")  # kubectl sends this one as protobuf
    for blocker in ("blocker-a", "blocker-b"):
        kubectl("apply", "-n", ns, "-f", "-", input=pod(blocker, "100m", "import time; time.sleep(4)"))
    kubectl("apply", "-n", ns, "-f", "-", input=pytorchjob("waits"))
    kubectl("apply", "-n", ns, "-f", "-", input=batch_job("batch"))
    told = eventually(
        lambda: [m for r, m in job_events(kubectl, ns, "waits") if r == "FailedCreatePod"],
        timeout=30,
        what="the PyTorchJob's FailedCreatePod event",
    )
    assert told[0] == (
        'Error creating: pods "waits-master-0" is forbidden: exceeded quota: slots, requested: pods=1, '
        "used: pods=2, limited: pods=2"
    ), told

    # ... and the job's Created condition says it while the pod waits.
    def created_message() -> str:
        found = kubectl.json("get", "pytorchjob", "waits", "-n", ns)
        return next(c["message"] for c in found["status"]["conditions"] if c["type"] == "Created")

    waiting = eventually(lambda: "waits:" in created_message() and created_message(), timeout=30, what="the condition")
    assert waiting == (
        'PyTorchJob waits is created. Pod waits-master-0 waits: pods "waits-master-0" is forbidden: '
        "exceeded quota: slots, requested: pods=1, used: pods=2, limited: pods=2"
    ), waiting
    listing = kubectl.json("get", "events", "-n", ns, "--field-selector", "involvedObject.kind=Job,reason=FailedCreate")
    said = [e["message"] for e in listing["items"]]
    assert (
        said
        and said[0].startswith('Error creating: pods "batch-')
        and said[0].endswith("is forbidden: exceeded quota: slots, requested: pods=1, used: pods=2, limited: pods=2")
    ), said
    eventually(lambda: state(kubectl, ns, "waits") == "Succeeded", timeout=60, what="the job to run once quota frees")
    assert created_message() == "PyTorchJob waits is created."
    eventually(
        lambda: kubectl("get", "job", "batch", "-n", ns, "-o", "jsonpath={.status.succeeded}") == "1",
        timeout=60,
        what="the batch Job to run once quota frees",
    )
