"""The cost of ``trainyard.runtime.report()`` inside a training loop (issue #18: ≤ 50 µs a call).

Times 100,000 calls of the module-level ``report()`` one by one (``perf_counter_ns`` around each
call) in four settings: rank 0 with the real sender thread and a sink that discards, the same with
a sink that hangs forever (the control plane unreachable), the same while the sender posts to a
local HTTP status server, and a rank that does not report. Each call passes a step and three
metrics, as a training step would. Prints the median, p99 and mean µs per call and the median's
ratio to the target; asserts nothing.

    PYTHONPATH=src .venv/bin/python bench/runtime_report.py [--calls N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer

from trainyard.runtime import reporting
from trainyard.runtime.reporting import Snapshot
from trainyard.runtime.trainer_status import TrainerStatusSink

TARGET_US = 50.0


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

    os.environ["RANK"] = "1"
    reporting.configure(Discard())
    show("rank 1 (does not report)", measure(args.calls), 0)


if __name__ == "__main__":
    main()
