"""The cost of ``trainyard.runtime.report()`` inside a training loop (issue #18: ≤ 50 µs a call).

Times 100,000 calls of the module-level ``report()`` one by one (``perf_counter_ns`` around each
call) in five settings: rank 0 with the real sender thread and a sink that discards, the same with
a sink that hangs forever (the control plane unreachable), the same while the sender posts to a
local HTTP status server, the same with the MLflow sink beside it (a real ``mlflow server`` from
``.venv/envs/mlflow`` when it is built, else a small stand-in that answers MLflow's REST calls),
and a rank that does not report. Each call passes an epoch, a step and three metrics, as a
training step would; the epoch changes every 1,000 calls, so the MLflow run gets 100 epochs of
history. Prints the median, p99 and mean µs per call and the median's ratio to the target;
asserts nothing.

    PYTHONPATH=src .venv/bin/python bench/runtime_report.py [--calls N] [--mlflow-uri URI]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

from trainyard.runtime import reporting
from trainyard.runtime.mlflow import MlflowSink
from trainyard.runtime.reporting import Snapshot
from trainyard.runtime.trainer_status import TrainerStatusSink

TARGET_US = 50.0
MLFLOW = Path(__file__).resolve().parents[1] / ".venv" / "envs" / "mlflow" / "bin" / "mlflow"


class Discard:
    def send(self, snapshot: Snapshot, timeout: float) -> None:
        pass


class Hang:
    def __init__(self) -> None:
        self.release = threading.Event()

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self.release.wait()


@contextmanager
def status_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/status"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def mlflow_server() -> Iterator[tuple[str, str]]:
    """A tracking server's URI and what it is: the real one when its environment is built."""
    if not MLFLOW.exists():
        with stand_in_mlflow() as uri:
            yield uri, "stand-in"
        return
    with tempfile.TemporaryDirectory(prefix="bench-mlflow-") as tmp:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        command = [str(MLFLOW), "server", "--backend-store-uri", f"sqlite:///{tmp}/mlflow.db"]
        command += ["--default-artifact-root", f"{tmp}/artifacts", "--host", "127.0.0.1", "--port", str(port)]
        server = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        uri = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 300
            while True:
                try:
                    with urllib.request.urlopen(f"{uri}/health", timeout=2):
                        break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise RuntimeError("mlflow server did not start") from None
                    time.sleep(0.5)
            yield uri, f"mlflow server {MLFLOW.parent.parent.name}"
        finally:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


@contextmanager
def stand_in_mlflow() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            answer = {"run": {"info": {"run_id": "r0"}}} if self.path.endswith("runs/create") else {}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def measure(calls: int) -> list[int]:
    report = reporting.report
    clock = time.perf_counter_ns
    samples = [0] * calls
    for i in range(calls):
        metrics = {"loss": 1.0 / (i + 1), "accuracy": i / calls, "lr": 1e-3}
        start = clock()
        report(epoch=i // 1000, total_epochs=calls // 1000, step=i, total_steps=calls, metrics=metrics)
        samples[i] = clock() - start
    return samples


def logged_epochs(sink: MlflowSink) -> int:
    """How many epochs of ``loss`` the server holds for the sink's run (-1: not a real server)."""
    try:
        query = f"run_id={sink.run_id}&metric_key=loss"
        with urllib.request.urlopen(f"{sink.base_url}metrics/get-history?{query}", timeout=10) as response:
            return len(json.loads(response.read()).get("metrics", []))
    except (OSError, ValueError):
        return -1


def show(name: str, samples: list[int], sent: int) -> None:
    us = sorted(s / 1000 for s in samples)
    median = statistics.median(us)
    p99 = us[int(len(us) * 0.99)]
    mean = statistics.fmean(us)
    print(
        f"{name:<34} median {median:6.2f} µs  p99 {p99:7.2f} µs  mean {mean:6.2f} µs  "
        f"sink calls {sent:4d}  median/target {median / TARGET_US:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--mlflow-uri", help="an MLflow tracking server to use instead of starting one")
    args = parser.parse_args()
    os.environ.pop("RANK", None)
    print(f"{args.calls} report() calls each; target ≤ {TARGET_US:.0f} µs per call")

    reporter = reporting.configure(Discard(), interval=0.01)
    samples = measure(args.calls)
    reporter.flush(1)
    show("rank 0, discarding sink", samples, reporter.sent)

    hang = Hang()
    reporter = reporting.configure(hang, interval=0.01)
    show("rank 0, sink hangs (unreachable)", measure(args.calls), reporter.sent)  # 1: the hung one
    hang.release.set()

    with status_server() as url:
        reporter = reporting.configure(TrainerStatusSink(url), interval=0.01)
        samples = measure(args.calls)
        reporter.flush(5)
        show("rank 0, posting every 10 ms (HTTP)", samples, reporter.sent)

        with mlflow_server() if args.mlflow_uri is None else nullcontext((args.mlflow_uri, "given")) as (uri, what):
            tracking = MlflowSink(uri, experiment_name="trainyard-bench", run_name=f"runtime-report-{os.getpid()}")
            reporter = reporting.configure([TrainerStatusSink(url), tracking], interval=0.01)
            samples = measure(args.calls)
            reporter.close(30)  # sends the rest and ends the run, as at exit
            show("rank 0, HTTP + MLflow sink", samples, reporter.sent)
            print(f"{'':<34} MLflow ({what}): {logged_epochs(tracking)} epochs of loss in run {tracking.run_id}")

    os.environ["RANK"] = "1"
    reporting.configure(Discard())
    show("rank 1 (does not report)", measure(args.calls), 0)


if __name__ == "__main__":
    main()
