"""TrainJobs (Kubeflow Trainer v2) applied with the real kubectl on the session plane.

The plane installs the trainer CRDs and upstream's runtimes; the operator builds each TrainJob's
JobSet and the plane's JobSet and Job controllers run its pods as real processes: a real
``torchrun`` gloo all-reduce across two nodes, a suspended TrainJob resumed, and a failing one that
restarts as a whole gang before it fails.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually

pytestmark = pytest.mark.e2e

DDP = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print("rank", dist.get_rank(), "of", dist.get_world_size(), "sum", t.item(), "node", os.environ["PET_NODE_RANK"])
"""


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"tj-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def apply(kubectl: Kubectl, ns: str, name: str, trainer: dict[str, Any], **spec: Any) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": trainer, **spec},
    }
    kubectl("apply", "-f", "-", input=json.dumps(body))


def trainjob(kubectl: Kubectl, ns: str, name: str) -> Any:
    return kubectl.json("get", "trainjob", name, "-n", ns)


def state_is(kubectl: Kubectl, ns: str, name: str, wanted: str, timeout: float = 120) -> Any:
    def probe() -> Any:
        found = trainjob(kubectl, ns, name)
        state = (found.get("status") or {}).get("state")
        assert state != "Failed" or wanted == "Failed", found.get("status")
        return found if state == wanted else None

    return eventually(probe, timeout=timeout, what=f"TrainJob {name} {wanted}")


def conditions(found: Any) -> list[tuple[str, str, str]]:
    return [(c["type"], c["status"], c["reason"]) for c in (found.get("status") or {}).get("conditions") or []]


def test_a_two_node_torchrun_trainjob_completes_with_upstreams_labels_and_columns(
    kubectl: Kubectl, plane: Plane, ns: str, tmp_path: Path
) -> None:
    script = tmp_path / "ddp.py"
    script.write_text(DDP)
    apply(kubectl, ns, "ddp", {"numNodes": 2, "command": ["torchrun", str(script)]})
    done = state_is(kubectl, ns, "ddp", "Complete")
    assert conditions(done) == [("Complete", "True", "AllJobsCompleted")]
    assert done["status"]["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    table = kubectl("get", "trainjobs", "-n", ns)
    assert table.split("\n")[0].split()[:2] == ["NAME", "STATE"] and "Complete" in table, table
    job = kubectl.json("get", "job", "ddp-node-0", "-n", ns)
    assert job["metadata"]["labels"]["trainer.kubeflow.org/trainjob-ancestor-step"] == "trainer"
    pods = kubectl.json("get", "pods", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name=ddp")["items"]
    by_index = {p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"]: p for p in pods}
    assert sorted(by_index) == ["0", "1"]
    for index, pod in by_index.items():
        assert pod["metadata"]["labels"]["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
        log = kubectl("logs", pod["metadata"]["name"], "-n", ns, "-c", "node")
        assert f"rank {index} of 2 sum 3.0 node {index}" in log, log
    listed = plane.yard("get", "pods", "--job", "trainjob/ddp", "-n", ns).stdout
    assert sorted(line.split()[0] for line in listed.splitlines()[1:]) == sorted(
        by_index[i]["metadata"]["name"] for i in "01"
    )


def test_a_suspended_trainjob_runs_nothing_until_resumed(kubectl: Kubectl, ns: str) -> None:
    apply(kubectl, ns, "later", {"numNodes": 1, "command": ["python", "-c", "print('resumed and ran')"]}, suspend=True)
    suspended = state_is(kubectl, ns, "later", "Suspended")
    assert conditions(suspended) == [("Suspended", "True", "Suspended")]
    assert kubectl.json("get", "jobset", "later", "-n", ns)["spec"]["suspend"] is True
    assert kubectl.json("get", "pods", "-n", ns)["items"] == []
    kubectl("patch", "trainjob", "later", "-n", ns, "--type=merge", "-p", '{"spec":{"suspend":false}}')
    done = state_is(kubectl, ns, "later", "Complete")
    assert conditions(done) == [("Suspended", "False", "Resumed"), ("Complete", "True", "AllJobsCompleted")]


def test_a_failing_node_restarts_the_whole_gang_then_fails_with_its_logs_kept(kubectl: Kubectl, ns: str) -> None:
    crash = "import os, sys; print('crash on node', os.environ['PET_NODE_RANK']); sys.exit(3)"
    apply(kubectl, ns, "crash", {"numNodes": 2, "command": ["python", "-c", crash]})
    failed = state_is(kubectl, ns, "crash", "Failed")
    (cond,) = [c for c in failed["status"]["conditions"] if c["type"] == "Failed"]
    assert cond["reason"] == "ReachedMaxRestarts" and "max number of restarts" in cond["message"], cond
    js = kubectl.json("get", "jobset", "crash", "-n", ns)
    assert js["status"]["restarts"] == js["spec"]["failurePolicy"]["maxRestarts"] > 0
    pods = kubectl.json("get", "pods", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name=crash")["items"]
    failed_pods = [p for p in pods if p["status"]["phase"] == "Failed"]
    assert failed_pods, [p["status"]["phase"] for p in pods]
    log = kubectl("logs", failed_pods[0]["metadata"]["name"], "-n", ns)
    assert "crash on node" in log


def test_a_trainjob_naming_no_runtime_says_so_in_an_event(kubectl: Kubectl, ns: str) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "orphan", "namespace": ns},
        "spec": {"runtimeRef": {"name": "no-such-runtime"}},
    }
    kubectl("apply", "-f", "-", input=json.dumps(body))

    def warned() -> str | None:
        events = kubectl.json("get", "events", "-n", ns, "--field-selector", "involvedObject.name=orphan")["items"]
        return next((e["message"] for e in events if e["reason"] == "TrainJobResourcesCreationFailed"), None)

    message = eventually(warned, timeout=60, what="the missing-runtime event")
    assert "ClusterTrainingRuntime 'no-such-runtime' does not exist" in message, message
    assert trainjob(kubectl, ns, "orphan")["status"]["state"] == "Pending"
