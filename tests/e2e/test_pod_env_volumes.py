"""Container environments on the local node, driven with kubectl: what a process sees is what a kubelet gives it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e

PRINT_ENV = "import json, os; print(json.dumps(dict(os.environ)))"


def apply(kubectl: Kubectl, *objects: dict[str, Any]) -> None:
    for obj in objects:
        kubectl("apply", "-f", "-", input=json.dumps(obj))


def pod(name: str, container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "env-test"}, "annotations": {"team": "ml"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {"name": "main", "image": "python:3.12", "command": ["python3", "-c", PRINT_ENV], **container}
            ],
        },
    }


def phase(kubectl: Kubectl, name: str) -> str:
    return kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}")


def printed_env(kubectl: Kubectl, name: str) -> dict[str, str]:
    eventually(lambda: phase(kubectl, name) in ("Succeeded", "Failed"), timeout=120, what=f"pod {name} to finish")
    assert phase(kubectl, name) == "Succeeded", kubectl("describe", "pod", name)
    env: dict[str, str] = json.loads(kubectl("logs", name).strip().splitlines()[-1])
    return env


def test_value_from_and_env_from_reach_the_process(kubectl: Kubectl) -> None:
    apply(
        kubectl,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "hp"}, "data": {"lr": "0.01", "EPOCHS": "3"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "stringData": {"token": "s3cret"}},
    )
    field_paths = {
        "POD_NAME": "metadata.name",
        "POD_NS": "metadata.namespace",
        "POD_UID": "metadata.uid",
        "APP": "metadata.labels['app']",
        "TEAM": "metadata.annotations['team']",
        "NODE": "spec.nodeName",
        "POD_IP": "status.podIP",
    }
    container = {
        "resources": {"limits": {"memory": "512Mi", "cpu": "2"}},
        "envFrom": [{"configMapRef": {"name": "hp"}, "prefix": "HP_"}],
        "env": [
            *({"name": k, "valueFrom": {"fieldRef": {"fieldPath": v}}} for k, v in field_paths.items()),
            {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "hp", "key": "lr"}}},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "MAYBE", "valueFrom": {"secretKeyRef": {"name": "absent", "key": "k", "optional": True}}},
            {"name": "MEM_MI", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "RUN", "value": "lr=$(LR) epochs=$(HP_EPOCHS) on $(NODE)"},
        ],
    }
    apply(kubectl, pod("env-pod", container))
    env = printed_env(kubectl, "env-pod")
    created = kubectl.json("get", "pod", "env-pod")
    node = created["spec"]["nodeName"]
    assert env["POD_NAME"] == "env-pod" and env["POD_NS"] == "default"
    assert env["POD_UID"] == created["metadata"]["uid"]
    assert (env["APP"], env["TEAM"], env["NODE"], env["POD_IP"]) == ("env-test", "ml", node, created["status"]["podIP"])
    assert (env["LR"], env["TOKEN"], env["HP_lr"], env["HP_EPOCHS"]) == ("0.01", "s3cret", "0.01", "3")
    assert "MAYBE" not in env
    assert (env["MEM_MI"], env["CPUS"]) == ("512", "2")
    assert env["RUN"] == f"lr=0.01 epochs=3 on {node}"


def test_missing_config_map_waits_with_the_kubelet_reason_then_runs(kubectl: Kubectl) -> None:
    container = {"env": [{"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "later", "key": "lr"}}}]}
    apply(kubectl, pod("waits", container))

    def waiting() -> dict[str, Any] | None:
        statuses = kubectl.json("get", "pod", "waits").get("status", {}).get("containerStatuses") or [{}]
        state: dict[str, Any] | None = statuses[0].get("state", {}).get("waiting")
        return state if state and state.get("reason") == "CreateContainerConfigError" else None

    state = eventually(waiting, timeout=60, what="the container to wait on its ConfigMap")
    assert state["message"] == 'configmap "later" not found'
    assert phase(kubectl, "waits") == "Pending"
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=waits")
    assert 'Error: configmap "later" not found' in events

    apply(kubectl, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"}, "data": {"other": "x"}})
    eventually(
        lambda: (waiting() or {}).get("message") == "couldn't find key lr in ConfigMap default/later",
        timeout=60,
        what="the message to name the missing key",
    )
    kubectl("patch", "configmap", "later", "--type=merge", "-p", '{"data": {"lr": "0.5"}}')
    assert printed_env(kubectl, "waits")["LR"] == "0.5"
