"""``kubectl apply`` of a List of N PyTorchJobs: client-side against server-side apply, on a running plane.

A user's sweep as ``jobs.py`` submits it (``jobs.job()``: two-replica PyTorchJobs whose
containers run ``true``), applied to a fresh ``yard up`` with its operator running, so the jobs
run while they are applied, as they would for a user: ``kubectl apply -f list.json`` (client-side:
a GET and a create per object, the last-applied annotation) and ``kubectl apply --server-side -f
list.json`` (one apply PATCH per object), each on a plane of its own, ``--pairs`` times
interleaved. Printed per run: the wall time of the ``kubectl`` command, the plane's CPU seconds
meanwhile, kubectl's own CPU seconds, and the load average; then the median of the pairs' ratios
client-side / server-side.

Target (issue #35): server-side apply of 3,000 jobs at least 5 times faster than client-side.
``--src`` runs another checkout's plane; ``--wait`` also waits for every job to succeed (not
part of the figure). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from apiserver import call, children_cpu, cpu_seconds, load, verdict
from jobs import JOBS, NAMESPACE, Seen, job
from node import start_plane
from rawhttp import Connection, LineStream

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 5.0
MODES = {"client-side": [], "server-side": ["--server-side"]}


async def prepare(url: str) -> str:
    conn = await Connection.open(url)
    await call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}, 201, 409)
    rv = json.loads(await call(conn, "GET", JOBS))["metadata"]["resourceVersion"]
    conn.close()
    return str(rv)


async def wait_all(url: str, rv: str, count: int) -> None:
    seen = Seen()
    transport, _ = await LineStream.open(url, f"{JOBS}?watch=1&resourceVersion={rv}", seen.on_line)
    try:
        await seen.until(count, timeout=max(600, count * 2))
    finally:
        transport.close()


def run_once(mode: str, count: int, src: Path, wait: bool) -> dict[str, float]:
    home = Path(tempfile.mkdtemp(prefix="yard-apply-bench-"))
    plane, yard, env = start_plane(home, src, None, True)
    try:
        rv = asyncio.run(prepare(plane.url))
        manifest = home / "list.json"
        items = [job(f"apply-{i:04d}") for i in range(count)]
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
        kubectl = ["kubectl", "--kubeconfig", str(home / "kubeconfig"), "apply", *MODES[mode], "-f", str(manifest)]
        cpu0, client0 = cpu_seconds(plane.pid), children_cpu()
        started = time.monotonic()
        done = subprocess.run(kubectl, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall = time.monotonic() - started
        cpu, client = cpu_seconds(plane.pid) - cpu0, children_cpu() - client0
        if done.returncode != 0:
            raise SystemExit(f"kubectl apply ({mode}) failed: {done.stderr.decode()[-500:]}")
        print(
            f"   {mode:<11} {count} jobs: {wall:6.1f} s ({count / wall:.0f} jobs/s); CPU: plane {cpu:.1f} s, "
            f"kubectl {client:.1f} s ({load()})",
            flush=True,
        )
        if wait:
            asyncio.run(wait_all(plane.url, rv, count))
            print(f"   ... all {count} succeeded {time.monotonic() - started:.1f} s after the apply began", flush=True)
        return {"s": wall, "plane cpu s": cpu}
    finally:
        plane.stop(yard, env)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=3000, help="PyTorchJobs in the applied List")
    parser.add_argument("--pairs", type=int, default=1, help="(client-side, server-side) runs, interleaved")
    parser.add_argument("--modes", default="client-side,server-side", help="which applies to run")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--wait", action="store_true", help="also wait for every job to succeed")
    args = parser.parse_args()
    print(f"trainyard apply benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; {load()}\n")
    modes = args.modes.split(",")
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in modes}
    for _ in range(args.pairs):
        for mode in modes:
            runs[mode].append(run_once(mode, args.jobs, Path(args.src).resolve(), args.wait))
    if len(modes) == 2:
        ratios = [a["s"] / b["s"] for a, b in zip(runs[modes[0]], runs[modes[1]], strict=True)]
        ratio = statistics.median(ratios)
        judged = verdict(ratio, TARGET_RATIO, True)
        print(f"\n{modes[0]} / {modes[1]} wall time, median of {args.pairs}: {ratio:.2f}   {judged}")


if __name__ == "__main__":
    main()
