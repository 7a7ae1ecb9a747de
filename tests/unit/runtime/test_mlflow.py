"""The MLflow sink against a small in-test server that speaks MLflow's REST API (the real server is
tests/e2e/test_mlflow_runtime.py: starting it costs seconds, so the cases live here)."""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from trainyard.runtime import mlflow, reporting
from trainyard.runtime.mlflow import MlflowSink, flatten_params, metric_key, metric_value
from trainyard.runtime.reporting import Reporter
from trainyard.runtime.snapshots import EpochMetrics, Snapshot

T0 = 1_700_000_000.0


class TrackingServer:
    """Answers the calls the sink makes as MLflow does, and records them. ``fail`` makes the next
    that many calls answer 503."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], Any]] = []  # method, path, headers, body
        self.experiments: dict[str, str] = {"Default": "0"}
        self.runs: dict[str, dict[str, Any]] = {}
        self.fail = 0
        self.create_races = False  # experiments/create answers RESOURCE_ALREADY_EXISTS
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._handle(None)

            def do_POST(self) -> None:
                self._handle(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))

            def _handle(self, body: Any) -> None:
                status, answer = outer.answer(self.command, self.path, dict(self.headers), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.uri = f"http://127.0.0.1:{self.httpd.server_port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, method: str, path: str, headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        self.calls.append((method, path, headers, body))
        if self.fail:
            self.fail -= 1
            return 503, {"error_code": "TEMPORARILY_UNAVAILABLE", "message": "try later"}
        url = urllib.parse.urlsplit(path)
        route = url.path.removeprefix("/api/2.0/mlflow/")
        if route == "experiments/get-by-name":
            name = urllib.parse.parse_qs(url.query)["experiment_name"][0]
            if name not in self.experiments:
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"no experiment {name}"}
            return 200, {"experiment": {"experiment_id": self.experiments[name], "name": name}}
        if route == "experiments/create":
            if self.create_races:
                self.experiments[body["name"]] = "7"
                return 400, {"error_code": "RESOURCE_ALREADY_EXISTS", "message": "exists"}
            self.experiments[body["name"]] = str(len(self.experiments))
            return 200, {"experiment_id": self.experiments[body["name"]]}
        if route == "runs/create":
            run_id = f"run{len(self.runs)}"
            self.runs[run_id] = {"create": body, "params": {}, "metrics": [], "status": "RUNNING"}
            return 200, {"run": {"info": {"run_id": run_id, "experiment_id": body["experiment_id"]}}}
        if route == "runs/log-batch":
            run = self.runs[body["run_id"]]
            assert len(body["params"]) <= 100 and len(body["metrics"]) + len(body["params"]) <= 1000
            run["params"].update({p["key"]: p["value"] for p in body["params"]})
            run["metrics"].extend(body["metrics"])
            return 200, {}
        if route == "runs/update":
            self.runs[body["run_id"]].update(status=body["status"], end_time=body["end_time"])
            return 200, {"run_info": {}}
        return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": route}

    def routes(self) -> list[str]:
        return [urllib.parse.urlsplit(path).path.removeprefix("/api/2.0/mlflow/") for _, path, _, _ in self.calls]

    def history(self, run_id: str, key: str) -> list[tuple[int, Any]]:
        return [(m["step"], m["value"]) for m in self.runs[run_id]["metrics"] if m["key"] == key]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[TrackingServer]:
    srv = TrackingServer()
    yield srv
    srv.close()


def environ(server: TrackingServer, **extra: str) -> dict[str, str]:
    return {"MLFLOW_TRACKING_URI": server.uri + "/", **extra}


def epochs(*records: tuple[int, dict[str, Any]]) -> tuple[EpochMetrics, ...]:
    return tuple(EpochMetrics(epoch=e, metrics=m, time=T0 + e) for e, m in records)


def test_a_run_with_params_tags_and_every_epoch(server: TrackingServer) -> None:
    env = environ(
        server,
        MLFLOW_EXPERIMENT_NAME="mnist",
        MLFLOW_RUN_NAME="train-1",
        TRAINYARD_JOB_NAME="train-1",
        TRAINYARD_JOB_NAMESPACE="team-a",
        TRAINYARD_JOB_KIND="PyTorchJob",
        TRAINYARD_HYPERPARAMETERS=json.dumps({"learningRate": 0.001, "optimizer": {"name": "adam", "beta": 0.9}}),
    )
    sink = MlflowSink.from_environ(env)
    assert sink is not None
    sink.send(Snapshot(params={"batch_size": 32}, epochs=epochs((1, {"loss": 0.9, "phase": "train"}))), 5)
    sink.send(Snapshot(epochs=epochs((2, {"loss": 0.5}), (3, {"loss": 0.25, "accuracy": 0.8}))), 5)
    sink.close(5)

    assert server.routes() == [
        "experiments/get-by-name",
        "experiments/create",
        "runs/create",
        "runs/log-batch",
        "runs/log-batch",
        "runs/update",
    ]
    (run_id,) = server.runs
    run = server.runs[run_id]
    assert run["create"]["experiment_id"] == server.experiments["mnist"]
    assert run["create"]["run_name"] == "train-1"
    assert {t["key"]: t["value"] for t in run["create"]["tags"]} == {
        "mlflow.runName": "train-1",
        "trainyard.job.name": "train-1",
        "trainyard.job.namespace": "team-a",
        "trainyard.job.kind": "PyTorchJob",
    }
    assert run["params"] == {
        "learningRate": "0.001",
        "optimizer.name": "adam",
        "optimizer.beta": "0.9",
        "batch_size": "32",
    }
    assert server.history(run_id, "loss") == [(1, 0.9), (2, 0.5), (3, 0.25)]
    assert server.history(run_id, "accuracy") == [(3, 0.8)]
    assert server.history(run_id, "phase") == []  # strings are not metrics
    assert run["metrics"][0]["timestamp"] == int((T0 + 1) * 1000)
    assert run["status"] == "FINISHED"


def test_default_experiment_and_no_run_name(server: TrackingServer) -> None:
    sink = MlflowSink(server.uri)
    sink.send(Snapshot(epochs=epochs((0, {"loss": 1.0}))), 5)
    assert server.routes() == ["runs/create", "runs/log-batch"]
    create = next(iter(server.runs.values()))["create"]
    assert create["experiment_id"] == "0"
    assert "run_name" not in create
    assert create["tags"] == []


def test_an_experiment_created_meanwhile_is_used(server: TrackingServer) -> None:
    server.create_races = True
    sink = MlflowSink(server.uri, experiment_name="shared")
    sink.send(Snapshot(), 5)
    assert server.routes() == [
        "experiments/get-by-name",
        "experiments/create",
        "experiments/get-by-name",
        "runs/create",
    ]
    assert next(iter(server.runs.values()))["create"]["experiment_id"] == "7"


def test_what_a_failed_send_held_goes_with_the_next(server: TrackingServer) -> None:
    sink = MlflowSink(server.uri, params={"lr": 0.1})
    server.fail = 1  # runs/create fails: nothing is created, nothing is lost
    with pytest.raises(mlflow.MlflowError, match="503 TEMPORARILY_UNAVAILABLE: try later"):
        sink.send(Snapshot(epochs=epochs((1, {"loss": 0.9}))), 5)
    sink.send(Snapshot(epochs=epochs((2, {"loss": 0.5}))), 5)
    server.fail = 1  # now log-batch fails once
    with pytest.raises(mlflow.MlflowError):
        sink.send(Snapshot(epochs=epochs((3, {"loss": 0.3}))), 5)
    sink.send(Snapshot(), 5)
    (run_id,) = server.runs  # one run, however many retries
    assert server.history(run_id, "loss") == [(1, 0.9), (2, 0.5), (3, 0.3)]
    assert server.runs[run_id]["params"] == {"lr": "0.1"}


def test_batches_stay_within_mlflows_limits(server: TrackingServer) -> None:
    sink = MlflowSink(server.uri, params={f"p{i}": i for i in range(250)})
    records = epochs(*[(e, {f"m{i}": float(i) for i in range(25)}) for e in range(100)])
    sink.send(Snapshot(epochs=records), 5)
    (run_id,) = server.runs
    assert len(server.runs[run_id]["params"]) == 250
    assert len(server.runs[run_id]["metrics"]) == 2500
    assert server.routes().count("runs/log-batch") == 3  # 100 params + 900 metrics, twice, then 50 + 700


def test_same_values_are_not_logged_twice_and_params_keep_their_first_value(
    server: TrackingServer, caplog: pytest.LogCaptureFixture
) -> None:
    sink = MlflowSink(server.uri)
    sink.send(Snapshot(params={"lr": 0.1}, epochs=epochs((1, {"loss": 0.5}))), 5)
    sink.send(Snapshot(params={"lr": 0.1}, epochs=epochs((1, {"loss": 0.5}))), 5)
    sink.send(Snapshot(params={"lr": 0.2}), 5)
    sink.send(Snapshot(params={"lr": 0.3}), 5)
    (run_id,) = server.runs
    assert server.history(run_id, "loss") == [(1, 0.5)]
    assert server.runs[run_id]["params"] == {"lr": "0.1"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["MLflow param lr keeps its first value '0.1', not '0.2'"]


def test_a_run_without_epochs_samples_metrics_by_step(server: TrackingServer) -> None:
    sink = MlflowSink(server.uri)
    sink.send(Snapshot(step=10, metrics={"loss": 2.0}), 5)
    sink.send(Snapshot(step=20, metrics={"loss": 1.0}), 5)
    sink.send(Snapshot(epoch=1, step=30, metrics={"loss": 0.5}), 5)  # epochs now: history only
    (run_id,) = server.runs
    assert server.history(run_id, "loss") == [(10, 2.0), (20, 1.0)]


def test_an_uncaught_exception_ends_the_run_failed(server: TrackingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    sink = MlflowSink(server.uri)
    sink.send(Snapshot(), 5)
    monkeypatch.setattr(sys, "last_value", RuntimeError("diverged"), raising=False)
    sink.close(5)
    assert next(iter(server.runs.values()))["status"] == "FAILED"


def test_a_given_run_id_is_logged_into_and_left_open(server: TrackingServer) -> None:
    server.runs["outer"] = {"create": {}, "params": {}, "metrics": [], "status": "RUNNING"}
    sink = MlflowSink.from_environ(environ(server, MLFLOW_RUN_ID="outer"))
    assert sink is not None
    sink.send(Snapshot(epochs=epochs((1, {"loss": 0.5}))), 5)
    sink.close(5)
    assert server.routes() == ["runs/log-batch"]
    assert server.runs["outer"]["status"] == "RUNNING"


def test_nothing_sent_means_no_run_and_nothing_to_end(server: TrackingServer) -> None:
    MlflowSink(server.uri).close(5)
    assert server.calls == []


@pytest.mark.parametrize(
    ("extra", "authorization"),
    [
        ({"MLFLOW_TRACKING_TOKEN": "t0k"}, "Bearer t0k"),
        (
            {"MLFLOW_TRACKING_USERNAME": "ann", "MLFLOW_TRACKING_PASSWORD": "pw"},
            "Basic " + base64.b64encode(b"ann:pw").decode(),
        ),
        ({"MLFLOW_TRACKING_USERNAME": "ann"}, None),
    ],
    ids=["token", "basic", "username-alone"],
)
def test_authentication_as_the_mlflow_client_reads_it(
    server: TrackingServer, extra: dict[str, str], authorization: str | None
) -> None:
    sink = MlflowSink.from_environ(environ(server, **extra))
    assert sink is not None
    sink.send(Snapshot(), 5)
    assert server.calls[0][2].get("Authorization") == authorization


def test_only_http_urls_enable_it_and_a_file_uri_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    assert MlflowSink.from_environ({}) is None
    assert MlflowSink.from_environ({"MLFLOW_TRACKING_URI": "http://mlflow:5000", "TRAINYARD_MLFLOW": "false"}) is None
    assert MlflowSink.from_environ({"MLFLOW_TRACKING_URI": "https://mlflow.example"}) is not None
    uri = "file:///tmp/trainyard-test-mlruns"
    mlflow._warned_uris.discard(uri)
    assert MlflowSink.from_environ({"MLFLOW_TRACKING_URI": uri}) is None
    assert MlflowSink.from_environ({"MLFLOW_TRACKING_URI": uri}) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "file:///tmp/trainyard-test-mlruns is not an http(s) URL" in warnings[0]


def test_bad_hyperparameters_are_left_out(caplog: pytest.LogCaptureFixture) -> None:
    for raw in ("not json", "[1, 2]"):
        sink = MlflowSink.from_environ({"MLFLOW_TRACKING_URI": "http://x", "TRAINYARD_HYPERPARAMETERS": raw})
        assert sink is not None
        assert sink._pending_params == {}
    assert len([r for r in caplog.records if "TRAINYARD_HYPERPARAMETERS" in r.getMessage()]) == 2


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1, 1.0),
        (0.5, 0.5),
        (True, 1.0),
        ("0.5", None),
        (None, None),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_metric_value(value: object, expected: object) -> None:
    assert metric_value(value) == expected


def test_metric_key_and_flatten_params() -> None:
    assert metric_key("val/acc@1 (top)") == "val/acc_1 _top_"
    assert metric_key("x" * 300) == "x" * 250
    assert flatten_params({"a": {"b": {"c": 1}}, "d": [1, 2], "e": {}, "f": None, "g": True}) == {
        "a.b.c": "1",
        "d": "[1, 2]",
        "e": "{}",
        "f": "None",
        "g": "True",
    }


def test_through_the_reporter_the_status_sink_gets_the_latest_and_mlflow_every_epoch(
    server: TrackingServer,
) -> None:
    class Latest:
        def __init__(self) -> None:
            self.sent: list[Snapshot] = []

        def send(self, snapshot: Snapshot, timeout: float) -> None:
            self.sent.append(snapshot)

    status = Latest()
    reporter = Reporter([status, MlflowSink(server.uri)], clock=lambda: 0.0, wall=lambda: T0, start=False)
    reporter.log_params({"epochs": 4})
    for epoch in range(1, 5):
        for step in range(10):
            reporter.report(epoch=epoch - 1, step=(epoch - 1) * 10 + step, metrics={"batch_loss": 1.0 / (step + 1)})
        reporter.report(epoch=epoch, total_epochs=4, metrics={"loss": 1.0 / epoch})
        reporter.pump()  # the clock never moves: only the first pump sends
    reporter.close()
    assert len(status.sent) == 2  # the first pump, and close's flush
    assert status.sent[-1].progress_percentage == 100
    (run_id,) = server.runs
    assert server.history(run_id, "loss") == [(1, 1.0), (2, 0.5), (3, 1.0 / 3), (4, 0.25)]
    assert server.runs[run_id]["params"] == {"epochs": "4"}
    assert server.runs[run_id]["status"] == "FINISHED"


def test_default_sinks_add_mlflow_to_the_status_sink(server: TrackingServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mlflow, "exit_on_sigterm", lambda: None)  # not in the test process
    for name in ("TRAINYARD_PROGRESS_URL", "KUBEFLOW_TRAINER_SERVER_URL", "MLFLOW_TRACKING_URI", "TRAINYARD_MLFLOW"):
        monkeypatch.delenv(name, raising=False)
    assert reporting.default_sinks() == []
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server.uri)
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", "http://127.0.0.1:1/status")
    names = [type(sink).__name__ for sink in reporting.default_sinks()]
    assert names == ["TrainerStatusSink", "MlflowSink"]


STOPPED = """
import sys
from trainyard import runtime
runtime.report(epoch=1, total_epochs=5, metrics={"loss": 0.5})
runtime.flush()
try:  # the signal may land while "ready" is still being written
    print("ready", flush=True)
    sys.stdin.read()  # until the test's SIGTERM
finally:
    print("finally ran", flush=True)
"""


def test_a_process_stopped_with_sigterm_ends_its_run_killed(server: TrackingServer) -> None:
    """Kubernetes stops a pod with SIGTERM: the default action would skip atexit and leave the run RUNNING."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "TRAINYARD_", "KUBEFLOW_", "RANK"))}
    env |= {"MLFLOW_TRACKING_URI": server.uri, "PYTHONPATH": str(Path(mlflow.__file__).parents[2])}
    child = subprocess.Popen(
        [sys.executable, "-c", STOPPED], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    child.send_signal(signal.SIGTERM)
    out, _ = child.communicate(timeout=30)
    assert child.returncode == 143 and "finally ran" in out
    (run,) = server.runs.values()
    assert run["status"] == "KILLED"
