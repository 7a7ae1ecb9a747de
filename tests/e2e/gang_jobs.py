"""Shared by the gang-scheduling e2e modules: a two-replica PyTorchJob whose pods each request one
CPU, so that on a plane declared with ``--cpus 3`` one such gang fits and a second does not."""

from __future__ import annotations

import json
from typing import Any

from conftest import Kubectl

JOB_LABEL = "training.kubeflow.org/job-name"


def gang_job(name: str, ns: str, command: list[str], policy: dict[str, Any] | None = None) -> str:
    def replica(replicas: int | None) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "pytorch",
                            "image": "python:3.11",
                            "command": command,
                            "resources": {"requests": {"cpu": "1"}},
                        }
                    ],
                }
            },
        }
        if replicas is not None:
            spec["replicas"] = replicas
        return spec

    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(None), "Worker": replica(1)}},
    }
    if policy is not None:
        body["spec"]["runPolicy"] = {"schedulingPolicy": policy}
    return json.dumps(body)


def pods_of(kubectl: Kubectl, ns: str, job: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = kubectl.json("get", "pods", "-n", ns, "-l", f"{JOB_LABEL}={job}")["items"]
    return items


def state(kubectl: Kubectl, ns: str, job: str) -> str:
    return kubectl("get", "pytorchjob", job, "-n", ns, "-o", "jsonpath={.status.conditions[-1:].type}")


def running(kubectl: Kubectl, ns: str, job: str) -> bool:
    pods = pods_of(kubectl, ns, job)
    return len(pods) == 2 and all(p["status"].get("phase") == "Running" for p in pods)


def refused(pod: dict[str, Any]) -> bool:
    """The scheduler looked at the pod and left it unplaced."""
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable"
        for c in pod["status"].get("conditions") or []
    )


def job_events(kubectl: Kubectl, ns: str, job: str) -> list[tuple[str, str]]:
    listing = kubectl.json(
        "get", "events", "-n", ns, "--field-selector", f"involvedObject.kind=PyTorchJob,involvedObject.name={job}"
    )
    return [(e["reason"], e["message"]) for e in listing["items"]]
