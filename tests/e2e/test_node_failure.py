"""Node failure as kube-controller-manager v1.32 handles it, against real kubectl.

A Node is created with kubectl and its Lease renewed by the test (standing in for a node agent);
once the test stops renewing, the node lifecycle controller marks it Unknown after
``--node-monitor-grace-period`` and taints it ``node.kubernetes.io/unreachable``; the taint
eviction controller deletes a pod that tolerates that for 2 s (and not one that tolerates it
forever, which is marked not Ready); PodGC force-deletes the terminating pod once the node is
tainted out-of-service, and the pods of a deleted Node. ``yard node stop|start|preempt`` set the
annotations the plane's node pool acts on (here nothing acts: the test deletes the node itself,
and ``preempt --wait`` sees it go). A PodDisruptionBudget makes an eviction answer 429, and both
``kubectl drain`` and ``yard node drain`` retry it until their timeout, then drain once it is gone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from conftest import REPO, Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

# The local node heartbeats every 10 s: the grace period leaves it margin on a loaded machine.
GRACE = "15s"
QUARANTINE_ENV = "TRAINYARD_POD_GC_QUARANTINE"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    flags = ("--node-monitor-grace-period", GRACE, "--default-not-ready-toleration-seconds", "7")
    started = own_plane(tmp_path_factory, "yard-node-failure", *flags)
    saved = os.environ.get(QUARANTINE_ENV)
    os.environ[QUARANTINE_ENV] = "1s"  # PodGC's 40 s wait for a missing node, shortened for the plane only
    try:
        plane = next(started)  # `yard up` has returned: the plane has read its environment
    finally:
        if saved is None:
            os.environ.pop(QUARANTINE_ENV, None)
        else:
            os.environ[QUARANTINE_ENV] = saved
    yield plane
    next(started, None)


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


def now(micro: bool = False) -> str:
    moment = datetime.now(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def stand_in_node(kubectl: Kubectl, name: str) -> None:
    """A Node that posted Ready once, and its Lease (renewed by ``renew``), as an agent would leave them."""
    kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}))
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "KubeletReady",
        "message": "kubelet is posting ready status",
        "lastHeartbeatTime": now(),
        "lastTransitionTime": now(),
    }
    patch = json.dumps({"status": {"conditions": [ready]}})
    kubectl("patch", "node", name, "--subresource=status", "--type=merge", "-p", patch)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now(micro=True)},
    }
    kubectl("apply", "-f", "-", input=json.dumps(lease))


def renew(kubectl: Kubectl, name: str) -> None:
    patch = json.dumps({"spec": {"renewTime": now(micro=True)}})
    kubectl("patch", "lease", name, "-n", "kube-node-lease", "--type=merge", "-p", patch)


def bound_pod(kubectl: Kubectl, name: str, node: str, tolerations: list[dict[str, Any]]) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "tolerations": tolerations,
            "containers": [{"name": "main", "image": "python:3.11", "command": ["sleep", "600"]}],
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(pod))


def get(kubectl: Kubectl, *what: str) -> Any:
    result = kubectl.run("get", *what, "-o", "json")
    return json.loads(result.stdout) if result.returncode == 0 else None


def test_a_silent_node_goes_unknown_is_tainted_and_its_pods_are_evicted(kubectl: Kubectl) -> None:
    stand_in_node(kubectl, "lost-1")
    unreachable = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    bound_pod(kubectl, "brief", "lost-1", [{**unreachable, "tolerationSeconds": 2}])
    bound_pod(kubectl, "forever", "lost-1", [unreachable])
    running = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    kubectl("patch", "pod", "forever", "--subresource=status", "--type=merge", "-p", json.dumps({"status": running}))
    for _ in range(3):
        renew(kubectl, "lost-1")
    # the plane's --default-not-ready-toleration-seconds 7 was given to the pods that did not say
    brief = get(kubectl, "pod", "brief")
    assert {
        "key": "node.kubernetes.io/not-ready",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 7,
    } in brief["spec"]["tolerations"]

    def unknown() -> Any:
        node = get(kubectl, "node", "lost-1")
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        taints = {(t["key"], t["effect"]) for t in (node.get("spec") or {}).get("taints") or []}
        return (
            ready["status"] == "Unknown"
            and taints
            >= {
                ("node.kubernetes.io/unreachable", "NoExecute"),
                ("node.kubernetes.io/unreachable", "NoSchedule"),
            }
            and ready
        )

    ready = eventually(unknown, timeout=90, what="lost-1 Unknown and tainted unreachable")
    assert (ready["reason"], ready["message"]) == ("NodeStatusUnknown", "Kubelet stopped posting node status.")

    def evicted() -> Any:
        pod = get(kubectl, "pod", "brief")
        return pod["metadata"].get("deletionTimestamp") and pod

    pod = eventually(evicted, timeout=60, what="the pod that tolerates unreachable for 2s to be deleted")
    target = next(c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "DeletionByTaintManager")
    events = kubectl("get", "events", "--field-selector", "involvedObject.name=brief")
    assert "TaintManagerEviction" in events and "Marking for deletion Pod default/brief" in events
    assert "Node lost-1 status is now: NodeNotReady" in kubectl("describe", "node", "lost-1")
    forever = get(kubectl, "pod", "forever")
    assert not forever["metadata"].get("deletionTimestamp")
    assert next(c for c in forever["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    assert "Node is not ready" in kubectl("get", "events", "--field-selector", "involvedObject.name=forever")

    # Non-graceful node shutdown: tainted out-of-service, the terminating pod is force-deleted.
    kubectl("taint", "node", "lost-1", "node.kubernetes.io/out-of-service=nodeshutdown:NoExecute")
    eventually(lambda: get(kubectl, "pod", "brief") is None, timeout=60, what="PodGC to force-delete brief")

    # The node posts Ready again: the unreachable taints go.
    kubectl("taint", "node", "lost-1", "node.kubernetes.io/out-of-service-")
    stand_in_node(kubectl, "lost-1")

    def recovered() -> bool:
        taints = (get(kubectl, "node", "lost-1").get("spec") or {}).get("taints") or []
        return not any(t["key"] == "node.kubernetes.io/unreachable" for t in taints)

    eventually(recovered, timeout=60, what="the unreachable taints to be removed")


def test_simulation_verbs_and_pod_gc_of_a_deleted_node(plane: Plane, kubectl: Kubectl) -> None:
    stand_in_node(kubectl, "gone-1")
    bound_pod(kubectl, "orphan", "gone-1", [])
    assert "powered off" in plane.yard("node", "stop", "gone-1").stdout
    assert get(kubectl, "node", "gone-1")["metadata"]["annotations"]["trainyard.dev/power"] == "off"
    plane.yard("node", "start", "gone-1")
    assert "trainyard.dev/power" not in (get(kubectl, "node", "gone-1")["metadata"].get("annotations") or {})
    unknown = plane.yard("node", "stop", "nope", check=False)
    assert unknown.returncode == 1 and 'nodes "nope" not found' in unknown.stderr
    # A spot notice: its deadline as an RFC 3339 UTC annotation; --wait shows progress until the node goes
    # (here the test removes it, standing in for the plane's node pool).
    started = datetime.now(UTC)
    waiting = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainyard.cli.main",
            "--home",
            str(plane.home),
            "node",
            "preempt",
            "gone-1",
            "--notice",
            "30s",
            "--wait",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:

        def noticed() -> Any:
            annotations = get(kubectl, "node", "gone-1")["metadata"].get("annotations") or {}
            return annotations.get("trainyard.dev/preemption-notice")

        deadline = datetime.fromisoformat(eventually(noticed, timeout=30, what="the preemption notice"))
        seen = datetime.now(UTC)
        # 30 s after the moment the command read its clock, which lies between its start and the
        # annotation being seen (a loaded machine takes seconds to start a Python process).
        assert (deadline - started).total_seconds() >= 29
        assert (deadline - seen).total_seconds() <= 31
        kubectl("delete", "node", "gone-1")
        output, _ = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert "preemption notice until" in output and "notice ends in" in output and "node/gone-1 removed" in output
    eventually(lambda: get(kubectl, "pod", "orphan") is None, timeout=60, what="PodGC to delete the orphan")


def evict(plane: Plane, name: str) -> tuple[int, dict[str, Any]]:
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}).encode()
    request = urllib.request.Request(
        f"{plane.url}/api/v1/namespaces/default/pods/{name}/eviction",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with plane.urlopen(request) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_disruption_budget_blocks_evictions_and_drains_wait_for_it(plane: Plane, kubectl: Kubectl) -> None:
    node = kubectl(
        "get", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "jsonpath={.items[0].metadata.name}"
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "steady"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {
                "metadata": {"labels": {"app": "steady"}},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{"name": "main", "image": "python:3.11", "command": ["sleep", "600"]}],
                },
            },
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(job))
    pdb = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "steady"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "steady"}}},
    }
    kubectl("apply", "-f", "-", input=json.dumps(pdb))

    def budget() -> Any:
        status = (get(kubectl, "pdb", "steady") or {}).get("status") or {}
        return status.get("currentHealthy") == 2 and status

    status = eventually(budget, timeout=60, what="both pods Ready and counted by the budget")
    assert (status["desiredHealthy"], status["expectedPods"], status["disruptionsAllowed"]) == (2, 2, 0)
    assert kubectl("get", "pdb", "steady", "--no-headers").split()[:4] == ["steady", "2", "N/A", "0"]
    pods = kubectl("get", "pods", "-l", "app=steady", "-o", "jsonpath={.items[*].metadata.name}").split()

    code, answer = evict(plane, pods[0])
    assert (code, answer["reason"]) == (429, "TooManyRequests")
    assert answer["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert answer["details"]["causes"] == [
        {
            "reason": "DisruptionBudget",
            "message": "The disruption budget steady needs 2 healthy pods and has 2 currently",
        }
    ]
    try:
        drained = kubectl.run("drain", node, "--timeout=7s", "--ignore-daemonsets")
        assert drained.returncode != 0
        assert "Cannot evict pod as it would violate the pod's disruption budget." in drained.stderr
        assert "global timeout reached: 7s" in drained.stderr
        ours = plane.yard("node", "drain", node, "--timeout", "7s", check=False)
        assert ours.returncode == 1
        assert "(will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget." in ours.stdout
        assert "global timeout reached: 7s" in ours.stderr
        kubectl("delete", "pdb", "steady")
        done = plane.yard("node", "drain", node, "--timeout", "60s")
        assert f"node/{node} drained" in done.stdout and "evicting pod default/" in done.stdout
        assert get(kubectl, "node", node)["spec"]["unschedulable"] is True
    finally:
        kubectl.run("delete", "job", "steady", "--wait=false")
        plane.yard("node", "uncordon", node, check=False)
