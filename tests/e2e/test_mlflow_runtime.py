"""trainyard.runtime's MLflow reports reach a real ``mlflow server`` (issue #18 item 5).

The server is MLflow from PyPI in its own environment (``envs/mlflow.txt``, ``make framework-envs``),
on a sqlite store in the test's directory, offline. A PyTorchJob on the session plane sets
``MLFLOW_TRACKING_URI``: its master reports three epochs and some params through ``trainyard.runtime``
alone, its worker runs seed 001's own ``mlflow`` snippet; neither names its run, the operator
defaults ``MLFLOW_RUN_NAME`` to the job's name. The test reads both runs back through MLflow's REST
API. Starting the server is most of the cost, so this is the one test against it; the sink's other
cases are in tests/unit/runtime/test_mlflow.py.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import textwrap
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import Kubectl, eventually
from framework_envs import path as environment_path

pytestmark = pytest.mark.e2e

TRAINING = textwrap.dedent(
    """
    from trainyard import runtime

    runtime.log_params({"batch_size": 16, "optimizer": {"name": "sgd", "momentum": 0.9}})
    for epoch in range(1, 4):
        for step in range(5):  # step-level reports: only the latest goes anywhere
            runtime.report(epoch=epoch - 1, step=(epoch - 1) * 5 + step, metrics={"batch_loss": 2.0 / (step + 1)})
        runtime.report(epoch=epoch, total_epochs=3, metrics={"loss": 1.0 / epoch, "accuracy": 0.3 * epoch})
    # no flush: the reporter sends what is pending and ends the run at exit
    """
)


class Tracking:
    def __init__(self, uri: str) -> None:
        self.uri = uri

    def call(self, route: str, body: dict[str, Any] | None = None, **query: str) -> Any:
        url = f"{self.uri}/api/2.0/mlflow/{route}"
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def tracking(tmp_path: Path) -> Iterator[Tracking]:
    mlflow = environment_path("mlflow") / "bin" / "mlflow"
    port = free_port()
    env = {
        **os.environ,
        "HOME": str(tmp_path),
        "MLFLOW_DISABLE_TELEMETRY": "true",  # offline, and nothing of the test's leaves the machine
        "DO_NOT_TRACK": "true",
        # No job runner (a third process importing all of MLflow): the startup is CPU-bound.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    }
    log = (tmp_path / "mlflow-server.log").open("wb")
    server = subprocess.Popen(
        [
            str(mlflow),
            "server",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
            "--default-artifact-root",
            str(tmp_path / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its uvicorn worker goes with it at the end
    )
    client = Tracking(f"http://127.0.0.1:{port}")
    try:
        eventually(lambda: server.poll() is not None or client.healthy(), timeout=180, what="mlflow server /health")
        assert server.poll() is None, (tmp_path / "mlflow-server.log").read_text()
        yield client
    finally:
        # The whole group (the CLI and its uvicorn worker) at once: its store is thrown away, so a
        # graceful shutdown would only cost seconds.
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        log.close()


SEED_SNIPPET = textwrap.dedent(
    """
    import mlflow
    import os

    # seed 001's "Training Script Integration", as written but for the model (no torch in this environment)
    mlflow.set_tracking_uri(os.environ['MLFLOW_TRACKING_URI'])
    mlflow.set_experiment(os.environ['MLFLOW_EXPERIMENT_NAME'])

    with mlflow.start_run(run_name=os.environ.get('MLFLOW_RUN_NAME')):
        mlflow.log_params({'learning_rate': 0.001, 'batch_size': 32, 'epochs': 2})
        for epoch in range(2):
            mlflow.log_metric('train_loss', 1.0 / (epoch + 1), step=epoch)
    """
)


def test_a_jobs_params_and_every_epochs_metrics_reach_a_real_mlflow_server(
    tracking: Tracking, kubectl: Kubectl
) -> None:
    """Rank 0 reports through trainyard.runtime, then runs seed 001's own ``mlflow`` code (in the
    mlflow environment, its own experiment). Neither names its run: the operator names both after the job."""
    ns = f"mlflow-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", ns)
    env = {
        "MLFLOW_TRACKING_URI": tracking.uri,
        "MLFLOW_EXPERIMENT_NAME": "trainyard-e2e",
        "TRAINYARD_HYPERPARAMETERS": json.dumps({"learningRate": 0.01, "epochs": 3}),
        "TRAINING": TRAINING,
        "SEED_SNIPPET": SEED_SNIPPET,
        "MLFLOW_PYTHON": str(environment_path("mlflow") / "bin" / "python"),
    }
    both = 'python3 -c "$TRAINING" && MLFLOW_EXPERIMENT_NAME=seed-001 "$MLFLOW_PYTHON" -c "$SEED_SNIPPET"'
    container = {
        "name": "pytorch",
        "image": "python:3.11",
        "command": ["sh", "-c", both],
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }
    master = {"replicas": 1, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "mnist-train", "namespace": ns},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": master,
            }
        },
    }
    kubectl("create", "-f", "-", input=json.dumps(job))
    try:

        def outcome() -> str | None:
            conditions = (kubectl.json("get", "pytorchjob", "mnist-train", "-n", ns).get("status") or {}).get(
                "conditions"
            ) or [{}]
            last = conditions[-1]
            return last["type"] if last.get("type") in ("Succeeded", "Failed") else None

        assert eventually(outcome, timeout=240, what="the job to finish") == "Succeeded", kubectl(
            "logs", "mnist-train-master-0", "-n", ns
        )
        master_log = kubectl("logs", "mnist-train-master-0", "-n", ns)
        assert "Traceback" not in master_log and "dropped" not in master_log, master_log

        experiment = tracking.call("experiments/get-by-name", experiment_name="trainyard-e2e")["experiment"]
        runs = tracking.call(
            "runs/search",
            {"experiment_ids": [experiment["experiment_id"]], "filter": "attributes.run_name = 'mnist-train'"},
        )["runs"]
        assert len(runs) == 1
        info, data = runs[0]["info"], runs[0]["data"]
        assert info["status"] == "FINISHED"
        assert {p["key"]: p["value"] for p in data["params"]} == {
            "batch_size": "16",
            "optimizer.name": "sgd",
            "optimizer.momentum": "0.9",
            "learningRate": "0.01",
            "epochs": "3",
        }
        tags = {t["key"]: t["value"] for t in data["tags"]}
        assert (tags["trainyard.job.name"], tags["trainyard.job.kind"]) == ("mnist-train", "PyTorchJob")
        assert tags["trainyard.job.namespace"] == ns

        def history(run_id: str, key: str) -> list[tuple[int, float]]:
            metrics = tracking.call("metrics/get-history", run_id=run_id, metric_key=key)["metrics"]
            return sorted((m["step"], m["value"]) for m in metrics)

        assert history(info["run_id"], "loss") == [(1, 1.0), (2, 0.5), (3, pytest.approx(1 / 3))]
        accuracy = history(info["run_id"], "accuracy")
        assert accuracy == [(1, pytest.approx(0.3)), (2, pytest.approx(0.6)), (3, pytest.approx(0.9))]

        # the seed's own mlflow calls, in their experiment, under the job's name
        seeded = tracking.call("experiments/get-by-name", experiment_name="seed-001")["experiment"]
        (run,) = tracking.call("runs/search", {"experiment_ids": [seeded["experiment_id"]]})["runs"]
        assert run["info"]["run_name"] == "mnist-train" and run["info"]["status"] == "FINISHED"
        assert {p["key"] for p in run["data"]["params"]} == {"learning_rate", "batch_size", "epochs"}
        assert history(run["info"]["run_id"], "train_loss") == [(0, 1.0), (1, 0.5)]
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false")
