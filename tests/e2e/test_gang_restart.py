"""A lost replica never hangs a static-world job: real torchrun + gloo DDP, restarted as a gang, under load.

A DDP world whose ranks are fixed at start cannot take one restarted rank back: its peers have
already done their collectives, or wait in a rendezvous that will not come again (the README's
``hello-ddp`` once hung like that for five minutes). By default the operator restarts every replica
of such a job together. Each job here is a real two-replica torchrun world (Master + Worker, one
process each) in which one replica exits 1 on its first attempt only: before
``init_process_group``, after the first ``all_reduce``, or the Master after it. Every job must end
``Succeeded`` with both ranks seeing the whole world on the final attempt; with ``restartPolicy:
Never`` the same failure ends the job ``Failed``, naming the replica.

The jobs run side by side while two busy-looping processes load both cores, since that is where
the races between ranks show (the machine running CI may be busy too). Replicas keep marker files
in a directory of the test, which every incarnation of a pod sees (pods are processes here).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

RANK_SCRIPT = """\
import os, sys

marks, replica, fail_at = os.environ["MARKS"], os.environ["REPLICA"], os.environ.get("FAIL_AT", "")
attempt = len([n for n in os.listdir(marks) if n.startswith(replica + ".attempt")])
open(os.path.join(marks, f"{replica}.attempt{attempt}"), "w").close()


def fail(where):
    print(f"{replica} fails on purpose {where} (attempt {attempt})", flush=True)
    sys.exit(1)


if fail_at == "before" and attempt == 0:
    fail("before init_process_group")
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.ones(1)
dist.all_reduce(total)
if fail_at == "after" and attempt == 0:
    fail("after the first all_reduce")
rank, world = dist.get_rank(), dist.get_world_size()
with open(os.path.join(marks, f"{replica}.done"), "w") as out:
    out.write(f"{rank} {world} {total.item()} {attempt}")
print(f"rank {rank} world {world} sum {total.item()} attempt {attempt}", flush=True)
dist.destroy_process_group()
"""

# (job name, replica that fails, where, restartPolicy)
CASES = [
    ("worker-before-init", "Worker", "before", "OnFailure"),
    ("worker-after-allreduce", "Worker", "after", "OnFailure"),
    ("master-after-allreduce", "Master", "after", "OnFailure"),
    ("never-worker-before-init", "Worker", "before", "Never"),
]


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-gang-restart")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def cpu_burners() -> Iterator[None]:
    """Two processes that keep both cores busy while the test runs."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def replica(name: str, policy: str, script: Path, marks: Path, fail_at: str) -> dict[str, Any]:
    env = [{"name": "MARKS", "value": str(marks)}, {"name": "REPLICA", "value": name}]
    if fail_at:
        env.append({"name": "FAIL_AT", "value": fail_at})
    container = {
        "name": "pytorch",
        "image": "pytorch/pytorch:2.13.0",
        "command": ["python", "-m", "torch.distributed.run", str(script)],
        "env": env,
    }
    return {
        "replicas": 1,
        "restartPolicy": policy,
        "template": {"spec": {"terminationGracePeriodSeconds": 5, "containers": [container]}},
    }


def manifest(ns: str, name: str, failing: str, where: str, policy: str, script: Path, marks: Path) -> dict[str, Any]:
    specs = {
        rtype: replica(rtype.lower(), policy, script, marks, where if rtype == failing else "")
        for rtype in ("Master", "Worker")
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"nprocPerNode": "1", "runPolicy": {"backoffLimit": 3}, "pytorchReplicaSpecs": specs},
    }


def finished(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        job: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
        conds = (job.get("status") or {}).get("conditions") or []
        return job if conds and conds[-1]["type"] in ("Succeeded", "Failed") and conds[-1]["status"] == "True" else None

    return eventually(probe, timeout=420, interval=1, what=f"{name} to finish")


def events(kubectl: Kubectl, ns: str, name: str, reason: str) -> list[str]:
    listing = kubectl.json("get", "events", "-n", ns, "--field-selector", f"involvedObject.name={name},reason={reason}")
    return [e["message"] for e in listing["items"]]


def test_one_failed_replica_restarts_the_whole_gang(kubectl: Kubectl, tmp_path: Path, cpu_burners: None) -> None:
    ns = f"gang-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    marks: dict[str, Path] = {}
    for name, failing, where, policy in CASES:
        marks[name] = tmp_path / name
        marks[name].mkdir()
        body = manifest(ns, name, failing, where, policy, script, marks[name])
        kubectl("create", "-f", "-", input=json.dumps(body))

    jobs = {name: finished(kubectl, ns, name) for name, *_ in CASES}

    for name, failing, _where, policy in CASES:
        job, last = jobs[name], jobs[name]["status"]["conditions"][-1]
        if policy == "Never":
            assert (last["type"], last["message"]) == (
                "Failed",
                f"PyTorchJob {name} is failed because 1 Worker replica(s) failed.",
            )
            assert "restartCount" not in job["status"]
            exits = events(kubectl, ns, name, "ExitedWithCode")
            assert f"Pod: {ns}.{name}-worker-0 exited with code 1" in exits
            continue
        assert last["type"] == "Succeeded", (name, job["status"])
        restarts = job["status"]["restartCount"]
        # Both ranks finished the same, final attempt in a world of two: nobody ran alone.
        done = {r: (marks[name] / f"{r}.done").read_text().split() for r in ("master", "worker")}
        assert done["master"][:3] == ["0", "2", "2.0"] and done["worker"][:3] == ["1", "2", "2.0"], (name, done)
        assert done["master"][3] == done["worker"][3] != "0", (name, done)
        # One gang restart per count, the deliberate one naming the replica, its exit code and reason.
        restarting = events(kubectl, ns, name, "RestartingAllReplicas")
        assert restarts >= 1 and len(restarting) == restarts, (name, restarts, restarting)
        pod = f"{name}-{failing.lower()}-0"
        assert (
            f"Restarting every replica of PyTorchJob {name} together (restart 1 of backoffLimit 3): "
            f"{failing} 0 (pod {pod}) exited with code 1 (Error)"
        ) in restarting
        # The failed replica's peer was restarted with it: each restart created both pods again.
        created = events(kubectl, ns, name, "SuccessfulCreatePod")
        assert sorted(created) == sorted(
            [f"Created pod: {name}-master-0", f"Created pod: {name}-worker-0"] * (restarts + 1)
        )

    kubectl.run("delete", "namespace", ns, "--wait=false")
