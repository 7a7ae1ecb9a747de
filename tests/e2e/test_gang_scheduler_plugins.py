"""Gang scheduling with scheduler-plugins' PodGroups, the embedded plane's default, through kubectl.

The plane declares 3 CPUs; each job is a gang of two pods asking one CPU each. With one gang
running, one CPU is free: enough for one pod of a second gang, which therefore waits whole (no
pod placed) until the first gang is gone, then runs. The PodGroup the operator wrote, the pods'
decoration, its deletion when the job finishes and the queue's immutability are checked on the way.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from gang_jobs import gang_job, job_events, pods_of, refused, running, state

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

PODGROUPS = "podgroups.scheduling.x-k8s.io"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-gang", "--cpus", "3")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"gang-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def test_second_gang_waits_whole_until_the_first_is_gone(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", input=gang_job("first", ns, ["sleep", "3600"], {"scheduleTimeoutSeconds": 600}))
    eventually(lambda: running(kubectl, ns, "first"), timeout=120, what="the first gang to run")

    group = kubectl.json("get", PODGROUPS, "first", "-n", ns)
    job = kubectl.json("get", "pytorchjob", "first", "-n", ns)
    assert group["spec"] == {"minMember": 2, "minResources": {"cpu": "2"}, "scheduleTimeoutSeconds": 600}
    assert [(r["kind"], r["uid"], r["controller"]) for r in group["metadata"]["ownerReferences"]] == [
        ("PyTorchJob", job["metadata"]["uid"], True)
    ]
    assert group["status"]["phase"] == "Running"
    for pod in pods_of(kubectl, ns, "first"):
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "first"

    kubectl("apply", "-f", "-", input=gang_job("second", ns, ["python3", "-c", "print('second gang ran')"]))
    waiting = eventually(
        lambda: len(pods := pods_of(kubectl, ns, "second")) == 2 and all(refused(p) for p in pods) and pods,
        timeout=120,
        what="the scheduler to refuse both pods of the second gang",
    )
    # One CPU is free, so a pod scheduled on its own would have been placed.
    assert [p["spec"].get("nodeName") for p in waiting] == [None, None]
    assert state(kubectl, ns, "second") == "Created"
    assert kubectl.json("get", PODGROUPS, "second", "-n", ns)["status"]["phase"] in ("Pending", "Scheduling")

    kubectl("delete", "pytorchjob", "first", "-n", ns, "--wait=false")
    eventually(lambda: state(kubectl, ns, "second") == "Succeeded", timeout=180, what="the second gang to finish")
    assert {p["status"]["phase"] for p in pods_of(kubectl, ns, "second")} == {"Succeeded"}
    assert "second gang ran" in kubectl("logs", "second-master-0", "-n", ns)

    # A finished job's PodGroup is removed, and the job says so.
    eventually(
        lambda: kubectl.run("get", PODGROUPS, "second", "-n", ns).returncode != 0,
        timeout=60,
        what="the finished job's PodGroup to be deleted",
    )
    events = job_events(kubectl, ns, "second")
    assert ("SuccessfulDeletePodGroup", "Deleted PodGroup: second") in events
    assert ("JobTerminated", "Job has been terminated. Deleting PodGroup") in events


def test_the_queue_cannot_change_once_set(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", input=gang_job("queued", ns, ["sleep", "1"], {"queue": "research"}))

    moved = kubectl.run(
        "patch",
        "pytorchjob",
        "queued",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"runPolicy":{"schedulingPolicy":{"queue":"other"}}}}',
    )

    assert moved.returncode != 0
    assert (
        'The PyTorchJob "queued" is invalid: spec.runPolicy.schedulingPolicy.queue: Invalid value: "string": '
        "spec.runPolicy.schedulingPolicy.queue is immutable"
    ) in moved.stderr
    kept = kubectl("get", "pytorchjob", "queued", "-n", ns, "-o", "jsonpath={.spec.runPolicy.schedulingPolicy.queue}")
    assert kept == "research"
    # Other scheduling fields stay editable.
    kubectl(
        "patch",
        "pytorchjob",
        "queued",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec":{"runPolicy":{"schedulingPolicy":{"minAvailable":1}}}}',
    )
