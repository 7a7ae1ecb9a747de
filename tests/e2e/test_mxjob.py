"""MXJob end to end (Training Operator v1.7's kind; MXNet itself cannot be installed): the example's
Server and Workers find the Scheduler from ``DMLC_*``/``MX_CONFIG`` and check in, the Scheduler's
success is the job's; a failed Worker fails the job in v1.7's words; a job without ``jobMode`` is
refused as v1.7's CRD refused it.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conftest import Plane
from trainyard.sdk import InvalidError, JobFailedError, TrainingClient

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/mxjob/mxjob.yaml"


@pytest.fixture(scope="module")
def sdk(plane: Plane) -> TrainingClient:
    return TrainingClient(plane.kubeconfig, namespace="default")


def test_the_example_checks_every_node_in_with_the_scheduler(plane: Plane, sdk: TrainingClient) -> None:
    plane.yard("delete", "mxjob", "mxjob-roles", "--ignore-not-found")
    run = plane.yard("run", "-f", EXAMPLE, "--timeout", "60", check=False)
    out = run.stdout
    assert run.returncode == 0, f"{out}\n{run.stderr}"
    out = re.sub(r"^(\[[^\]]+\]) +", r"\1 ", out, flags=re.MULTILINE)  # prefixes are padded to one width

    roster = "server-0, worker-0, worker-1"
    assert "[scheduler-0] scheduler-0: DMLC_ROLE=scheduler scheduler=127.0.0.1:" in out, out
    assert f"[scheduler-0] scheduler: all 3 nodes checked in: {roster}" in out, out
    for node in ("server-0", "worker-0", "worker-1"):
        role = node.split("-")[0]
        assert f"[{node}] {node}: DMLC_ROLE={role} scheduler=127.0.0.1:" in out, out
        assert f"[{node}] {node}: roster from the scheduler: {roster}" in out, out

    job = sdk.get_job("mxjob-roles", job_kind="MXJob")
    last = job["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == ("Succeeded", "True", "MXJobSucceeded")
    assert last["message"] == "MXJob mxjob-roles is successfully completed."
    # As v1.7 labelled them, the Servers are the master-role pods.
    assert sdk.get_job_pod_names("mxjob-roles", is_master=True, job_kind="MXJob") == ["mxjob-roles-server-0"]
    events = json.loads(plane.yard("get", "events", "-o", "json").stdout)["items"]
    own = 'Container image "ghcr.io/trainyard/examples-mxjob:latest" runs in trainyard\'s own environment'
    assert any(e["message"].startswith(own) for e in events), events
    sdk.delete_job("mxjob-roles", job_kind="MXJob")


def replica(code: str) -> dict[str, Any]:
    container = {"name": "mxnet", "image": "mxjob/mxnet:gpu", "command": ["python", "-c", code]}
    return {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}


def test_a_failed_worker_fails_the_job_in_v1_7s_words(sdk: TrainingClient) -> None:
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "mx-worker-fails"},
        "spec": {
            "jobMode": "MXTrain",
            # Running pods are stopped once the job has failed; the scheduler would otherwise wait on.
            "runPolicy": {"cleanPodPolicy": "Running"},
            "mxReplicaSpecs": {
                "Scheduler": replica("import time; time.sleep(60)"),
                "Worker": replica("import sys; sys.exit(1)"),
            },
        },
    }
    sdk.create_job(job)
    with pytest.raises(JobFailedError):
        sdk.wait_for_job_conditions("mx-worker-fails", job_kind="MXJob", wait_timeout=60, polling_interval=0.5)

    last = sdk.get_job("mx-worker-fails", job_kind="MXJob")["status"]["conditions"][-1]
    assert (last["type"], last["reason"]) == ("Failed", "MXJobFailed")
    assert last["message"] == "mxjob mx-worker-fails is failed because 1 Worker replica(s) failed."
    sdk.delete_job("mx-worker-fails", job_kind="MXJob")


def test_a_job_without_job_mode_is_refused_as_v1_7s_crd_did(sdk: TrainingClient) -> None:
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MXJob",
        "metadata": {"name": "mx-no-mode"},
        "spec": {"mxReplicaSpecs": {"Worker": replica("pass")}},
    }
    with pytest.raises(InvalidError) as invalid:
        sdk.create_job(job)
    assert invalid.value.code == 422
    assert [(c.field, c.message) for c in invalid.value.causes] == [("spec.jobMode", "Required value")]
    assert str(invalid.value) == 'MXJob.kubeflow.org "mx-no-mode" is invalid: spec.jobMode: Required value'
