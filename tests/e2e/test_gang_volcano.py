"""Gang scheduling with Volcano's PodGroups: ``yard up --gang-scheduler-name volcano``, through kubectl.

On a 3-CPU plane, a running two-CPU gang leaves one CPU idle; a second two-CPU gang's PodGroup
is not enqueued (its minResources do not fit), so the operator creates none of its pods (upstream's
gate on the Pending phase) and stamps ``lastReconcileTime``. Once the first job is gone the group
is enqueued, the pods are created with Volcano's annotations and the job runs to completion.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from gang_jobs import gang_job, pods_of, running, state

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

PODGROUPS = "podgroups.scheduling.volcano.sh"


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-volcano", "--cpus", "3", "--gang-scheduler-name", "volcano")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"volcano-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def test_pods_are_created_only_once_the_group_is_enqueued(kubectl: Kubectl, ns: str) -> None:
    priority = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": ns}, "value": 100}
    kubectl("apply", "-f", "-", input=json.dumps(priority))
    kubectl("apply", "-f", "-", input=gang_job("first", ns, ["sleep", "3600"]))
    eventually(lambda: running(kubectl, ns, "first"), timeout=120, what="the first gang to run")
    for pod in pods_of(kubectl, ns, "first"):
        role = pod["metadata"]["labels"]["training.kubeflow.org/replica-type"]
        assert pod["spec"]["schedulerName"] == "volcano"
        assert pod["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "first", "volcano.sh/task-spec": role}

    policy = {"queue": "default", "priorityClass": ns}
    kubectl("apply", "-f", "-", input=gang_job("second", ns, ["python3", "-c", "print('enqueued')"], policy))
    group = eventually(
        lambda: (g := kubectl.json("get", PODGROUPS, "second", "-n", ns)).get("status", {}).get("conditions") and g,
        timeout=120,
        what="the scheduler to judge the second PodGroup",
    )
    assert group["spec"] == {
        "minMember": 2,
        "minResources": {"cpu": "2"},
        "queue": "default",
        "priorityClassName": ns,
    }
    assert group["status"]["phase"] == "Pending"
    job = eventually(
        lambda: (
            (j := kubectl.json("get", "pytorchjob", "second", "-n", ns)).get("status", {}).get("lastReconcileTime")
            and j
        ),
        what="the operator to stamp the postponed job",
    )
    assert job["status"]["conditions"][-1]["type"] == "Created"
    assert pods_of(kubectl, ns, "second") == []
    assert kubectl.json("get", "services", "-n", ns, "-l", "training.kubeflow.org/job-name=second")["items"] == []

    kubectl("delete", "pytorchjob", "first", "-n", ns, "--wait=false")
    eventually(lambda: state(kubectl, ns, "second") == "Succeeded", timeout=180, what="the second gang to finish")
    assert "enqueued" in kubectl("logs", "second-master-0", "-n", ns)
    eventually(
        lambda: kubectl.run("get", PODGROUPS, "second", "-n", ns).returncode != 0,
        timeout=60,
        what="the finished job's PodGroup to be deleted",
    )


def test_suspending_a_job_deletes_its_group_and_resuming_recreates_it(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-f", "-", input=gang_job("pausable", ns, ["sleep", "3600"]))
    eventually(lambda: running(kubectl, ns, "pausable"), timeout=120, what="the gang to run")
    uid = kubectl.json("get", PODGROUPS, "pausable", "-n", ns)["metadata"]["uid"]

    kubectl(
        "patch", "pytorchjob", "pausable", "-n", ns, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":true}}}'
    )
    eventually(
        lambda: (
            kubectl.run("get", PODGROUPS, "pausable", "-n", ns).returncode != 0 and not pods_of(kubectl, ns, "pausable")
        ),
        timeout=120,
        what="the suspended job's PodGroup and pods to be deleted",
    )

    kubectl(
        "patch", "pytorchjob", "pausable", "-n", ns, "--type=merge", "-p", '{"spec":{"runPolicy":{"suspend":false}}}'
    )
    eventually(lambda: running(kubectl, ns, "pausable"), timeout=120, what="the resumed gang to run")
    assert kubectl.json("get", PODGROUPS, "pausable", "-n", ns)["metadata"]["uid"] != uid
    kubectl("delete", "pytorchjob", "pausable", "-n", ns, "--wait=false")


def test_scaling_a_running_gang_re_enqueues_its_group_and_adds_the_pod(kubectl: Kubectl, ns: str) -> None:
    # A bigger minMember puts a Running group back to Pending (as Volcano's session does); the
    # scheduler must enqueue it again by itself, or the operator's gate would hold the new pod forever.
    # Half a CPU each: Volcano enqueues against the whole minResources (the running members'
    # share included, as its overcommit plugin does), so the grown gang must fit the 3 CPUs twice over.
    job = gang_job("growing", ns, ["sleep", "3600"]).replace('"cpu": "1"', '"cpu": "500m"')
    kubectl("apply", "-f", "-", input=job)
    eventually(lambda: running(kubectl, ns, "growing"), timeout=120, what="the gang to run")
    kubectl("scale", "pytorchjob", "growing", "-n", ns, "--replicas=2")
    eventually(
        lambda: kubectl.json("get", PODGROUPS, "growing", "-n", ns)["spec"]["minMember"] == 3,
        timeout=60,
        what="the PodGroup to ask for three members",
    )
    eventually(
        lambda: sum(p["status"].get("phase") == "Running" for p in pods_of(kubectl, ns, "growing")) == 3,
        timeout=120,
        what="the third member to be created and run",
    )
    assert kubectl.json("get", PODGROUPS, "growing", "-n", ns)["status"]["phase"] == "Running"
    kubectl("delete", "pytorchjob", "growing", "-n", ns, "--wait=false")
