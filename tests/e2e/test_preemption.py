"""Priority preemption of a whole gang, and its resume from a checkpoint, through kubectl.

The plane declares 3 CPUs; each job is a two-pod PyTorchJob gang asking one CPU a pod. A
low-priority gang trains, saving a checkpoint each epoch (``trainyard.runtime.CheckpointManager``,
in a directory of the test: pods are processes here); a high-priority gang arrives and does not
fit, so the scheduler preempts the low gang whole (both pods: ``DisruptionTarget``, ``Preempted``
events), the high job runs and Succeeds, then the low job's pods are scheduled again and resume
from the epoch they had reached, not epoch 1, and the job Succeeds without a counted restart.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from gang_jobs import gang_job, job_events, pods_of, state

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

TRAIN = """
import os, pathlib, sys, time
from trainyard import runtime
out = pathlib.Path(OUT)
checkpoints = runtime.CheckpointManager(out / "ckpt", keep=100)
saved = checkpoints.load_latest()
start = int(saved) if saved else 0
print("starting at epoch", start + 1, flush=True)
if os.environ.get("RANK") == "0":
    (out / f"start-{start + 1}").touch()
for epoch in range(start + 1, 13):
    time.sleep(0.5)
    checkpoints.save(str(epoch).encode(), epoch=epoch)
    runtime.report(epoch=epoch, total_epochs=12)
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-preempt", "--cpus", "3")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"preempt-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def job(name: str, ns: str, command: list[str], priority_class: str) -> str:
    body = json.loads(gang_job(name, ns, command))
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["priorityClassName"] = priority_class
    return json.dumps(body)


def pod_events(kubectl: Kubectl, ns: str, reason: str) -> list[tuple[str, str]]:
    listing = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.kind=Pod,reason={reason}")
    return sorted((e["involvedObject"]["name"], e["message"]) for e in listing["items"])


def test_a_high_priority_gang_preempts_a_low_gang_whole_which_resumes_from_its_checkpoint(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    low_class, high_class = f"{ns}-low", f"{ns}-high"
    kubectl("create", "priorityclass", low_class, "--value=10")
    kubectl("create", "priorityclass", high_class, "--value=1000")
    try:
        script = TRAIN.replace("OUT", repr(str(tmp_path)))
        kubectl("apply", "-f", "-", input=job("low", ns, ["python3", "-c", script], low_class))
        ckpt = tmp_path / "ckpt" / "checkpoint-00000002.ckpt"
        eventually(ckpt.exists, timeout=60, what="the low job's second checkpoint")

        kubectl("apply", "-f", "-", input=job("high", ns, ["python3", "-c", "print('high ran')"], high_class))
        preempted = eventually(
            lambda: len(e := pod_events(kubectl, ns, "Preempted")) >= 2 and e,
            timeout=60,
            what="both low pods to be preempted",
        )
        assert [name for name, _ in preempted] == ["low-master-0", "low-worker-0"], preempted
        high_uids = {p["metadata"]["uid"] for p in pods_of(kubectl, ns, "high")}
        for _, message in preempted:
            by, _, node = message.removeprefix("Preempted by pod ").partition(" on node ")
            assert by in high_uids and node, message
        # the operator read the victims' DisruptionTarget condition: a preemption, not a failure
        said = eventually(
            lambda: [m for r, m in job_events(kubectl, ns, "low") if r == "Preempted"],
            timeout=30,
            what="the low job's Preempted event",
        )
        # the preemptor's scheduler (the plane's gang scheduler) names itself, as kube-scheduler does
        assert "scheduler-plugins-scheduler: preempting to accommodate a higher priority pod" in said[0], said

        eventually(lambda: state(kubectl, ns, "high") == "Succeeded", timeout=60, what="the high job to succeed")
        low = eventually(
            lambda: state(kubectl, ns, "low") == "Succeeded" and kubectl.json("get", "pytorchjob", "low", "-n", ns),
            timeout=90,
            what="the low job to resume and succeed",
        )
        starts = sorted(int(p.name.removeprefix("start-")) for p in tmp_path.glob("start-*"))
        assert starts[0] == 1 and len(starts) == 2 and starts[1] > 2, starts  # resumed, not from epoch 1
        assert low["status"].get("restartCount", 0) == 0, low["status"]  # preemption is no failure
        assert f"starting at epoch {starts[1]}" in kubectl("logs", "low-master-0", "-n", ns)
    finally:
        kubectl.run("delete", "priorityclass", low_class, high_class)
