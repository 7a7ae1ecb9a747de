"""The TrainJob status server on the session plane: a trainer reports progress the way the SDK does.

The trainer's script does what ``kubeflow.trainer.update_trainjob_status`` does (stdlib only: the
official SDK is not installed in the plane's environment): POST ``{"trainerStatus": ...}`` to
``$KUBEFLOW_TRAINER_SERVER_URL`` with the projected token as bearer, TLS verified against
``$KUBEFLOW_TRAINER_SERVER_CA_CERT``; the same token is refused for another TrainJob's endpoint.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from conftest import Kubectl, Plane, eventually

pytestmark = pytest.mark.e2e

REPORT = """
import json, os, ssl, urllib.error, urllib.request
from datetime import datetime, timezone
url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
status = {
    "lastUpdatedTime": datetime.now(timezone.utc).isoformat(),
    "progressPercentage": 42,
    "estimatedRemainingSeconds": 7,
    "metrics": [{"name": "loss", "value": "0.25"}, {"name": "epoch", "value": "3"}],
}
def post(target):
    body = json.dumps({"trainerStatus": status}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(target, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
print("other trainjob", post(url.replace("/trainjobs/report/", "/trainjobs/someone-else/")))
print("own trainjob", post(url))
"""


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"tjs-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def test_a_trainer_reports_progress_and_metrics_into_the_trainjob_status(
    plane: Plane, kubectl: Kubectl, ns: str
) -> None:
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "report", "namespace": ns},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {"numNodes": 1, "command": ["python", "-c", REPORT]},
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(body))

    def reported() -> Any:
        text = kubectl("get", "trainjob", "report", "-n", ns, "-o", "jsonpath={.status.trainerStatus}")
        return json.loads(text) if text.strip() else None

    status = eventually(reported, timeout=120, what="status.trainerStatus of TrainJob report")
    assert status["progressPercentage"] == 42 and status["estimatedRemainingSeconds"] == 7, status
    assert status["metrics"] == [{"name": "loss", "value": "0.25"}, {"name": "epoch", "value": "3"}], status
    assert status["lastUpdatedTime"].endswith("Z"), status

    def done() -> Any:
        found = kubectl.json("get", "trainjob", "report", "-n", ns)
        assert (found.get("status") or {}).get("state") != "Failed", found.get("status")
        return found if found["status"].get("state") == "Complete" else None

    finished = eventually(done, timeout=120, what="TrainJob report Complete")
    # the controller's own status writes leave what the trainer reported alone
    assert finished["status"]["trainerStatus"]["progressPercentage"] == 42
    header, line = kubectl("get", "trainjob", "report", "-n", ns, "-o", "wide").splitlines()
    assert dict(zip(header.split(), line.split(), strict=False))["PROGRESS"] == "42", (header, line)
    # yard reads upstream's shape into its training columns (the "epoch" metric is EPOCH; no ETA once Complete)
    header, line = plane.yard("get", "trainjobs", "report", "-n", ns, "-o", "wide").stdout.splitlines()
    starts = [m.start() for m in re.finditer(r"\S+", header)]  # cells may be empty: cut at the headers
    row = {header[a:b].strip(): line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)}
    assert [row[h] for h in ("STATE", "PROGRESS", "EPOCH", "LOSS", "ETA")] == ["Complete", "42%", "3", "0.25", ""], row
    pods = kubectl.json("get", "pods", "-n", ns, "-l", "jobset.sigs.k8s.io/jobset-name=report")["items"]
    log = kubectl("logs", pods[0]["metadata"]["name"], "-n", ns, "-c", "node")
    assert "other trainjob 403" in log and "own trainjob 200" in log, log
