from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from trainyard.runtime.reporting import CheckpointInfo, Reporter, Snapshot
from trainyard.runtime.trainer_status import TrainerStatusSink, build_trainer_status

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20+00:00


def test_payload_is_the_sdks_shape() -> None:
    snapshot = Snapshot(
        epoch=3,
        total_epochs=10,
        metrics={"loss": 0.25, "accuracy": 0.9, "phase": "train"},
        checkpoint=CheckpointInfo(path="/c/3", epoch=3, time=T0),
        progress_percentage=30,
        estimated_remaining_seconds=700,
        time=T0,
    )
    assert build_trainer_status(snapshot) == {
        "trainerStatus": {
            "lastUpdatedTime": "2023-11-14T22:13:20+00:00",
            "progressPercentage": 30,
            "estimatedRemainingSeconds": 700,
            "metrics": [
                {"name": "loss", "value": "0.25"},
                {"name": "accuracy", "value": "0.9"},
                {"name": "phase", "value": "train"},
            ],
        }
    }


def test_payload_leaves_unknowns_out_clamps_and_truncates() -> None:
    assert build_trainer_status(Snapshot(time=T0)) == {
        "trainerStatus": {"lastUpdatedTime": "2023-11-14T22:13:20+00:00"}
    }
    body = build_trainer_status(
        Snapshot(
            progress_percentage=140,
            estimated_remaining_seconds=-5,
            metrics={f"m{i}": i for i in range(300)},
            time=T0,
        )
    )["trainerStatus"]
    assert body["progressPercentage"] == 100
    assert body["estimatedRemainingSeconds"] == 0
    assert len(body["metrics"]) == 256
    assert body["metrics"][-1] == {"name": "m255", "value": "255"}


class StatusServer:
    def __init__(self, status: int = 200) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                outer.requests.append((self.path, dict(self.headers), json.loads(self.rfile.read(length))))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/apis/status/ns/job"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[StatusServer]:
    srv = StatusServer()
    yield srv
    srv.close()


def test_sink_posts_to_a_real_server_with_the_token(server: StatusServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    sink = TrainerStatusSink.from_environ(
        {"KUBEFLOW_TRAINER_SERVER_URL": server.url, "KUBEFLOW_TRAINER_SERVER_TOKEN": str(token)}
    )
    assert sink is not None
    snapshot = Snapshot(progress_percentage=50, metrics={"loss": 1.5}, time=T0)
    sink.send(snapshot, timeout=5)
    path, headers, body = server.requests[0]
    assert path == "/apis/status/ns/job"
    assert headers["Authorization"] == "Bearer secret-token"
    assert headers["Content-Type"] == "application/json"
    assert body == build_trainer_status(snapshot)
    token.write_text("refreshed-token\n")  # the node replaces it before it expires: read on every send
    sink.send(snapshot, timeout=5)
    assert server.requests[1][1]["Authorization"] == "Bearer refreshed-token"


def test_reporter_through_the_http_sink(server: StatusServer) -> None:
    reporter = Reporter(TrainerStatusSink(server.url), interval=0.01)
    reporter.report(epoch=5, total_epochs=10, metrics={"accuracy": 0.75})
    assert reporter.flush(timeout=5)
    reporter.close()
    body = server.requests[-1][2]["trainerStatus"]
    assert body["progressPercentage"] == 50
    assert body["metrics"] == [{"name": "accuracy", "value": "0.75"}]


def test_no_url_means_no_sink() -> None:
    assert TrainerStatusSink.from_environ({}) is None


def test_an_error_status_or_unreachable_server_is_a_dropped_update() -> None:
    failing = StatusServer(status=500)
    try:
        reporter = Reporter(TrainerStatusSink(failing.url), start=False)
        reporter.report(step=1, total_steps=4)
        assert reporter.pump(force=True)
        assert (reporter.sent, reporter.dropped) == (0, 1)
    finally:
        failing.close()
    gone = Reporter(TrainerStatusSink(failing.url), start=False, send_timeout=1)
    gone.report(step=2, total_steps=4)
    assert gone.pump(force=True)
    assert gone.dropped == 1
