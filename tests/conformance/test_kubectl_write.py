"""kubectl's write commands against the embedded plane: apply (create, then strategic merge patch
for built-ins and merge patch for custom resources), create, replace, diff, patch of every type
and of the status subresource, label, annotate, scale, wait and run.

Only the real ``kubectl`` is driven; every assertion reads what it printed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from kubectl_helpers import (
    SLEEPER,
    Streamer,
    apply,
    configmap,
    create,
    ensure_widget_crd,
    manifest,
    namespace,
    pod,
    wait_running,
    widget,
)

from conftest import Kubectl

pytestmark = pytest.mark.e2e

GENERIC_422 = "The request is invalid: the server rejected our request due to an error in our request"


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    yield from namespace(kubectl, "write")


def service(
    ns: str, labels: dict[str, str], annotations: dict[str, str], ports: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns, "labels": labels, "annotations": annotations},
        "spec": {"selector": {"app": "web"}, "ports": ports},
    }


def test_apply_creates_then_strategic_merge_patches_a_service(kubectl: Kubectl, ns: str) -> None:
    first = service(
        ns,
        {"app": "web", "stage": "dev"},
        {"owner": "alice"},
        [{"name": "http", "port": 80, "targetPort": 8080}, {"name": "metrics", "port": 9090}],
    )
    assert apply(kubectl, first).strip() == "service/web created"
    # A field the manifest never mentions (set by hand here) must survive the three-way patch.
    assert kubectl("label", "service", "web", "-n", ns, "added-by=hand").strip() == "service/web labeled"

    second = service(
        ns,
        {"app": "web"},
        {"owner": "bob"},
        [{"name": "metrics", "port": 9090, "targetPort": 9091}, {"name": "https", "port": 443, "targetPort": 8443}],
    )
    assert apply(kubectl, second).strip() == "service/web configured"

    raw = kubectl("get", "service", "web", "-n", ns, "-o", "json")
    assert "$setElementOrder" not in raw and "$patch" not in raw and "$retainKeys" not in raw
    live = json.loads(raw)
    assert live["metadata"]["labels"] == {"app": "web", "added-by": "hand"}
    assert live["metadata"]["annotations"]["owner"] == "bob"
    last_applied = json.loads(live["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last_applied["spec"]["ports"] == second["spec"]["ports"]
    # Ports merge by their key (port), keep the manifest's order, and the new one is defaulted.
    assert live["spec"]["ports"] == [
        {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": 9091},
        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8443},
    ]

    rv = live["metadata"]["resourceVersion"]
    assert apply(kubectl, second).strip() == "service/web unchanged"
    assert kubectl("get", "service", "web", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}") == rv


def test_apply_strategic_merge_patches_a_running_pod(kubectl: Kubectl, ns: str) -> None:
    two = pod("duo", ns, SLEEPER, labels={"app": "duo", "stage": "dev"})
    two["metadata"]["annotations"] = {"note": "one"}
    two["spec"]["containers"].append({"name": "side", "image": "python:3.11", "command": ["python3", "-c", SLEEPER]})
    assert apply(kubectl, two).strip() == "pod/duo created"
    wait_running(kubectl, ns, "duo")

    two["metadata"]["labels"] = {"app": "duo", "tier": "fe"}
    two["metadata"]["annotations"] = {"note": "two"}
    two["spec"]["containers"][1]["image"] = "python:3.12"
    assert apply(kubectl, two).strip() == "pod/duo configured"
    raw = kubectl("get", "pod", "duo", "-n", ns, "-o", "json")
    assert "$setElementOrder" not in raw
    live = json.loads(raw)
    assert live["metadata"]["labels"] == {"app": "duo", "tier": "fe"}
    assert live["metadata"]["annotations"]["note"] == "two"
    containers = live["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("c", "python:3.11"), ("side", "python:3.12")]
    assert all(c["command"] == ["python3", "-c", SLEEPER] for c in containers)
    assert live["status"]["phase"] == "Running" and live["spec"]["nodeName"]

    # Like a kubelet, the node cannot change a running container's command: the server refuses.
    two["spec"]["containers"][0]["command"] = ["python3", "-c", "print('other')"]
    refused = kubectl.run("apply", "-f", "-", input=manifest(two))
    assert refused.returncode == 1
    assert 'The Pod "duo" is invalid: spec: Forbidden: pod updates may not change fields other than' in refused.stderr
    assert kubectl("get", "pod", "duo", "-n", ns, "-o", "jsonpath={.spec.containers[0].command[2]}") == SLEEPER


def test_apply_merge_patches_a_custom_resource(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    first = widget("gear", ns, size=3, color="red", replicas=1)
    assert apply(kubectl, first).strip() == "widget.example.com/gear created"
    second = widget("gear", ns, size=4, replicas=1, shape="round")
    assert apply(kubectl, second).strip() == "widget.example.com/gear configured"
    live = kubectl.json("get", "widget", "gear", "-n", ns)
    assert live["spec"] == {"size": 4, "replicas": 1, "shape": "round"}
    assert live["metadata"]["generation"] == 2
    assert apply(kubectl, second).strip() == "widget.example.com/gear unchanged"


def test_apply_a_list_validates_and_applies_each_item(kubectl: Kubectl, ns: str) -> None:
    # kubectl checks a `kind: List` against /openapi/v2 (not v3) before sending its items.
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "listed", "namespace": ns}}
    svc = service(ns, {"app": "web"}, {}, [{"port": 80}])
    items = {"apiVersion": "v1", "kind": "List", "items": [{**config, "data": {"k": "1"}}, svc]}
    assert apply(kubectl, items).splitlines() == ["configmap/listed created", "service/web created"]
    items["items"][0]["data"] = {"k": "2"}
    assert apply(kubectl, items).splitlines() == ["configmap/listed configured", "service/web unchanged"]
    assert kubectl.json("get", "configmap", "listed", "-n", ns)["data"] == {"k": "2"}
    typo = {"apiVersion": "v1", "kind": "List", "items": [{**config, "metadata": {**config["metadata"], "lables": {}}}]}
    result = kubectl.run("apply", "-f", "-", input=manifest(typo))
    assert result.returncode != 0 and 'unknown field "metadata.lables"' in result.stderr, result.stderr


def test_create_and_replace(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    assert create(kubectl, widget("w1", ns, size=1)).strip() == "widget.example.com/w1 created"
    again = kubectl.run("create", "-f", "-", input=manifest(widget("w1", ns, size=1)))
    assert again.returncode == 1
    assert (
        'Error from server (AlreadyExists): error when creating "STDIN": widgets.example.com "w1" already exists'
        in again.stderr
    )

    live = kubectl.json("get", "widget", "w1", "-n", ns)
    live["spec"]["size"] = 2
    assert kubectl("replace", "-f", "-", input=json.dumps(live)).strip() == "widget.example.com/w1 replaced"
    assert kubectl("get", "widget", "w1", "-n", ns, "-o", "jsonpath={.spec.size}") == "2"

    live["spec"]["size"] = 3  # still carries the resourceVersion read before the first replace
    stale = kubectl.run("replace", "-f", "-", input=json.dumps(live))
    assert stale.returncode == 1
    assert (
        'Error from server (Conflict): error when replacing "STDIN": Operation cannot be fulfilled on '
        'widgets.example.com "w1": the object has been modified' in stale.stderr
    )
    assert kubectl("get", "widget", "w1", "-n", ns, "-o", "jsonpath={.spec.size}") == "2"

    # Without a resourceVersion a replace is unconditional.
    replaced = kubectl("replace", "-f", "-", input=manifest(widget("w1", ns, size=5)))
    assert replaced.strip() == "widget.example.com/w1 replaced"
    assert kubectl.json("get", "widget", "w1", "-n", ns)["spec"] == {"size": 5}

    create(kubectl, configmap("cfg", ns, {"a": "1"}))
    assert kubectl("replace", "-f", "-", input=manifest(configmap("cfg", ns, {"b": "2"}))).strip() == (
        "configmap/cfg replaced"
    )
    assert kubectl.json("get", "configmap", "cfg", "-n", ns)["data"] == {"b": "2"}


def test_diff_and_server_dry_runs_persist_nothing(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    apply(kubectl, configmap("cfg", ns, {"a": "1"}))
    apply(kubectl, widget("gear", ns, size=1))
    rv = kubectl("get", "configmap", "cfg", "-n", ns, "-o", "jsonpath={.metadata.resourceVersion}")

    same = kubectl.run("diff", "-f", "-", input=manifest(configmap("cfg", ns, {"a": "1"})))
    assert (same.returncode, same.stdout) == (0, "")

    changed = kubectl.run("diff", "-f", "-", input=manifest(configmap("cfg", ns, {"a": "2", "b": "3"})))
    assert changed.returncode == 1, changed.stderr
    assert re.search(r'^-  a: "1"$', changed.stdout, re.M) and re.search(r'^\+  a: "2"$', changed.stdout, re.M)
    assert re.search(r'^\+  b: "3"$', changed.stdout, re.M)
    live = kubectl.json("get", "configmap", "cfg", "-n", ns)
    assert live["data"] == {"a": "1"} and live["metadata"]["resourceVersion"] == rv

    cr = kubectl.run("diff", "-f", "-", input=manifest(widget("gear", ns, size=7)))
    assert cr.returncode == 1 and re.search(r"^\+  size: 7$", cr.stdout, re.M), cr.stdout + cr.stderr
    assert kubectl("get", "widget", "gear", "-n", ns, "-o", "jsonpath={.spec.size}") == "1"

    new = kubectl.run("diff", "-f", "-", input=manifest(configmap("fresh", ns, {"k": "v"})))
    assert new.returncode == 1 and re.search(r"^\+  name: fresh$", new.stdout, re.M)
    assert kubectl.run("get", "configmap", "fresh", "-n", ns).returncode == 1

    dry = apply(kubectl, configmap("cfg", ns, {"a": "9"}), "--dry-run=server")
    assert dry.strip() == "configmap/cfg configured (server dry run)"
    kubectl("patch", "configmap", "cfg", "-n", ns, "-p", '{"data":{"a":"8"}}', "--dry-run=server")
    kubectl("label", "configmap", "cfg", "-n", ns, "x=y", "--dry-run=server")
    kubectl("replace", "-f", "-", "--dry-run=server", input=manifest(configmap("cfg", ns, {"z": "1"})))
    assert kubectl("delete", "configmap", "cfg", "-n", ns, "--dry-run=server").strip() == (
        'configmap "cfg" deleted (server dry run)'
    )
    live = kubectl.json("get", "configmap", "cfg", "-n", ns)
    assert live["data"] == {"a": "1"} and "labels" not in live["metadata"]
    assert live["metadata"]["resourceVersion"] == rv


def test_patch_strategic_merge_json_and_errors(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    create(
        kubectl,
        service(ns, {"app": "web"}, {}, [{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}]),
    )
    # Strategic merge (the default): the list entry with port 9090 is merged, the other one kept.
    out = kubectl("patch", "service", "web", "-n", ns, "-p", '{"spec":{"ports":[{"port":9090,"targetPort":9999}]}}')
    assert out.strip() == "service/web patched"
    ports = kubectl.json("get", "service", "web", "-n", ns)["spec"]["ports"]
    assert [(p["port"], p["targetPort"]) for p in ports] == [(80, 80), (9090, 9999)]
    unchanged = kubectl("patch", "service", "web", "-n", ns, "-p", '{"spec":{"ports":[{"port":80}]}}')
    assert unchanged.strip() == "service/web patched (no change)"

    create(kubectl, widget("gear", ns, size=1, color="red"))
    smp = kubectl.run("patch", "widget", "gear", "-n", ns, "-p", '{"spec":{"size":2}}')
    assert smp.returncode == 1
    assert "application/strategic-merge-patch+json is not supported by example.com/v1, Kind=Widget" in smp.stderr
    assert "accepted media types include: application/json-patch+json, application/merge-patch+json" in smp.stderr

    merged = kubectl("patch", "widget", "gear", "-n", ns, "--type=merge", "-p", '{"spec":{"size":2,"color":null}}')
    assert merged.strip() == "widget.example.com/gear patched"
    assert kubectl.json("get", "widget", "gear", "-n", ns)["spec"] == {"size": 2}

    ops = [
        {"op": "test", "path": "/spec/size", "value": 2},
        {"op": "add", "path": "/spec/color", "value": "green"},
        {"op": "replace", "path": "/spec/size", "value": 3},
    ]
    assert kubectl("patch", "widget", "gear", "-n", ns, "--type=json", "-p", json.dumps(ops)).strip() == (
        "widget.example.com/gear patched"
    )
    assert kubectl.json("get", "widget", "gear", "-n", ns)["spec"] == {"size": 3, "color": "green"}

    failing = [{"op": "test", "path": "/spec/size", "value": 99}, {"op": "replace", "path": "/spec/size", "value": 0}]
    result = kubectl.run("patch", "widget", "gear", "-n", ns, "--type=json", "-p", json.dumps(failing))
    assert result.returncode == 1 and GENERIC_422 in result.stderr
    missing = [{"op": "remove", "path": "/spec/nothing"}]
    result = kubectl.run("patch", "service", "web", "-n", ns, "--type=json", "-p", json.dumps(missing))
    assert result.returncode == 1 and GENERIC_422 in result.stderr
    assert kubectl("get", "widget", "gear", "-n", ns, "-o", "jsonpath={.spec.size}") == "3"

    not_a_list = kubectl.run("patch", "widget", "gear", "-n", ns, "--type=json", "-p", '{"op":"add"}')
    assert not_a_list.returncode == 1 and "Error from server (BadRequest)" in not_a_list.stderr


def test_patch_status_subresource(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    create(kubectl, widget("gear", ns, size=1))
    status = '{"status":{"replicas":2,"conditions":[{"type":"Ready","status":"False"}]}}'
    out = kubectl("patch", "widget", "gear", "-n", ns, "--subresource=status", "--type=merge", "-p", status)
    assert out.strip() == "widget.example.com/gear patched"
    live = kubectl.json("get", "widget", "gear", "-n", ns)
    assert live["status"] == {"replicas": 2, "conditions": [{"type": "Ready", "status": "False"}]}
    assert live["spec"] == {"size": 1} and live["metadata"]["generation"] == 1

    # With a status subresource the main endpoint ignores status.
    ignored = kubectl("patch", "widget", "gear", "-n", ns, "--type=merge", "-p", '{"status":{"replicas":9}}')
    assert ignored.strip() == "widget.example.com/gear patched (no change)"
    assert kubectl("get", "widget", "gear", "-n", ns, "-o", "jsonpath={.status.replicas}") == "2"

    create(kubectl, pod("runner", ns, SLEEPER))
    wait_running(kubectl, ns, "runner")
    # Strategic merge on pod status: conditions merge by type, the kubelet's ones stay.
    gate = '{"status":{"conditions":[{"type":"example.com/Gate","status":"True"}]}}'
    out = kubectl("patch", "pod", "runner", "-n", ns, "--subresource=status", "-p", gate)
    assert out.strip() == "pod/runner patched"
    conditions = kubectl.json("get", "pod", "runner", "-n", ns)["status"]["conditions"]
    by_type = {c["type"]: c["status"] for c in conditions}
    assert by_type["example.com/Gate"] == "True" and by_type["Ready"] == "True" and "PodScheduled" in by_type


def test_label_and_annotate(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)
    create(kubectl, configmap("one", ns, labels={"group": "g"}))
    create(kubectl, configmap("two", ns, labels={"group": "g"}))
    create(kubectl, widget("gear", ns, size=1))

    def labels(kind: str, name: str) -> dict[str, str]:
        return kubectl.json("get", kind, name, "-n", ns)["metadata"].get("labels") or {}

    def annotations(kind: str, name: str) -> dict[str, str]:
        found = kubectl.json("get", kind, name, "-n", ns)["metadata"].get("annotations") or {}
        return {k: v for k, v in found.items() if not k.startswith("kubectl.kubernetes.io/")}

    assert kubectl("label", "configmap", "one", "-n", ns, "tier=fe").strip() == "configmap/one labeled"
    clash = kubectl.run("label", "configmap", "one", "-n", ns, "tier=be")
    assert clash.returncode == 1 and "'tier' already has a value (fe), and --overwrite is false" in clash.stderr
    assert labels("configmap", "one") == {"group": "g", "tier": "fe"}
    kubectl("label", "configmap", "one", "-n", ns, "tier=be", "--overwrite")
    assert labels("configmap", "one") == {"group": "g", "tier": "be"}
    assert kubectl("label", "configmap", "one", "-n", ns, "tier-").strip() == "configmap/one unlabeled"
    assert labels("configmap", "one") == {"group": "g"}

    out = kubectl("label", "configmaps", "-n", ns, "-l", "group=g", "checked=yes")
    assert sorted(out.split("\n")[:-1]) == ["configmap/one labeled", "configmap/two labeled"]
    assert labels("configmap", "two") == {"group": "g", "checked": "yes"}

    assert kubectl("label", "widget", "gear", "-n", ns, "shiny=true").strip() == "widget.example.com/gear labeled"
    assert labels("widget", "gear") == {"shiny": "true"}

    assert kubectl("annotate", "widget", "gear", "-n", ns, "note=first").strip() == "widget.example.com/gear annotated"
    clash = kubectl.run("annotate", "widget", "gear", "-n", ns, "note=second")
    assert clash.returncode == 1 and "--overwrite is false but found the following declared annotation(s): " in (
        clash.stderr
    )
    kubectl("annotate", "widget", "gear", "-n", ns, "note=second", "other=x", "--overwrite")
    assert annotations("widget", "gear") == {"note": "second", "other": "x"}
    kubectl("annotate", "widget", "gear", "-n", ns, "note-")
    assert annotations("widget", "gear") == {"other": "x"}
    kubectl("annotate", "configmap", "two", "-n", ns, "a=b")
    assert annotations("configmap", "two") == {"a": "b"}


def test_scale_pytorchjob_and_widget(kubectl: Kubectl, ns: str) -> None:
    container = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", "print('hi')"]}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "trainer", "namespace": ns},
        "spec": {
            "runPolicy": {"suspend": True},
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
                "Worker": {"replicas": 1, "template": {"spec": {"containers": [container]}}},
            },
        },
    }
    create(kubectl, job)
    out = kubectl("scale", "pytorchjob", "trainer", "-n", ns, "--replicas=3")
    assert out.strip() == "pytorchjob.kubeflow.org/trainer scaled"
    specs = kubectl.json("get", "pytorchjob", "trainer", "-n", ns)["spec"]["pytorchReplicaSpecs"]
    assert (specs["Worker"]["replicas"], specs["Master"]["replicas"]) == (3, 1)
    scale = json.loads(kubectl("get", "--raw", f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/trainer/scale"))
    assert (scale["kind"], scale["apiVersion"], scale["spec"]["replicas"]) == ("Scale", "autoscaling/v1", 3)
    precondition = kubectl.run("scale", "pytorchjob", "trainer", "-n", ns, "--current-replicas=2", "--replicas=5")
    assert precondition.returncode == 1 and "Expected replicas to be 2, was 3" in precondition.stderr

    ensure_widget_crd(kubectl)
    create(kubectl, widget("gear", ns, size=1, replicas=1))
    assert kubectl("scale", "widget", "gear", "-n", ns, "--replicas=4").strip() == "widget.example.com/gear scaled"
    assert kubectl("get", "widget", "gear", "-n", ns, "-o", "jsonpath={.spec.replicas}") == "4"


def test_wait_for_conditions(kubectl: Kubectl, ns: str) -> None:
    ensure_widget_crd(kubectl)  # includes `wait --for=condition=established` on the CRD
    create(kubectl, widget("gear", ns, size=1))
    waiter = Streamer(kubectl, "wait", "--for=condition=Ready", "widget/gear", "-n", ns, "--timeout=60s")
    try:
        timed_out = kubectl.run("wait", "--for=condition=Ready", "widget/gear", "-n", ns, "--timeout=1s")
        assert timed_out.returncode == 1
        assert "timed out waiting for the condition on widgets/gear" in timed_out.stderr
        assert waiter.running()
        status = '{"status":{"conditions":[{"type":"Ready","status":"True","reason":"Polished"}]}}'
        kubectl("patch", "widget", "gear", "-n", ns, "--subresource=status", "--type=merge", "-p", status)
        assert waiter.wait_exit(60) == 0
        assert waiter.lines == ["widget.example.com/gear condition met"]
    finally:
        waiter.stop()
    out = kubectl("wait", "--for=jsonpath={.status.conditions[0].reason}=Polished", "widget/gear", "-n", ns)
    assert out.strip() == "widget.example.com/gear condition met"

    create(kubectl, pod("runner", ns, SLEEPER))
    out = kubectl("wait", "--for=condition=Ready", "pod/runner", "-n", ns, "--timeout=60s")
    assert out.strip() == "pod/runner condition met"
    assert kubectl("get", "pod", "runner", "-n", ns, "-o", "jsonpath={.status.phase}") == "Running"


def test_kubectl_run_posts_a_pod_that_runs(kubectl: Kubectl, ns: str) -> None:
    script = "import os; print(os.environ['GREETING'], 'from kubectl run', flush=True)"
    args = ["run", "hello", "-n", ns, "--image=python:3.11", "--restart=Never", "--labels=app=hello"]
    command = ["--env=GREETING=hi", "--command", "--", "python3", "-c", script]
    dry = kubectl(*args, "--dry-run=server", *command)
    assert dry.strip() == "pod/hello created (server dry run)"
    assert kubectl.run("get", "pod", "hello", "-n", ns).returncode == 1

    assert kubectl(*args, *command).strip() == "pod/hello created"
    out = kubectl("wait", "--for=jsonpath={.status.phase}=Succeeded", "pod/hello", "-n", ns, "--timeout=60s")
    assert out.strip() == "pod/hello condition met"
    assert kubectl("logs", "hello", "-n", ns) == "hi from kubectl run\n"
    live = kubectl.json("get", "pod", "hello", "-n", ns)
    assert live["metadata"]["labels"] == {"app": "hello"}
    container = live["spec"]["containers"][0]
    assert (container["name"], container["image"], container["command"]) == (
        "hello",
        "python:3.11",
        ["python3", "-c", script],
    )
