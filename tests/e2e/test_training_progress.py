"""Training progress of the ``kubeflow.org/v1`` kinds, end to end on the session plane.

Replicas are small ``python -c`` scripts using ``trainyard.runtime`` as training code would: their
reports reach the operator's status server (the route and token the operator injected) and show
in ``kubectl get``; ``runPolicy.earlyStopping`` ends a job Succeeded and stops its replicas with
SIGTERM; a job restarted after a failure resumes from its last checkpoint, a torch state dict
that ``CheckpointManager.load_latest()`` gives back as one. Scripts coordinate with the test
through files in the test's directory (pods are processes on this machine).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"progress-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def replica(script: str, replicas: int = 1, restart: str = "Never", grace: int = 5) -> dict[str, Any]:
    main = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", script]}
    return {
        "replicas": replicas,
        "restartPolicy": restart,
        "template": {"spec": {"terminationGracePeriodSeconds": grace, "containers": [main]}},
    }


def submit(kubectl: Kubectl, ns: str, name: str, specs: dict[str, Any], **run_policy: Any) -> None:
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": specs},
    }
    kubectl("create", "-f", "-", input=json.dumps(body))


def finished(kubectl: Kubectl, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        job: dict[str, Any] = kubectl.json("get", "pytorchjob", name, "-n", ns)
        conds = (job.get("status") or {}).get("conditions") or []
        done = conds and conds[-1]["type"] in ("Succeeded", "Failed") and conds[-1]["status"] == "True"
        return job if done else None

    return eventually(probe, timeout=180, what=f"{name} to finish")


def row(kubectl: Kubectl, ns: str, name: str, *wide: str) -> dict[str, str]:
    """``kubectl get pytorchjob`` as a header → cell mapping."""
    header, line = kubectl("get", "pytorchjob", name, "-n", ns, *wide).splitlines()[:2]
    return dict(zip(header.split(), line.split(), strict=True))


REPORTING = """
import json, os, pathlib, ssl, time, urllib.error, urllib.request
from trainyard import runtime
runtime.report(epoch=1, total_epochs=3, metrics={"loss": 0.5, "accuracy": 0.75})
runtime.flush()
if os.environ["RANK"] == "0":
    # the same token for another job's route is refused
    url = os.environ["TRAINYARD_PROGRESS_URL"].replace("/pytorchjobs/live/", "/pytorchjobs/someone-else/")
    token = open(os.environ["TRAINYARD_PROGRESS_TOKEN"]).read().strip()
    request = urllib.request.Request(url, data=b'{"report": {}}', method="POST",
                                     headers={"Authorization": "Bearer " + token})
    context = ssl.create_default_context(cadata=os.environ["TRAINYARD_PROGRESS_CA"])
    try:
        urllib.request.urlopen(request, context=context, timeout=10)
    except urllib.error.HTTPError as exc:
        print("other job", exc.code)
release = pathlib.Path(RELEASE)
while not release.exists():
    time.sleep(0.05)
runtime.report(epoch=3, metrics={"loss": 0.25, "accuracy": 0.875})
"""


def test_progress_and_metrics_show_in_kubectl_get_while_the_job_trains(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    release = tmp_path / "release"
    script = REPORTING.replace("RELEASE", repr(str(release)))
    submit(kubectl, ns, "live", {"Master": replica(script), "Worker": replica(script)})

    training = eventually(
        lambda: (r := row(kubectl, ns, "live"))["PROGRESS"] == "33%" and r,
        timeout=120,
        what="PROGRESS 33% in kubectl get",
    )
    assert list(training) == ["NAME", "STATE", "PROGRESS", "EPOCH", "AGE"]
    assert training["EPOCH"] == "1" and training["STATE"] in ("Created", "Running"), training
    wide = row(kubectl, ns, "live", "-o", "wide")
    assert (wide["LOSS"], wide["ACCURACY"]) == ("0.5", "0.75"), wide
    assert list(wide) == ["NAME", "STATE", "PROGRESS", "EPOCH", "LOSS", "ACCURACY", "ETA", "AGE"]

    release.touch()
    job = finished(kubectl, ns, "live")
    assert job["status"]["conditions"][-1]["type"] == "Succeeded", job["status"]
    # the reconciler's own status writes left what the trainer reported in place
    progress = job["status"]["trainingProgress"]
    assert (progress["progress"], progress["currentEpoch"], progress["totalEpochs"]) == ("100%", 3, 3), progress
    assert progress["metrics"] == {"loss": 0.25, "accuracy": 0.875}, progress
    assert "other job 403" in kubectl("logs", "live-master-0", "-n", ns)


EARLY = """
import os, pathlib, signal, sys, time
from trainyard import runtime
out = pathlib.Path(OUT)
def stopped(signum, frame):
    (out / "sigterm").write_text(str(signum))
    sys.exit(0)
signal.signal(signal.SIGTERM, stopped)
checkpoints = runtime.CheckpointManager(out / "ckpt", keep=100)
for epoch in range(1, 1001):
    time.sleep(0.2)
    checkpoints.save(b"weights", epoch=epoch)
    runtime.report(epoch=epoch, total_epochs=1000, metrics={"accuracy": round(0.5 + 0.1 * epoch, 2)})
"""


def test_a_target_metric_ends_the_job_succeeded_and_stops_its_replicas(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    script = EARLY.replace("OUT", repr(str(tmp_path)))
    submit(kubectl, ns, "early", {"Master": replica(script)}, earlyStopping={"target": 0.8})

    job = finished(kubectl, ns, "early")

    cond = job["status"]["conditions"][-1]
    assert (cond["type"], cond["reason"]) == ("Succeeded", "TargetMetricReached"), job["status"]
    assert cond["message"].startswith("accuracy ") and ">= target 0.8 at epoch " in cond["message"], cond
    progress = job["status"]["trainingProgress"]
    assert 3 <= progress["currentEpoch"] < 1000, progress
    # stopped with SIGTERM (the grace period), its checkpoints untouched
    assert eventually(lambda: (tmp_path / "sigterm").exists(), timeout=30, what="the SIGTERM marker")
    assert (tmp_path / "sigterm").read_text() == "15"
    assert Path(progress["lastCheckpoint"]["path"]).is_file(), progress
    assert len(list((tmp_path / "ckpt").iterdir())) >= 3


RESUMING = """
import os, pathlib, sys
import torch
from trainyard import runtime
out = pathlib.Path(OUT)
checkpoints = runtime.CheckpointManager(out / "ckpt")
model = torch.nn.Linear(2, 1)
saved = checkpoints.load_latest()  # the state dict as it was saved, epoch included
start = saved.pop("epoch") if saved else 0
if start:
    model.load_state_dict(saved)
    print("resumed from epoch", start, "at", os.environ.get("TRAINYARD_RESUME_FROM"), "bias", model.bias.item())
for epoch in range(start + 1, 5):
    (out / f"trained-{epoch}").mkdir()  # fails if an epoch were trained twice
    with torch.no_grad():
        model.bias.fill_(epoch)
    checkpoints.save(model.state_dict() | {"epoch": epoch}, epoch=epoch)
    runtime.report(epoch=epoch, total_epochs=4, metrics={"loss": round(1 / epoch, 3)})
    if epoch == 2 and not (out / "crashed").exists():
        (out / "crashed").touch()
        runtime.flush()
        sys.exit(1)
"""


def test_a_job_restarted_after_a_failure_resumes_from_its_last_checkpoint(
    kubectl: Kubectl, ns: str, tmp_path: Path
) -> None:
    script = RESUMING.replace("OUT", repr(str(tmp_path)))
    submit(kubectl, ns, "resume", {"Master": replica(script, restart="OnFailure")}, backoffLimit=2)

    job = finished(kubectl, ns, "resume")

    assert job["status"]["conditions"][-1]["type"] == "Succeeded", job["status"]
    assert job["status"]["restartCount"] == 1, job["status"]
    progress = job["status"]["trainingProgress"]
    assert (progress["currentEpoch"], progress["progress"]) == (4, "100%"), progress
    assert sorted(p.name for p in tmp_path.glob("trained-*")) == [f"trained-{e}" for e in range(1, 5)]
    checkpoint_2 = str(tmp_path / "ckpt" / "checkpoint-00000002.ckpt")
    assert f"resumed from epoch 2 at {checkpoint_2} bias 2.0" in kubectl("logs", "resume-master-0", "-n", ns)
