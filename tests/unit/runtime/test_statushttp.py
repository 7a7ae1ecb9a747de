"""``runtime.statushttp``: the status sinks' one transport against a real stdlib server, and its
error policy through the reporter: nothing raised into training, nothing hung, one warning."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import auth
from trainyard.runtime.progress import ProgressSink
from trainyard.runtime.reporting import Reporter, Snapshot
from trainyard.runtime.statushttp import StatusPoster, StatusRefused
from trainyard.runtime.trainer_status import TrainerStatusSink


class Server:
    """Answers every POST with ``status`` and ``answer`` (both may change); holds each one until
    ``release`` is set."""

    def __init__(self, *, status: int = 200, answer: bytes = b"", pki: Path | None = None) -> None:
        self.status = status
        self.answer = answer
        self.requests: list[tuple[dict[str, str], Any]] = []
        self.release = threading.Event()
        self.release.set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers["Content-Length"])
                outer.requests.append((dict(self.headers), json.loads(self.rfile.read(length))))
                outer.release.wait(10)
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(outer.answer)))
                self.end_headers()
                self.wfile.write(outer.answer)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        self.ca_pem = ""
        if pki is not None:
            credentials = auth.ensure(Layout(pki), "127.0.0.1")
            self.ca_pem = credentials.ca_pem.decode()
            self.httpd.socket = credentials.server_context().wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_port}/status"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    srv = Server()
    yield srv
    srv.close()


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(pki=tmp_path / "pki")
    yield srv
    srv.close()


def test_a_post_is_json_with_the_token_read_from_its_file_each_time(server: Server, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    poster = StatusPoster(server.url, token_path=str(token))
    poster.post({"n": 1}, timeout=5)
    token.write_text("two\n")
    poster.post({"n": 2}, timeout=5)
    token.write_text("")
    poster.post({"n": 3}, timeout=5)  # an empty token file: no header rather than "Bearer "
    assert [(h.get("Authorization"), h["Content-Type"], b) for h, b in server.requests] == [
        ("Bearer one", "application/json", {"n": 1}),
        ("Bearer two", "application/json", {"n": 2}),
        (None, "application/json", {"n": 3}),
    ]


def test_the_ca_is_trusted_as_pem_text_or_as_a_file_and_only_then(tls_server: Server, tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.crt"
    ca_file.write_text(tls_server.ca_pem)
    StatusPoster(tls_server.url, ca_pem=tls_server.ca_pem).post({}, timeout=5)
    StatusPoster(tls_server.url, ca_file=str(ca_file)).post({}, timeout=5)
    assert len(tls_server.requests) == 2
    # A CA file that is not there leaves the system's trust store, which does not know this CA.
    for untrusting in (StatusPoster(tls_server.url), StatusPoster(tls_server.url, ca_file=str(tmp_path / "none"))):
        with pytest.raises(OSError, match="CERTIFICATE_VERIFY_FAILED"):
            untrusting.post({}, timeout=5)


def test_a_bad_ca_is_a_dropped_update_not_an_error_where_reporting_is_configured(tls_server: Server) -> None:
    sink = ProgressSink.from_environ({"TRAINYARD_PROGRESS_URL": tls_server.url, "TRAINYARD_PROGRESS_CA": "not a CA"})
    assert sink is not None
    with pytest.raises(OSError):
        sink.send(Snapshot(time=0.0), timeout=5)
    reporter = Reporter(sink, start=False)
    reporter.report(epoch=1)
    assert reporter.pump(force=True)
    assert (reporter.sent, reporter.dropped, tls_server.requests) == (0, 1, [])


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        pytest.param(
            b'{"kind": "Status", "message": "report.epoch: must be an integer"}', ": report.epoch: must", id="status"
        ),
        pytest.param(b"", ": ", id="empty"),
    ],
)
def test_a_refusal_names_the_code_and_the_servers_reason(answer: bytes, message: str) -> None:
    refusing = Server(status=422, answer=answer)
    try:
        with pytest.raises(StatusRefused, match=f"HTTP 422{message}"):
            StatusPoster(refusing.url).post({}, timeout=5)
    finally:
        refusing.close()


def test_a_success_other_than_200_is_a_refusal() -> None:
    accepting = Server(status=204)
    try:
        with pytest.raises(StatusRefused, match="HTTP 204"):
            StatusPoster(accepting.url).post({}, timeout=5)
    finally:
        accepting.close()


def test_a_server_that_does_not_answer_costs_the_timeout_not_a_hang(server: Server) -> None:
    server.release.clear()
    started = time.monotonic()
    with pytest.raises(OSError):
        StatusPoster(server.url).post({}, timeout=0.2)
    assert time.monotonic() - started < 5


def test_a_missing_token_file_fails_the_send(server: Server, tmp_path: Path) -> None:
    with pytest.raises(OSError):
        StatusPoster(server.url, token_path=str(tmp_path / "no-token")).post({}, timeout=5)
    assert server.requests == []


@pytest.mark.parametrize("make_sink", [ProgressSink, TrainerStatusSink], ids=["progress", "trainer-status"])
def test_either_sink_down_for_the_whole_run_drops_its_updates_and_warns_once(
    make_sink: Any, caplog: pytest.LogCaptureFixture
) -> None:
    gone = Server()
    gone.close()  # nothing listens there any more
    reporter = Reporter(make_sink(gone.url), start=False, send_timeout=1)
    with caplog.at_level(logging.DEBUG, logger="trainyard.runtime.reporting"):
        for step in range(5):
            reporter.report(step=step, total_steps=5)
            assert reporter.pump(force=True)
    assert (reporter.sent, reporter.dropped) == (0, 5)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "update dropped" in warnings[0].getMessage()


@pytest.mark.parametrize("make_sink", [ProgressSink, TrainerStatusSink], ids=["progress", "trainer-status"])
def test_either_sink_refused_then_accepted_sends_again_without_a_restart(make_sink: Any, server: Server) -> None:
    server.status = 503
    reporter = Reporter(make_sink(server.url), start=False)
    reporter.report(step=1, total_steps=4)
    assert reporter.pump(force=True)
    server.status = 200
    reporter.report(step=2, total_steps=4)
    assert reporter.pump(force=True)
    assert (reporter.sent, reporter.dropped, len(server.requests)) == (1, 1, 2)
