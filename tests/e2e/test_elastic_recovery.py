"""The seed's elastic exercise (seeds/003, "Try this", third item), end to end on a real ``yard up``.

``examples/pytorch-elastic`` (3 Workers, ``minReplicas: 2``, ``maxReplicas: 4``, c10d, torchrun,
a rank-0 checkpoint every 5 steps) trains; then one worker goes, either deleted with kubectl
(worker-0, whose agent upstream's layout would have made the rendezvous host) or killed (every
process of its container SIGKILLed, as a crash or an OOM kill ends it; the container restarts in
place). The survivors must train again from the last checkpoint (never from step 0), the
replacement must join a later rendezvous, and the job must succeed; the rendezvous host
``<job>-rdzv`` is no replica (``replicaStatuses`` has Workers only) and goes with the job.

Progress is read from the training script's own lines in ``kubectl logs`` (see its docstring).
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

MANIFEST = REPO / "examples" / "pytorch-elastic" / "pytorchjob.yaml"
JOB_LABEL = "training.kubeflow.org/job-name"
STARTED = re.compile(
    r"^rank (\d+): (?:resumed from step (\d+)|starting from step 0) \(world \d+\) time ([\d.]+) up ([\d.na]+)$", re.M
)
STEP = re.compile(r"^step (\d+) world (\d+) loss \S+ time ([\d.]+)$", re.M)
STEPS = 90
# generous: the machine these run on is shared and often loaded; an idle one needs a fraction
WAIT = 240


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    # a killed container comes back at once, so its agent joins the next rendezvous soon
    yield from own_plane(tmp_path_factory, "yard-elastic-recovery", "--restart-backoff", "0.2")


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"elastic-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def manifest(name: str, ns: str, checkpoints: Path) -> dict[str, Any]:
    """The example as written, with its checkpoints in ``checkpoints`` and a shorter run."""
    body: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    body["metadata"] = {"name": name, "namespace": ns}
    worker = body["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert body["spec"]["elasticPolicy"] == {
        "minReplicas": 2,
        "maxReplicas": 4,
        "rdzvBackend": "c10d",
        "maxRestarts": 10,
    }
    assert worker["replicas"] == 3 and body["spec"]["nprocPerNode"] == "1"
    worker["template"]["spec"]["terminationGracePeriodSeconds"] = 5
    (container,) = worker["template"]["spec"]["containers"]
    container["env"] = [e for e in container["env"] if e["name"] != "CHECKPOINT_DIR"]
    container["env"].append({"name": "CHECKPOINT_DIR", "value": str(checkpoints)})
    container["args"] = ["--steps", str(STEPS), "--step-seconds", "0.2"]
    return body


def logs(kubectl: Kubectl, ns: str, pod: str) -> str:
    result = kubectl.run("logs", pod, "-n", ns)
    return result.stdout if result.returncode == 0 else ""


def crio_text(path: Path) -> str:
    """A container log file's lines as ``kubectl logs`` prints them (without the CRI prefix)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return ""
    return "\n".join(line.split(" ", 3)[3] if line.count(" ") >= 3 else "" for line in lines)


def steps(text: str) -> list[tuple[int, float]]:
    return [(int(m[1]), float(m[3])) for m in STEP.finditer(text)]


def starts(text: str) -> list[tuple[int, float]]:
    """``(step resumed from, time)`` of every training process start in a log (0: from scratch)."""
    return [(int(m[2] or 0), float(m[3])) for m in STARTED.finditer(text)]


def pod(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any] | None:
    result = kubectl.run("get", "pod", name, "-n", ns, "-o", "json")
    return json.loads(result.stdout) if result.returncode == 0 else None


def kill_container(plane: Plane, ns: str, victim: dict[str, Any]) -> None:
    """SIGKILL every process of the pod's container: its process group and all their descendants
    (torchrun starts its workers in sessions of their own), as the kubelet's cgroup kill does."""
    m = victim["metadata"]
    state = plane.home / "pods" / f"{ns}_{m['name']}_{m['uid']}" / "state" / "pytorch.json"
    pid = json.loads(state.read_text())["pid"]
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    doomed, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in doomed]
        doomed.update(children)
        frontier += children
    for target in doomed:
        try:
            os.kill(target, signal.SIGKILL)
        except ProcessLookupError:
            pass


# Each step below has its own bound (WAIT); the whole test may take several of them on a machine
# whose two cores the other tests' trainings share, so the suite's 300 s default is no bound here.
@pytest.mark.timeout(6 * WAIT)
@pytest.mark.parametrize(("victim", "how"), [("worker-0", "delete"), ("worker-2", "kill")])
def test_survivors_resume_from_the_checkpoint_the_replacement_joins_and_the_job_succeeds(
    plane: Plane, kubectl: Kubectl, ns: str, tmp_path: Path, victim: str, how: str
) -> None:
    name = f"seed-{how}"
    workers = [f"{name}-worker-{i}" for i in range(3)]
    lost = f"{name}-{victim}"
    kubectl("create", "-f", "-", input=json.dumps(manifest(name, ns, tmp_path)))

    # Training runs in a world of 3 and has written a checkpoint (steps 5, 10, ...). Read from the
    # node's log files, not through kubectl: the loss must land while training has steps left, and
    # three `kubectl logs` a poll on two busy cores can take longer than that.
    def trained() -> int:
        files = [f for w in workers for f in (plane.home / "pods").glob(f"{ns}_{w}_*/logs/pytorch.log")]
        return max((s for f in files for s, _ in steps(crio_text(f))), default=0)

    eventually(lambda: trained() >= 12, timeout=WAIT, what="training past step 12")
    before = pod(kubectl, ns, lost)
    assert before is not None
    killed_at = time.time()
    if how == "delete":
        kubectl("delete", "pod", lost, "-n", ns, "--wait=false")
    else:
        kill_container(plane, ns, before)
    assert trained() < STEPS, "training ended before the loss: nothing to recover"
    host = pod(kubectl, ns, f"{name}-rdzv")
    assert host is not None and host["status"]["phase"] == "Running"
    assert (
        JOB_LABEL in host["metadata"]["labels"]
        and "training.kubeflow.org/replica-type" not in host["metadata"]["labels"]
    )

    # The survivors start training again, from the checkpoint, not from scratch.
    survivors = [w for w in workers if w != lost]

    def resumed() -> list[tuple[int, float]]:
        return [s for w in survivors for s in starts(logs(kubectl, ns, w)) if s[1] > killed_at]

    again = eventually(resumed, timeout=WAIT, what="the survivors' training processes restarting")
    assert all(step >= 10 and step % 5 == 0 for step, _ in again), again
    first_resume = min(at for _, at in again)

    def stepped() -> list[tuple[int, float]]:
        # Rank 0 (the one that prints steps) may be in either survivor, and move between rounds; or
        # in the replacement, when it comes up in time to join the survivors' round (as it did on
        # a loaded machine: the three resumed together from step 15, the new worker-0 as rank 0).
        return sorted(
            (s for w in workers for s in steps(logs(kubectl, ns, w)) if s[1] > first_resume), key=lambda s: s[1]
        )

    after = eventually(stepped, timeout=WAIT, what="a training step after the restart")
    assert after[0][0] > 10 and after[0][0] - 1 in {step for step, _ in again}, (after[:3], again)

    # The replacement (a new pod, or the same pod's restarted container) joins a rendezvous.
    def replacement_joined() -> list[tuple[int, float]]:
        now = pod(kubectl, ns, lost)
        if now is None or (how == "delete" and now["metadata"]["uid"] == before["metadata"]["uid"]):
            return []
        return [s for s in starts(logs(kubectl, ns, lost)) if s[1] > killed_at]

    joined = eventually(replacement_joined, timeout=WAIT, what=f"the replacement {lost} training")
    assert all(step >= 10 for step, _ in joined), joined
    if how == "kill":
        restarted = pod(kubectl, ns, lost)
        assert restarted is not None and restarted["status"]["containerStatuses"][0]["restartCount"] >= 1

    # Nothing ever started over from step 0 after the loss, and the job succeeds.
    everything = [s for w in workers for s in starts(logs(kubectl, ns, w)) if s[1] > killed_at]
    assert all(step > 0 for step, _ in everything), everything

    def succeeded() -> dict[str, Any] | None:
        found: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
        done = any(c["type"] == "Succeeded" and c["status"] == "True" for c in found["status"].get("conditions", []))
        return found if done else None

    job = eventually(succeeded, timeout=WAIT, what="the job Succeeded")
    assert set(job["status"]["replicaStatuses"]) == {"Worker"}
    eventually(lambda: pod(kubectl, ns, f"{name}-rdzv") is None, timeout=WAIT, what="the rendezvous host deleted")
    phases = {p["status"]["phase"] for p in kubectl.json("get", "pods", "-n", ns, "-l", f"{JOB_LABEL}={name}")["items"]}
    assert phases == {"Succeeded"}, phases  # every agent ended well, the store outlived them
    assert f"done: {STEPS} steps" in "".join(logs(kubectl, ns, w) for w in workers)
