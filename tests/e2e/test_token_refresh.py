"""A training that outlives its first service-account token still reports, end to end.

This module's plane grants tokens 5 seconds (``yard up --service-account-max-token-expiration``,
kube-apiserver's flag): the node must replace the token in the pod's projected volume before it
expires, as the kubelet does at 80 % of its life, and ``trainyard.runtime`` must send the current
one. The replica's script waits, as a long training would, until its first token has expired (and
the file holds another), then reports again; the job's status shows whether that report arrived.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually, own_plane

pytestmark = pytest.mark.e2e

LIFE_SECONDS = 5


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(
        tmp_path_factory, "yard-token-refresh", "--service-account-max-token-expiration", str(LIFE_SECONDS)
    )


@pytest.fixture(scope="module")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


OUTLIVING = """
import base64, json, os, pathlib, time
from trainyard import runtime
token_file = pathlib.Path(os.environ["TRAINYARD_PROGRESS_TOKEN"])
def claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
first = token_file.read_text().strip()
runtime.report(epoch=1, total_epochs=2, metrics={"loss": 0.5})
runtime.flush()
# Train past the first token's life; a node that never replaces it leaves it there (then the
# report below is refused), so the wait ends after a minute at most.
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    current = token_file.read_text().strip()
    if time.time() > claims(first)["exp"] and current != first:
        break
    time.sleep(0.1)
print("first token", claims(first), "current", claims(current), flush=True)
runtime.report(epoch=2, metrics={"loss": 0.25})
runtime.flush()
"""


def test_a_training_that_outlives_its_first_token_still_reports(kubectl: Kubectl) -> None:
    ns = f"tokens-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    main = {"name": "pytorch", "image": "python:3.11", "command": ["python3", "-c", OUTLIVING]}
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [main]}}}
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "long", "namespace": ns},
        "spec": {"pytorchReplicaSpecs": {"Master": master}},
    }
    kubectl("create", "-f", "-", input=json.dumps(body))

    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = kubectl.json("get", "pytorchjob", "long", "-n", ns)
        conds = (job.get("status") or {}).get("conditions") or []
        return job if conds and conds[-1]["type"] in ("Succeeded", "Failed") and conds[-1]["status"] == "True" else None

    job = eventually(done, timeout=180, what="the job to finish")

    assert job["status"]["conditions"][-1]["type"] == "Succeeded", job["status"]
    # the second report, sent after the first token expired, reached the job's status
    progress = job["status"]["trainingProgress"]
    assert (progress["currentEpoch"], progress["metrics"]) == (2, {"loss": 0.25}), progress
    log = kubectl("logs", "long-master-0", "-n", ns)
    assert "update dropped" not in log, log
    kubectl.run("delete", "namespace", ns, "--wait=false")
