"""Losing a node on a 3-node plane, with real training processes and the real kubectl.

* **Elastic** (``examples/pytorch-elastic``, one worker per node by anti-affinity): a worker's
  node stops (``yard node stop``: its machine and every process on it gone, heartbeats stop);
  the survivors re-rendezvous and keep training from the last checkpoint, never from step 0.
* **Static, spot** (``examples/pytorch-spot``: a Master and a Worker on nodes of their own,
  checkpoints on S3, a real moto server): the Worker's node gets a spot notice and is reclaimed
  (``yard node preempt``); the operator restarts the gang on the nodes left, which resumes from
  the last checkpoint published on S3 (each pod with a cache of its own, so it reads S3), and the
  job's events name the node that went and why.

Progress is read from the scripts' own lines in ``kubectl logs`` (their docstrings say which).
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, Kubectl, Plane, eventually, own_plane
from s3server import moto_server

pytestmark = pytest.mark.e2e

JOB_LABEL = "training.kubeflow.org/job-name"
STARTED = re.compile(
    r"^rank (\d+): (?:resumed from step (\d+)|starting from step 0) \(world \d+\) time ([\d.]+) up ([\d.na]+)$", re.M
)
STEP = re.compile(r"^step (\d+) world (\d+) loss \S+ time ([\d.]+)$", re.M)
WAIT = 240  # a shared, loaded 2-core machine; an idle one needs a fraction


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "yard-node-loss", "--nodes", "3", "--cpus", "4", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"loss-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def pods(kubectl: Kubectl, ns: str, job: str) -> dict[str, dict[str, Any]]:
    listed = kubectl.json("get", "pods", "-n", ns, "-l", f"{JOB_LABEL}={job}")["items"]
    return {p["metadata"]["name"]: p for p in listed}


def steps(log: str) -> list[int]:
    return [int(m[1]) for m in STEP.finditer(log)]


def test_an_elastic_job_keeps_training_when_a_workers_node_stops(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    body: dict[str, Any] = yaml.safe_load((REPO / "examples" / "pytorch-elastic" / "pytorchjob.yaml").read_text())
    body["metadata"] = {"name": "elastic", "namespace": ns}
    spec = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    # The workers one per node (a hard spread; the rendezvous pod, no replica, may go anywhere).
    workers_only = {
        "matchLabels": {JOB_LABEL: "elastic"},
        "matchExpressions": [{"key": "training.kubeflow.org/replica-type", "operator": "Exists"}],
    }
    spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": workers_only,
        }
    ]
    spec["terminationGracePeriodSeconds"] = 5
    (container,) = spec["containers"]
    container["env"] = [e for e in container["env"] if e["name"] != "CHECKPOINT_DIR"]
    container["env"].append({"name": "CHECKPOINT_DIR", "value": str(tmp_path / "checkpoints")})
    container["args"] = ["--steps", "400", "--step-seconds", "0.2"]
    kubectl("apply", "-f", "-", input=json.dumps(body))
    workers = [f"elastic-worker-{i}" for i in range(3)]
    eventually(
        lambda: max((s for w in workers for s in steps(kubectl.run("logs", "-n", ns, w).stdout)), default=0) >= 12,
        timeout=WAIT,
        what="training past step 12",
    )
    placed = pods(kubectl, ns, "elastic")
    nodes = {p["spec"]["nodeName"] for name, p in placed.items() if name in workers}
    assert len(nodes) == 3, "one worker per node"
    rdzv = next(p["spec"]["nodeName"] for name, p in placed.items() if name not in workers)
    lost = next(w for w in workers[1:] if placed[w]["spec"]["nodeName"] != rdzv)
    node = placed[lost]["spec"]["nodeName"]
    stopped = time.time()
    plane.yard("node", "stop", node)
    try:
        survivors = [w for w in workers if w != lost]

        def resumed() -> list[int]:
            logs = [kubectl.run("logs", "-n", ns, w).stdout for w in survivors]
            return [int(m[2]) for log in logs for m in STARTED.finditer(log) if m[2] and float(m[3]) > stopped]

        resumed_from = eventually(resumed, timeout=WAIT, what="the survivors resuming from a checkpoint")
        assert min(resumed_from) >= 5  # from the last checkpoint, not from step 0
        eventually(  # rank 0, whichever survivor it is now, prints the steps
            lambda: (
                max((s for w in survivors for s in steps(kubectl.run("logs", "-n", ns, w).stdout)), default=0)
                > max(resumed_from) + 3
            ),
            timeout=WAIT,
            what="training going on without the lost node",
        )
    finally:  # the next test needs every node
        plane.yard("node", "start", node)
    kubectl("delete", "pytorchjob", "-n", ns, "elastic", "--wait=false")


def test_a_static_job_restarts_on_the_nodes_left_from_its_s3_checkpoint(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    with moto_server() as endpoint:
        import boto3

        s3 = boto3.client(
            "s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
        )
        s3.create_bucket(Bucket="spot")
        body: dict[str, Any] = yaml.safe_load((REPO / "examples" / "pytorch-spot" / "pytorchjob.yaml").read_text())
        body["metadata"] = {"name": "spot", "namespace": ns}
        for replica in body["spec"]["pytorchReplicaSpecs"].values():
            template = replica["template"]
            template["metadata"]["labels"] = {"app": f"spot-{ns}"}
            term = template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
            term["labelSelector"] = {"matchLabels": {"app": f"spot-{ns}"}}
            (container,) = template["spec"]["containers"]
            container["args"] = ["--steps", "400", "--step-seconds", "0.1"]
            container["env"] = [e for e in container["env"] if e["name"] != "TRAINYARD_CHECKPOINT_DIR"] + [
                {"name": "TRAINYARD_CHECKPOINT_DIR", "value": f"s3://spot/{ns}"},
                {"name": "AWS_ENDPOINT_URL", "value": endpoint},
                {"name": "AWS_ACCESS_KEY_ID", "value": "k"},
                {"name": "AWS_SECRET_ACCESS_KEY", "value": "s"},
                {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"},
                {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                # a cache of each pod's own: a replacement elsewhere reads the checkpoint from S3
                {"name": "TRAINYARD_CHECKPOINT_CACHE", "value": str(tmp_path / "cache" / "$(POD_UID)")},
            ]
        kubectl("apply", "-f", "-", input=json.dumps(body))

        def published() -> list[str]:
            listed = s3.list_objects_v2(Bucket="spot", Prefix=f"{ns}/").get("Contents") or []
            return [o["Key"] for o in listed if o["Key"].endswith(".manifest.json")]

        eventually(published, timeout=WAIT, what="a checkpoint published on S3")
        placed = pods(kubectl, ns, "spot")
        worker = placed["spot-worker-0"]
        node = worker["spec"]["nodeName"]
        assert node != placed["spot-master-0"]["spec"]["nodeName"]
        reached = max(steps(kubectl.run("logs", "-n", ns, "spot-master-0").stdout))
        plane.yard("node", "preempt", node, "--notice", "1s")

        def restarted() -> dict[str, Any] | None:
            now = pods(kubectl, ns, "spot").get("spot-worker-0")
            if now is None or now["metadata"]["uid"] == worker["metadata"]["uid"]:
                return None
            return now if now["spec"].get("nodeName") else None

        replacement = eventually(restarted, timeout=WAIT, what="the Worker recreated on another node")
        assert replacement["spec"]["nodeName"] not in (node, "")

        def resumed() -> int | None:
            log = kubectl.run("logs", "-n", ns, "spot-master-0").stdout
            found = [int(m[2]) for m in STARTED.finditer(log) if m[2]]
            return found[0] if found else None

        step = eventually(resumed, timeout=WAIT, what="the restarted gang resuming from S3")
        # A checkpoint at least as new as the one before the notice (one more may still have been
        # uploading then): never from step 0.
        assert step % 5 == 0 and step >= reached - 10, (step, reached)
        events = kubectl("get", "events", "-n", ns, "--field-selector", "involvedObject.name=spot")
        assert f"on node {node}" in events and "TerminationByKubelet" in events
        kubectl("delete", "pytorchjob", "-n", ns, "spot", "--wait=false")
