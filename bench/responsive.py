"""Does the plane answer while it does bulk work? Request latency while jobs are created, then torn down.

A user's two bulk operations on a real ``yard up``: ``kubectl apply`` of N two-replica PyTorchJobs
(``jobs.sweep``: one List, every job run to Succeeded), then ``kubectl delete namespace`` of the
namespace that holds them (N jobs, 2N pods, their Services and Events). Throughout, a prober in a
process of its own asks ``GET /api/v1/namespaces`` every ``--every`` seconds on a kept-alive
connection and, every second, on a new one (a TLS handshake, as every ``kubectl`` command makes),
and records each answer's latency. Printed per phase: samples, p50 / p99 / max of each kind of
probe, probes that got no answer within ``--timeout``; and how long the namespace took to go.

Targets (issue #35): p99 ≤ 100 ms while 3,000 finished jobs' namespace is deleted and while 1,000
jobs are created; the namespace gone within 60 s. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apiserver import call, load, pct, verdict
from jobs import NAMESPACE, sweep
from node import start_plane
from rawhttp import Connection

REPO = Path(__file__).resolve().parents[1]
PROBE = "/api/v1/namespaces"
TARGET_P99_MS = 100.0
TARGET_TEARDOWN_S = 60.0

Sample = tuple[float, str, float]  # (when, "kept" | "new", latency in seconds; -1: no answer)


def prober(url: str, every: float, timeout: float, stop: Any, out: Any) -> None:
    """Probe until ``stop`` is set; then send the samples through ``out``."""

    async def run() -> list[Sample]:
        samples: list[Sample] = []
        conn: Connection | None = None
        next_new = 0.0
        while not stop.is_set():
            started = time.monotonic()
            fresh = started >= next_new
            kind = "new" if fresh else "kept"
            try:
                if fresh:
                    next_new = started + 1.0
                    probe = await asyncio.wait_for(Connection.open(url), timeout)
                else:
                    if conn is None:
                        conn = await asyncio.wait_for(Connection.open(url), timeout)
                    probe = conn
                status, _ = await asyncio.wait_for(probe.request("GET", PROBE), timeout)
                if fresh:
                    probe.close()
                samples.append((time.time(), kind, time.monotonic() - started if status == 200 else -1.0))
            except (TimeoutError, OSError, asyncio.IncompleteReadError):
                samples.append((time.time(), kind, -1.0))
                if not fresh and conn is not None:
                    conn.close()
                    conn = None
            await asyncio.sleep(max(0.0, every - (time.monotonic() - started)))
        return samples

    out.send(asyncio.run(run()))


def report(phase: str, samples: list[Sample], start: float, end: float) -> dict[str, float]:
    print(f"   {phase}: {end - start:.1f} s")
    figures: dict[str, float] = {}
    for kind in ("kept", "new"):
        mine = [lat for when, k, lat in samples if k == kind and start <= when <= end]
        answered = [lat * 1000 for lat in mine if lat >= 0]
        lost = len(mine) - len(answered)
        if not answered:
            print(f"      {kind:>4} connection: no answers ({lost} probes lost)")
            continue
        p99 = pct(answered, 0.99)
        figures[f"{kind} p99 ms"] = p99
        print(
            f"      {kind:>4} connection: {len(answered)} probes, p50 {pct(answered, 0.5):.1f} ms, "
            f"p99 {p99:.1f} ms, max {max(answered):.1f} ms, {lost} unanswered   {verdict(p99, TARGET_P99_MS, False)}"
        )
    return figures


async def teardown(url: str) -> float:
    """Delete the sweep's namespace; seconds until it is gone."""
    conn = await Connection.open(url)
    started = time.time()
    await call(conn, "DELETE", f"/api/v1/namespaces/{NAMESPACE}", None, 200, 202)
    while True:
        status, _ = await conn.request("GET", f"/api/v1/namespaces/{NAMESPACE}")
        if status == 404:
            break
        await asyncio.sleep(0.1)
    conn.close()
    return time.time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs to create, then delete with their namespace")
    parser.add_argument("--every", type=float, default=0.05, help="seconds between probes")
    parser.add_argument("--timeout", type=float, default=5.0, help="a probe with no answer by then is lost")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    args = parser.parse_args()
    print(f"trainyard responsiveness benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; {load()}\n")
    home = Path(tempfile.mkdtemp(prefix="yard-responsive-bench-"))
    plane, yard, env = start_plane(home, Path(args.src).resolve(), None, True)
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receive, send = context.Pipe(duplex=False)
    probe = context.Process(target=prober, args=(plane.url, args.every, args.timeout, stop, send))
    try:
        probe.start()
        created_at = time.time()
        asyncio.run(sweep(plane, args.jobs, env))
        created_end = time.time()
        gone_in = asyncio.run(teardown(plane.url))
        torn_end = time.time()
        stop.set()
        samples: list[Sample] = receive.recv()
        probe.join()
        print(f"\n{PROBE} latency ({load()} at the end)")
        report(f"while {args.jobs} jobs are created and run", samples, created_at, created_end)
        deleted = f"while their namespace is deleted ({args.jobs} jobs, {2 * args.jobs} pods)"
        report(deleted, samples, created_end, torn_end)
        print(f"   namespace gone after {gone_in:.1f} s   {verdict(gone_in, TARGET_TEARDOWN_S, False)}")
        print(json.dumps({"jobs": args.jobs, "teardown s": round(gone_in, 1)}))
    finally:
        stop.set()
        if probe.is_alive():
            probe.terminate()
        plane.stop(yard, env)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
