"""The local node and the scheduler, seen through kubectl against a real ``yard up --cpus 4``.

The node declares 4 CPUs and no GPU, so what fits is known: a pod asking for a GPU stays
Pending with kube-scheduler's message, two 3-replica gangs of 1-CPU pods cannot run together,
and priority decides which of two 4-CPU pods goes first. Pods that must hold their place run a
process that waits for a file the test creates, so nothing here depends on timing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, free_port, own_plane

pytestmark = pytest.mark.e2e

WAIT = 90.0


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-sched", "--cpus", "4", "--gpus", "0")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"sched-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "pods", "--all", "-n", name, "--grace-period=0", "--wait=false")
    kubectl.run("delete", "namespace", name, "--wait=false")


def waiting_command(flag: Path) -> list[str]:
    """A process that runs until ``flag`` exists, then exits 0."""
    return ["python3", "-c", f"import os, time\nwhile not os.path.exists({str(flag)!r}): time.sleep(0.1)"]


def pod(
    name: str,
    *,
    cpu: str | None = None,
    command: list[str] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    resources: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "c",
                    "image": "python:3.11",
                    "command": command or ["true"],
                    "resources": resources or ({"requests": {"cpu": cpu}} if cpu else {}),
                }
            ],
            **spec,
        },
    }


def apply(kubectl: Kubectl, ns: str, *objects: dict[str, Any]) -> None:
    kubectl("apply", "-n", ns, "-f", "-", input="\n".join(json.dumps(o) for o in objects))


def get(kubectl: Kubectl, ns: str, name: str, kind: str = "pod") -> dict[str, Any]:
    obj: dict[str, Any] = kubectl.json("get", kind, name, "-n", ns)
    return obj


def condition(pod: dict[str, Any], kind: str = "PodScheduled") -> dict[str, Any]:
    return next((c for c in (pod.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def unschedulable(kubectl: Kubectl, ns: str, name: str, containing: str = "") -> str:
    """The pod's PodScheduled=False message once the scheduler has written one ``containing`` that.

    A verdict can be superseded: a gang judged before all its pods were created is first told it
    lacks siblings, then (once they exist) that the whole group does not fit.
    """
    found = eventually(
        lambda: (
            (c := condition(get(kubectl, ns, name))).get("reason") == "Unschedulable"
            and containing in str(c.get("message"))
            and c
        ),
        timeout=WAIT,
        what=f"{name} reported Unschedulable" + (f" with {containing!r}" if containing else ""),
    )
    assert found["status"] == "False"
    assert not get(kubectl, ns, name)["spec"].get("nodeName")
    return str(found["message"])


def events(kubectl: Kubectl, ns: str, name: str, reason: str) -> list[dict[str, Any]]:
    items = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name},reason={reason}")
    return list(items["items"])


def phase(kubectl: Kubectl, ns: str, name: str) -> str:
    return str((get(kubectl, ns, name).get("status") or {}).get("phase"))


def node_name(kubectl: Kubectl) -> str:
    return str(kubectl.json("get", "nodes")["items"][0]["metadata"]["name"])


# -- the node ----------------------------------------------------------------------------------------


def test_node_reports_declared_capacity_labels_conditions_and_heartbeat(kubectl: Kubectl) -> None:
    (node,) = kubectl.json("get", "nodes")["items"]
    name = node["metadata"]["name"]
    capacity = node["status"]["capacity"]
    assert (capacity["cpu"], capacity["nvidia.com/gpu"], capacity["pods"]) == ("4", "0", "110")
    assert capacity["memory"].endswith("Ki")
    assert node["status"]["allocatable"] == capacity
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == name
    assert labels["kubernetes.io/os"] == "linux"
    assert labels["kubernetes.io/arch"] in ("amd64", "arm64")
    assert node["metadata"]["annotations"]["trainyard.dev/declared-capacity"] == "cpu,nvidia.com/gpu"
    conditions = {c["type"]: c for c in node["status"]["conditions"]}
    assert {k: c["status"] for k, c in conditions.items()} == {
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
        "Ready": "True",
    }
    assert "control-plane" in kubectl("get", "nodes", "--no-headers")
    first = conditions["Ready"]["lastHeartbeatTime"]

    def heartbeat() -> str:
        conditions = kubectl.json("get", "node", name)["status"]["conditions"]
        return str(next(c["lastHeartbeatTime"] for c in conditions if c["type"] == "Ready"))

    eventually(lambda: heartbeat() != first, timeout=WAIT, what="a newer heartbeat")


# -- kube-scheduler ----------------------------------------------------------------------------------


def test_a_gpu_pod_stays_pending_with_kube_schedulers_words(kubectl: Kubectl, ns: str) -> None:
    apply(kubectl, ns, pod("gpu", resources={"limits": {"nvidia.com/gpu": "1"}}))
    message = unschedulable(kubectl, ns, "gpu")
    assert message == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod.."
    )
    (event,) = eventually(lambda: events(kubectl, ns, "gpu", "FailedScheduling"), timeout=WAIT)
    assert (event["type"], event["source"]["component"], event["message"]) == ("Warning", "default-scheduler", message)
    assert phase(kubectl, ns, "gpu") == "Pending"


def test_a_pod_that_fits_is_bound_with_an_event(kubectl: Kubectl, ns: str) -> None:
    apply(kubectl, ns, pod("fits", cpu="2"))
    eventually(lambda: phase(kubectl, ns, "fits") == "Succeeded", timeout=WAIT)
    scheduled = get(kubectl, ns, "fits")
    assert scheduled["spec"]["nodeName"] == node_name(kubectl)
    assert condition(scheduled)["status"] == "True"
    (event,) = eventually(lambda: events(kubectl, ns, "fits", "Scheduled"), timeout=WAIT)
    assert event["message"] == f"Successfully assigned {ns}/fits to {node_name(kubectl)}"
    assert event["source"]["component"] == "default-scheduler"


def test_node_selector_and_required_affinity(kubectl: Kubectl, ns: str) -> None:
    linux = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    os_label = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [linux]}]}
        }
    }
    apply(
        kubectl,
        ns,
        pod("elsewhere", nodeSelector={"disktype": "ssd"}),
        pod("linux", affinity=os_label),
        pod("named", nodeSelector={"kubernetes.io/hostname": node_name(kubectl)}),
    )
    message = unschedulable(kubectl, ns, "elsewhere")
    assert message == (
        "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling.."
    )
    for name in ("linux", "named"):
        eventually(lambda name=name: phase(kubectl, ns, name) == "Succeeded", timeout=WAIT)
    # Labelling the node re-evaluates the waiting pod.
    node = node_name(kubectl)
    kubectl("label", "node", node, "disktype=ssd")
    try:
        eventually(lambda: phase(kubectl, ns, "elsewhere") == "Succeeded", timeout=WAIT)
    finally:
        kubectl("label", "node", node, "disktype-")


def test_taints_keep_out_pods_that_do_not_tolerate_them(kubectl: Kubectl, ns: str) -> None:
    node = node_name(kubectl)
    kubectl("taint", "node", node, "dedicated=ml:NoSchedule")
    try:
        toleration = [{"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}]
        apply(kubectl, ns, pod("intolerant"), pod("tolerant", tolerations=toleration))
        message = unschedulable(kubectl, ns, "intolerant")
        assert message.startswith("0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: ml}.")
        eventually(lambda: phase(kubectl, ns, "tolerant") == "Succeeded", timeout=WAIT)
    finally:
        kubectl("taint", "node", node, "dedicated=ml:NoSchedule-")
    eventually(lambda: phase(kubectl, ns, "intolerant") == "Succeeded", timeout=WAIT)


def test_a_pod_for_another_scheduler_is_left_alone(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    apply(kubectl, ns, pod("theirs", schedulerName="my-scheduler"), pod("ours"))
    eventually(lambda: phase(kubectl, ns, "ours") == "Succeeded", timeout=WAIT)
    theirs = get(kubectl, ns, "theirs")
    assert not theirs["spec"].get("nodeName")
    assert not condition(theirs)
    assert not events(kubectl, ns, "theirs", "FailedScheduling")


# -- priority ----------------------------------------------------------------------------------------


def test_priority_classes_resolve_at_admission_and_order_scheduling(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    high = f"high-{ns}"
    # Never: this is about order; a class that may preempt evicts the blocker (tests/e2e/test_preemption.py).
    kubectl("create", "priorityclass", high, "--value=1000", "--description=runs first", "--preemption-policy=Never")
    try:
        classes = {c["metadata"]["name"]: c for c in kubectl.json("get", "priorityclasses")["items"]}
        assert classes["system-cluster-critical"]["value"] == 2000000000
        assert classes[high]["preemptionPolicy"] == "Never"
        refused = kubectl.run("apply", "-n", ns, "-f", "-", input=json.dumps(pod("nope", priorityClassName="nope")))
        assert refused.returncode != 0
        assert 'pods "nope" is forbidden: no PriorityClass with name nope was found' in refused.stderr

        release = tmp_path / "release"
        apply(kubectl, ns, pod("blocker", cpu="4", command=waiting_command(release)))
        eventually(lambda: phase(kubectl, ns, "blocker") == "Running", timeout=WAIT)
        apply(kubectl, ns, pod("low", cpu="4"))
        unschedulable(kubectl, ns, "low")
        apply(kubectl, ns, pod("high", cpu="4", priorityClassName=high, command=waiting_command(release)))
        assert get(kubectl, ns, "high")["spec"]["priority"] == 1000
        assert get(kubectl, ns, "low")["spec"]["priority"] == 0
        unschedulable(kubectl, ns, "high")
        release.touch()
        # The younger, higher-priority pod goes first; the older one waits for it.
        eventually(lambda: get(kubectl, ns, "high")["spec"].get("nodeName"), timeout=WAIT)
        eventually(lambda: phase(kubectl, ns, "high") == "Succeeded", timeout=WAIT)
        eventually(lambda: phase(kubectl, ns, "low") == "Succeeded", timeout=WAIT)
        times = {
            name: eventually(lambda name=name: events(kubectl, ns, name, "Scheduled"), timeout=WAIT)[0]["lastTimestamp"]
            for name in ("high", "low")
        }
        assert times["high"] <= times["low"]
    finally:
        kubectl.run("delete", "priorityclass", high)


def test_replacing_a_pod_from_its_manifest_keeps_its_admitted_priority(kubectl: Kubectl, ns: str) -> None:
    manifest = pod("waiting", resources={"limits": {"nvidia.com/gpu": "1"}})
    apply(kubectl, ns, manifest)
    manifest["spec"]["containers"][0]["image"] = "python:3.12"
    kubectl("replace", "-n", ns, "-f", "-", input=json.dumps(manifest))
    replaced = get(kubectl, ns, "waiting")
    assert replaced["spec"]["containers"][0]["image"] == "python:3.12"
    assert (replaced["spec"]["priority"], replaced["spec"]["preemptionPolicy"]) == (0, "PreemptLowerPriority")


# -- gangs -------------------------------------------------------------------------------------------


def coscheduled(group: str, index: int, flag: Path) -> dict[str, Any]:
    return pod(
        f"{group}-{index}",
        cpu="1",
        command=waiting_command(flag),
        labels={"scheduling.x-k8s.io/pod-group": group},
    )


def pod_group(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def test_two_gangs_one_runs_the_other_waits_whole_then_runs(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    first, second = tmp_path / "first-done", tmp_path / "second-done"
    apply(kubectl, ns, pod_group("first", minMember=3), *(coscheduled("first", i, first) for i in range(3)))
    for i in range(3):
        eventually(lambda i=i: phase(kubectl, ns, f"first-{i}") == "Running", timeout=WAIT)
    apply(kubectl, ns, pod_group("second", minMember=3), *(coscheduled("second", i, second) for i in range(3)))
    # One CPU is free, so one pod of the second gang would fit alone: none may be bound.
    for i in range(3):
        message = unschedulable(kubectl, ns, f"second-{i}", containing="PodGroup")
        assert "PodGroup" in message and "minMember 3" in message, message
    assert all(not get(kubectl, ns, f"second-{i}")["spec"].get("nodeName") for i in range(3))
    group = get(kubectl, ns, "first", "podgroups.scheduling.x-k8s.io")
    assert (group["status"]["phase"], group["status"]["running"], group["status"]["scheduled"]) == ("Running", 3, 3)
    assert get(kubectl, ns, "second", "podgroups.scheduling.x-k8s.io")["status"]["phase"] == "Scheduling"

    first.touch()
    for i in range(3):
        eventually(lambda i=i: phase(kubectl, ns, f"second-{i}") == "Running", timeout=WAIT)
    eventually(
        lambda: get(kubectl, ns, "first", "podgroups.scheduling.x-k8s.io")["status"]["phase"] == "Finished",
        timeout=WAIT,
    )
    second.touch()
    eventually(
        lambda: get(kubectl, ns, "second", "podgroups.scheduling.x-k8s.io")["status"].get("succeeded") == 3,
        timeout=WAIT,
    )


def test_schedule_timeout_is_reported_on_the_pod_group(kubectl: Kubectl, ns: str) -> None:
    big = [pod(f"big-{i}", cpu="3", labels={"scheduling.x-k8s.io/pod-group": "big"}) for i in range(2)]
    apply(kubectl, ns, pod_group("big", minMember=2, scheduleTimeoutSeconds=2), *big)
    cond = eventually(
        lambda: next(
            (
                c
                for c in get(kubectl, ns, "big", "podgroups.scheduling.x-k8s.io")["status"].get("conditions") or []
                if c["type"] == "Unschedulable" and c["status"] == "True"
            ),
            None,
        ),
        timeout=WAIT,
        what="a ScheduleTimeout condition",
    )
    assert cond["reason"] == "ScheduleTimeout"
    assert cond["message"].startswith("not schedulable within scheduleTimeoutSeconds (2s): ")
    (event,) = eventually(lambda: events(kubectl, ns, "big", "ScheduleTimeout"), timeout=WAIT)
    assert event["type"] == "Warning" and event["involvedObject"]["kind"] == "PodGroup"
    assert all(not get(kubectl, ns, f"big-{i}")["spec"].get("nodeName") for i in range(2))


def volcano_group(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def test_volcano_enqueues_then_runs_a_gang(kubectl: Kubectl, ns: str, tmp_path: Path) -> None:
    assert kubectl.json("get", "queues.scheduling.volcano.sh", "default")["status"]["state"] == "Open"
    apply(
        kubectl,
        ns,
        volcano_group("fits", minMember=2, minResources={"cpu": "2"}),
        volcano_group("huge", minMember=1, minResources={"cpu": "64"}),
    )
    volcano = "podgroups.scheduling.volcano.sh"
    # What the training operator waits for before it creates the pods: the group leaves Pending.
    eventually(lambda: get(kubectl, ns, "fits", volcano)["status"].get("phase") == "Inqueue", timeout=WAIT)
    huge = eventually(lambda: (s := get(kubectl, ns, "huge", volcano)["status"]).get("conditions") and s, timeout=WAIT)
    assert huge["phase"] == "Pending"
    (refusal,) = huge["conditions"]
    assert (refusal["type"], refusal["reason"]) == ("Unschedulable", "NotEnoughResources")
    assert "minResources (cpu 64) do not fit" in refusal["message"]
    (event,) = eventually(lambda: events(kubectl, ns, "huge", "Unschedulable"), timeout=WAIT)
    assert event["source"]["component"] == "volcano"

    done = tmp_path / "done"
    members = [
        pod(
            f"fits-{i}",
            cpu="1",
            command=waiting_command(done),
            schedulerName="volcano",
            annotations={"scheduling.k8s.io/group-name": "fits"},
        )
        for i in range(2)
    ]
    apply(kubectl, ns, *members)
    eventually(lambda: get(kubectl, ns, "fits", volcano)["status"].get("running") == 2, timeout=WAIT)
    assert get(kubectl, ns, "fits", volcano)["status"]["phase"] == "Running"
    (scheduled,) = eventually(lambda: events(kubectl, ns, "fits-0", "Scheduled"), timeout=WAIT)
    assert scheduled["source"]["component"] == "volcano"
    done.touch()
    eventually(lambda: get(kubectl, ns, "fits", volcano)["status"].get("phase") == "Completed", timeout=WAIT)


# -- yard up -----------------------------------------------------------------------------------------


def test_yard_up_refuses_bad_node_flags(tmp_path: Path) -> None:
    p = Plane(tmp_path / "home", free_port())
    bad = p.yard("up", "--port", str(p.port), "--cpus", "lots", check=False)
    assert bad.returncode == 2 and "--cpus 'lots' is not a quantity" in bad.stderr
    bad = p.yard("up", "--port", str(p.port), "--taint", "dedicated=ml:Sometimes", check=False)
    assert bad.returncode == 2 and "invalid taint effect 'Sometimes'" in bad.stderr


def test_yard_up_names_and_taints_the_node(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    p = Plane(tmp_path / "home", free_port())
    p.yard(
        "up", "--port", str(p.port), "--node-name", "trainyard-e2e", "--taint", "gpu=true:NoSchedule", "--max-pods", "5"
    )
    try:
        k = Kubectl(p, tmp_path_factory.mktemp("kube-cache"))
        (node,) = k.json("get", "nodes")["items"]
        assert node["metadata"]["name"] == "trainyard-e2e"
        assert node["spec"]["taints"] == [{"key": "gpu", "value": "true", "effect": "NoSchedule"}]
        assert node["status"]["capacity"]["pods"] == "5"
        k("apply", "-f", "-", input=json.dumps(pod("plain")))
        message = unschedulable(k, "default", "plain")
        assert "1 node(s) had untolerated taint {gpu: true}" in message
        assert "trainyard-e2e" in p.yard("status").stdout
    finally:
        p.down()
