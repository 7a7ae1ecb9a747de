"""Kueue on a real ``yard up``, through the real kubectl: queues, admission in FIFO order, the
Workloads and their conditions, a job that names a queue that does not exist.

The ClusterQueue has 2 CPUs; each job is a batch/v1 Job of one pod requesting 2 CPUs (its
pods are real processes), so exactly one runs at a time and the others wait, in order.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

QUEUES = """
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata:
  name: default-flavor-{suffix}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-{suffix}
spec:
  namespaceSelector: {{}}
  queueingStrategy: StrictFIFO
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: default-flavor-{suffix}
      resources:
      - name: cpu
        nominalQuota: 2
      - name: memory
        nominalQuota: 8Gi
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata:
  name: user-queue
  namespace: {ns}
spec:
  clusterQueue: team-{suffix}
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-kueue")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"kueue-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def job(ns: str, name: str, queue: str, seconds: float) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": 1,
                    "containers": [
                        {
                            "name": "main",
                            "image": "python:3.11",
                            "command": ["python3", "-c", f"import time; time.sleep({seconds}); print('done')"],
                            "resources": {"requests": {"cpu": "2", "memory": "100Mi"}},
                        }
                    ],
                }
            }
        },
    }


def pytorchjob(ns: str, name: str, queue: str, seconds: float) -> dict[str, Any]:
    pod = job(ns, name, queue, seconds)["spec"]["template"]
    pod["spec"]["containers"][0]["name"] = "pytorch"
    pod["spec"]["restartPolicy"] = "OnFailure"
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": queue}},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": pod}}},
    }


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def workload_of(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        items = kubectl.json("get", "workloads.kueue.x-k8s.io", "-n", ns)["items"]
        return next((w for w in items if w["metadata"]["ownerReferences"][0]["name"] == name), None)

    return eventually(probe, timeout=60, what=f"the Workload of {name}")


def test_three_jobs_on_a_two_cpu_cluster_queue_run_one_at_a_time_in_fifo_order(
    kubectl: Kubectl, plane: Plane, ns: str
) -> None:
    suffix = ns.rpartition("-")[2]
    kubectl("apply", "-f", "-", input=QUEUES.format(suffix=suffix, ns=ns))
    for name in ("first", "second", "third"):
        kubectl("create", "-f", "-", input=json.dumps(pytorchjob(ns, name, "user-queue", 2.5)))
    created = kubectl.json("get", "pytorchjob", "second", "-n", ns)
    assert created["spec"]["runPolicy"]["suspend"] is True  # Kueue's webhook: created suspended

    def waits() -> str | None:
        told = plane.yard("describe", "pytorchjob/third", "-n", ns).stdout
        return told if "2 of 2 in use" in told else None

    told = eventually(waits, timeout=60, what="describe to say what the third job waits for")
    assert f"Queue:        user-queue (ClusterQueue team-{suffix})" in told, told
    assert f"waiting for 2 cpu in ClusterQueue team-{suffix}: 2 of 2 in use" in told, told
    assert f"pending in ClusterQueue team-{suffix}" in told, told
    listed = plane.yard("get", "queues", "-n", ns).stdout
    assert f"team-{suffix}" in listed and "cpu 2/2" in listed and "user-queue" in listed, listed
    metrics = plane.urlopen("/metrics").read().decode()
    assert f'kueue_pending_workloads{{cluster_queue="team-{suffix}",status="active"}}' in metrics
    nominal = f'cluster_queue="team-{suffix}",cohort="",flavor="default-flavor-{suffix}",resource="cpu"'
    assert f"kueue_cluster_queue_nominal_quota{{{nominal}}} 2.0" in metrics

    def finished(name: str) -> dict[str, Any] | None:
        found: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
        return found if conditions(found).get("Succeeded", {}).get("status") == "True" else None

    done = [
        eventually(lambda n=n: finished(n), timeout=120, what=f"{n} to complete") for n in ("first", "second", "third")
    ]
    starts = [d["status"]["startTime"] for d in done]
    ends = [d["status"]["completionTime"] for d in done]
    assert starts == sorted(starts)
    # one at a time: each started no earlier than the one before it ended
    assert starts[1] >= ends[0] and starts[2] >= ends[1], (starts, ends)

    wl = workload_of(kubectl, ns, "third")
    assert wl["spec"]["queueName"] == "user-queue"
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("master", 1)]
    assert wl["status"]["admission"]["clusterQueue"] == f"team-{suffix}"
    assert wl["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"] == f"default-flavor-{suffix}"
    for type_ in ("QuotaReserved", "Admitted", "Finished"):
        assert conditions(wl)[type_]["status"] == "True", (type_, wl["status"])
    events = kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=third")
    assert "CreatedWorkload" in events and "Started" in events

    table = kubectl("get", "clusterqueue", f"team-{suffix}")
    assert table.split("\n")[0].split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"], table
    wide = kubectl("get", "workloads", "-n", ns)
    assert "RESERVED IN" in wide and f"team-{suffix}" in wide


def test_a_job_naming_a_queue_that_does_not_exist_stays_suspended_with_kueues_message(
    kubectl: Kubectl, ns: str
) -> None:
    kubectl("create", "-f", "-", input=json.dumps(job(ns, "lost", "no-such-queue", 0.1)))
    wl = workload_of(kubectl, ns, "lost")

    def told() -> dict[str, Any] | None:
        found = kubectl.json("get", "workload", wl["metadata"]["name"], "-n", ns)
        reserved = conditions(found).get("QuotaReserved", {})
        return found if reserved.get("message") == "LocalQueue no-such-queue doesn't exist" else None

    found = eventually(told, timeout=60, what="the Workload to say its LocalQueue is missing")
    assert conditions(found)["QuotaReserved"]["status"] == "False"
    still = kubectl.json("get", "job", "lost", "-n", ns)
    assert still["spec"]["suspend"] is True
    assert not kubectl.json("get", "pods", "-n", ns, "-l", "batch.kubernetes.io/job-name=lost")["items"]


def test_a_trainjob_through_a_local_queue_waits_for_quota_then_completes(kubectl: Kubectl, ns: str) -> None:
    suffix = ns.rpartition("-")[2]
    kubectl("apply", "-f", "-", input=QUEUES.format(suffix=suffix, ns=ns))
    blocker = job(ns, "blocker", "user-queue", 1.5)
    kubectl("create", "-f", "-", input=json.dumps(blocker))
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "user-queue"}},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 1,
                "command": ["python", "-c", "print('trained through the queue')"],
                "resourcesPerNode": {"requests": {"cpu": "1"}},
            },
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(body))
    assert kubectl.json("get", "trainjob", "tj", "-n", ns)["spec"]["suspend"] is True
    wl = workload_of(kubectl, ns, "tj")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 1)]

    def complete() -> dict[str, Any] | None:
        found: dict[str, Any] = kubectl.json("get", "trainjob", "tj", "-n", ns)
        return found if (found.get("status") or {}).get("state") == "Complete" else None

    done = eventually(complete, timeout=120, what="the TrainJob to complete")
    blocked = kubectl.json("get", "job", "blocker", "-n", ns)
    # It waited for the 2-CPU blocker: its JobSet's Job started after the blocker ended.
    node_job = kubectl.json("get", "job", "tj-node-0", "-n", ns)
    assert node_job["status"]["startTime"] >= blocked["status"]["completionTime"]
    assert done["spec"]["suspend"] is False
    admitted = kubectl.json("get", "workload", wl["metadata"]["name"], "-n", ns)
    assert admitted["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"cpu": "1"}


PREEMPTING = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: flavor-{suffix}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: shared-{suffix}
spec:
  namespaceSelector: {{}}
  preemption:
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: ["cpu", "memory"]
    flavors:
    - name: flavor-{suffix}
      resources:
      - name: cpu
        nominalQuota: 2
      - name: memory
        nominalQuota: 4Gi
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: shared
  namespace: {ns}
spec:
  clusterQueue: shared-{suffix}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: low-{suffix}
value: 10
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: WorkloadPriorityClass
metadata:
  name: high-{suffix}
value: 1000
"""

EPOCHS = """
import sys, time
from trainyard import runtime
ckpt = runtime.CheckpointManager(sys.argv[1])
latest = ckpt.latest()
start = 0 if latest is None else int(ckpt.load_latest()) + 1
print(f"starting at epoch {start}", flush=True)
for epoch in range(start, 8):
    time.sleep(0.5)
    ckpt.save(str(epoch).encode(), epoch=epoch)
print("trained", flush=True)
"""


def test_a_high_priority_job_preempts_a_low_one_which_resumes_from_its_checkpoint(
    kubectl: Kubectl, ns: str, tmp_path: Any
) -> None:
    suffix = ns.rpartition("-")[2]
    kubectl("apply", "-f", "-", input=PREEMPTING.format(suffix=suffix, ns=ns))
    script = tmp_path / "epochs.py"
    script.write_text(EPOCHS)
    low = pytorchjob(ns, "low", "shared", 0)
    low["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"low-{suffix}"
    container = low["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["command"] = ["python3", str(script), str(tmp_path / "ckpt")]
    kubectl("create", "-f", "-", input=json.dumps(low))

    def epochs_saved() -> int:
        return max((int(p.stem.rpartition("-")[2]) for p in (tmp_path / "ckpt").glob("checkpoint-*.ckpt")), default=-1)

    eventually(lambda: epochs_saved() >= 2, timeout=90, what="the low job's epoch 2")

    high = pytorchjob(ns, "high", "shared", 0.5)
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = f"high-{suffix}"
    kubectl("create", "-f", "-", input=json.dumps(high))

    def succeeded(name: str) -> dict[str, Any] | None:
        found: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
        return found if conditions(found).get("Succeeded", {}).get("status") == "True" else None

    eventually(lambda: succeeded("high"), timeout=120, what="the high-priority job to succeed")
    eventually(lambda: succeeded("low"), timeout=120, what="the preempted job to resume and succeed")
    low_wl = workload_of(kubectl, ns, "low")
    evicted = conditions(low_wl)["Evicted"]
    assert evicted["reason"] == "QuotaReserved"  # reset when it was admitted again ...
    assert evicted["message"].startswith("Previously: Preempted to accommodate a workload"), evicted
    assert conditions(low_wl)["Requeued"]["reason"] == "Preempted"
    assert low_wl["spec"]["priority"] == 10 and low_wl["spec"]["priorityClassSource"] == (
        "kueue.x-k8s.io/workloadpriorityclass"
    )
    events = kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=low")
    assert "Stopped" in events and "Preempted to accommodate" in events, events
    logs = kubectl("logs", "low-master-0", "-n", ns)
    resumed = [int(line.split()[-1]) for line in logs.splitlines() if line.startswith("starting at epoch")]
    assert resumed and resumed[-1] >= 2, logs  # the pod that finished began past epoch 0
