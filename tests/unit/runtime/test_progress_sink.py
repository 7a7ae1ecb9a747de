"""``trainyard.runtime.progress.ProgressSink``: the body it posts, and a real HTTPS round trip with
the CA given as PEM text (as the operator injects it) and a token file read again on every send."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import auth
from trainyard.runtime import reporting
from trainyard.runtime.progress import ProgressSink, build_report
from trainyard.runtime.reporting import CheckpointInfo, Reporter, Snapshot

T0 = 1_700_000_000.0  # 2023-11-14T22:13:20+00:00
ROUTE = "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/job/trainingprogress"


def test_report_carries_everything_known_in_the_servers_names() -> None:
    snapshot = Snapshot(
        epoch=3,
        total_epochs=10,
        step=300,
        total_steps=1000,
        metrics={"loss": 0.25, "accuracy": 0.9, "phase": "train", "lr": float("inf")},
        checkpoint=CheckpointInfo(path="/c/checkpoint-3.pt", epoch=3, time=T0),
        progress_percentage=30,
        estimated_remaining_seconds=700,
        time=T0,
    )
    assert build_report(snapshot) == {
        "report": {
            "time": "2023-11-14T22:13:20+00:00",
            "epoch": 3,
            "totalEpochs": 10,
            "step": 300,
            "totalSteps": 1000,
            "progressPercentage": 30,
            "estimatedRemainingSeconds": 700,
            "metrics": {"loss": 0.25, "accuracy": 0.9, "phase": "train", "lr": "inf"},
            "checkpoint": {"path": "/c/checkpoint-3.pt", "time": "2023-11-14T22:13:20+00:00", "epoch": 3},
        }
    }
    assert build_report(Snapshot(time=T0)) == {"report": {"time": "2023-11-14T22:13:20+00:00"}}


class Server:
    """A small HTTPS server standing in for the operator's route; answers ``status``."""

    def __init__(self, tmp: Path, status: int = 200) -> None:
        self.requests: list[tuple[str, dict[str, str], Any]] = []
        outer = self
        credentials = auth.ensure(Layout(tmp / "pki-home"), "127.0.0.1")
        self.ca_pem = credentials.ca_pem.decode()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                outer.requests.append((self.path, dict(self.headers), json.loads(self.rfile.read(length))))
                answer = json.dumps({"kind": "Status", "message": "report.epoch: must be an integer"}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.socket = credentials.server_context().wrap_socket(self.httpd.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.httpd.server_port}{ROUTE}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path)
    yield srv
    srv.close()


def test_sink_posts_over_tls_with_the_ca_text_and_the_current_token(server: Server, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("first\n")
    env = {"TRAINYARD_PROGRESS_URL": server.url, "TRAINYARD_PROGRESS_TOKEN": str(token)}
    sink = ProgressSink.from_environ({**env, "TRAINYARD_PROGRESS_CA": server.ca_pem})
    assert sink is not None
    sink.send(Snapshot(epoch=1, total_epochs=3, time=T0), timeout=5)
    token.write_text("rotated\n")  # the kubelet rewrites projected tokens in place
    sink.send(Snapshot(epoch=2, total_epochs=3, time=T0), timeout=5)
    assert [(p, h["Authorization"], b["report"]["epoch"]) for p, h, b in server.requests] == [
        (ROUTE, "Bearer first", 1),
        (ROUTE, "Bearer rotated", 2),
    ]
    # without the CA the server's certificate is not trusted
    untrusting = ProgressSink.from_environ(env)
    assert untrusting is not None
    with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusting.send(Snapshot(time=T0), timeout=5)


def test_a_refusal_is_a_dropped_update_naming_the_servers_reason(tmp_path: Path) -> None:
    refusing = Server(tmp_path, status=422)
    try:
        sink = ProgressSink(refusing.url, ca_pem=refusing.ca_pem)
        with pytest.raises(RuntimeError, match=r"HTTP 422: report\.epoch: must be an integer"):
            sink.send(Snapshot(time=T0), timeout=5)
        reporter = Reporter(sink, start=False)
        reporter.report(epoch=1)
        assert reporter.pump(force=True)
        assert (reporter.sent, reporter.dropped) == (0, 1)
    finally:
        refusing.close()


def test_the_default_sink_is_this_one_when_the_operator_names_a_route(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINYARD_PROGRESS_URL", "http://127.0.0.1:9/x")
    monkeypatch.setenv("KUBEFLOW_TRAINER_SERVER_URL", "http://127.0.0.1:9/y")
    assert isinstance(reporting.default_sink(), ProgressSink)
    monkeypatch.delenv("TRAINYARD_PROGRESS_URL")
    assert not isinstance(reporting.default_sink(), ProgressSink)
    assert ProgressSink.from_environ({}) is None
