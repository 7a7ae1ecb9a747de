"""An elastic PyTorchJob with ``elasticPolicy.metrics`` gets its HorizontalPodAutoscaler (reference §9),
on a real ``yard up``, driven and checked with the real kubectl.

The HPA is read back with ``kubectl get hpa -o json`` and printed by ``kubectl get``/``describe``;
it follows the job's spec (and is put back when edited by hand), goes while the job is suspended,
comes back on resume, and is garbage-collected with the job. Its metrics have no values here
(``sleep`` replicas request no CPU, and no Pods metric has a source), so the plane's autoscaler
only records the current replicas and why it cannot scale (test_hpa_autoscaling scales one).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e

CPU_50 = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
QPS = {
    "type": "Pods",
    "pods": {"metric": {"name": "samples_per_second"}, "target": {"type": "AverageValue", "averageValue": "20"}},
}


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"hpa-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def elastic_job(ns: str, name: str) -> dict[str, Any]:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["sleep", "3600"]}
    worker = {
        "replicas": 2,
        "restartPolicy": "OnFailure",
        "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [container]}},
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "metrics": [CPU_50, QPS]},
            "pytorchReplicaSpecs": {"Worker": worker},
        },
    }


def get_hpa(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any] | None:
    result = kubectl.run("get", "hpa", name, "-n", ns, "-o", "json")
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
        return None
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def spec_of(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = (get_hpa(kubectl, ns, name) or {}).get("spec", {})
    return spec


def pods(kubectl: Kubectl, ns: str, *, replicas: bool = True) -> list[str]:
    """The namespace's pods: replicas only, or all (an elastic job also has its rendezvous host)."""
    selector = ["-l", "training.kubeflow.org/replica-type"] if replicas else []
    return kubectl("get", "pods", "-n", ns, *selector, "-o", "name").split()


def patch_job(kubectl: Kubectl, ns: str, name: str, patch: dict[str, Any]) -> None:
    kubectl("patch", "pytorchjob", name, "-n", ns, "--type=merge", "-p", json.dumps(patch))


def test_elastic_job_gets_its_hpa_which_follows_suspend_resume_and_deletion(kubectl: Kubectl, ns: str) -> None:
    name = "elastic"
    job = json.loads(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(elastic_job(ns, name))))

    hpa = eventually(lambda: get_hpa(kubectl, ns, name), timeout=90, what="the job's HPA")
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["kind"] == "HorizontalPodAutoscaler"
    assert hpa["metadata"]["namespace"] == ns
    assert hpa["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name},
        "minReplicas": 1,
        "maxReplicas": 3,
        "metrics": [CPU_50, QPS],
    }
    eventually(lambda: len(pods(kubectl, ns)) == 2, timeout=90, what="both workers")

    # kubectl prints it as kube-apiserver does; the short name and describe work too.
    table = kubectl("get", "hpa", "-n", ns).splitlines()
    assert table[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert table[1].split()[:2] == [name, f"PyTorchJob/{name}"]
    assert "cpu: <unknown>/50%, <unknown>/20" in table[1]
    assert table[1].split()[-4:-2] == ["1", "3"]
    status = eventually(lambda: (get_hpa(kubectl, ns, name) or {}).get("status", {}).get("currentReplicas"))
    assert status == 2  # the autoscaler read the job's /scale
    active = {c["type"]: c["reason"] for c in (get_hpa(kubectl, ns, name) or {})["status"]["conditions"]}
    assert active["ScalingActive"] == "FailedGetResourceMetric"  # the replicas request no CPU
    described = kubectl("describe", "horizontalpodautoscaler", name, "-n", ns)
    assert f"PyTorchJob/{name}" in described and "Min replicas:" in described
    resources = kubectl("api-resources", "--api-group=autoscaling", "--no-headers").split()
    assert resources == ["horizontalpodautoscalers", "hpa", "autoscaling/v2", "true", "HorizontalPodAutoscaler"]

    # The job's spec decides: a changed bound is written through, a hand edit is put back.
    patch_job(kubectl, ns, name, {"spec": {"elasticPolicy": {"maxReplicas": 4}}})
    eventually(lambda: spec_of(kubectl, ns, name).get("maxReplicas") == 4, what="maxReplicas 4")
    kubectl("patch", "hpa", name, "-n", ns, "--type=merge", "-p", json.dumps({"spec": {"minReplicas": 2}}))
    eventually(lambda: spec_of(kubectl, ns, name).get("minReplicas") == 1, what="minReplicas put back")

    # Suspended: no HPA (and no pods); resumed: a new one.
    patch_job(kubectl, ns, name, {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: get_hpa(kubectl, ns, name) is None, timeout=90, what="HPA deleted on suspend")
    eventually(lambda: not pods(kubectl, ns, replicas=False), timeout=90, what="pods deleted on suspend")
    patch_job(kubectl, ns, name, {"spec": {"runPolicy": {"suspend": False}}})
    again = eventually(lambda: get_hpa(kubectl, ns, name), timeout=90, what="HPA recreated on resume")
    assert again["metadata"]["uid"] != hpa["metadata"]["uid"]
    assert again["spec"]["maxReplicas"] == 4 and again["spec"]["metrics"] == [CPU_50, QPS]

    # Deleting the job garbage-collects its HPA.
    kubectl("delete", "pytorchjob", name, "-n", ns, "--wait=false")
    eventually(lambda: get_hpa(kubectl, ns, name) is None, timeout=90, what="HPA garbage-collected")


def test_an_hpa_is_validated_like_kube_apiserver(kubectl: Kubectl, ns: str) -> None:
    body = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "bad", "namespace": ns},
        "spec": {"scaleTargetRef": {"kind": "PyTorchJob", "name": "x"}, "minReplicas": 3, "maxReplicas": 2},
    }
    result = kubectl.run("create", "-f", "-", input=json.dumps(body))
    assert result.returncode != 0
    assert "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`" in result.stderr

    body["spec"] = {"scaleTargetRef": {"kind": "PyTorchJob", "name": "x"}, "maxReplicas": 2}
    made = json.loads(kubectl("create", "-f", "-", "-o", "json", input=json.dumps(body)))
    assert made["spec"]["minReplicas"] == 1
    assert made["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    ]
