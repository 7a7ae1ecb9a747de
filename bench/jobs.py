"""Many jobs at once against a real ``yard up``: time to all Succeeded, plane CPU per job, peak RSS.

A hyperparameter sweep as a user submits it: ``kubectl apply -f`` of one List holding N
two-replica PyTorchJobs (a Master and a Worker whose containers run ``true``) on a fresh plane,
then one watch on PyTorchJobs until every job's ``Succeeded`` condition is True. The plane is the
whole ``yard up`` (API server, scheduler, node agent, operator, in one process); its CPU is read
from ``/proc/<pid>/stat`` (shims and ``true`` itself are other processes and not counted), its
peak memory is ``VmHWM``.

``--jobs 100,300`` (the default) runs each size on a fresh plane and prints the ratio
time(300) / time(100); ``--jobs 1000`` is the target's size. Targets (issue #19): 1,000 jobs
≤ 60 s, plane CPU ≤ 30 ms per job, time(300)/time(100) ≤ 3.3, peak RSS ≤ 400 MB; issue #35:
``--jobs 1000,10000`` keeps time and CPU per job within 1.3x and peak RSS ≤ 150 KB a finished
job. Prints
figures and ratios; asserts nothing. ``--profile FILE`` runs the plane under cProfile (CPU
time) and writes its statistics to FILE (FILE.N for each size N).

``--against OTHER_SRC --pairs K`` compares two checkouts' sources on a machine whose speed drifts
(a shared VM's did by ±20% within minutes): K pairs of sweeps of each size, interleaved (this
source, then the other, each on a fresh plane), and the median of each pair's CPU-per-job ratio.
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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apiserver import call, cpu_seconds, load, proc_status, verdict
from node import Plane, start_plane
from rawhttp import Connection, LineStream

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench-jobs"
JOBS = "/apis/kubeflow.org/v1/namespaces/bench-jobs/pytorchjobs"
TARGET_1000_S = 60.0
TARGET_CPU_MS = 30.0
TARGET_RATIO = 3.3
TARGET_RSS_MB = 400.0
# Issue #35: from 1,000 to 10,000 jobs, time and CPU per job within 1.3x; peak RSS per finished job.
TARGET_FLAT = 1.3
TARGET_KB_PER_JOB = 150.0


def job(name: str) -> dict[str, Any]:
    def replica() -> dict[str, Any]:
        container = {"name": "pytorch", "image": "busybox", "command": ["true"]}
        return {
            "replicas": 1,
            "restartPolicy": "Never",
            "template": {"spec": {"terminationGracePeriodSeconds": 0, "containers": [container]}},
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"pytorchReplicaSpecs": {"Master": replica(), "Worker": replica()}},
    }


@dataclass
class Seen:
    """When the watch first delivered each job Succeeded (or Failed)."""

    done: dict[str, float] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        obj = json.loads(line)["object"]
        name = obj["metadata"]["name"]
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") in ("Succeeded", "Failed") and cond.get("status") == "True" and name not in self.done:
                self.done[name] = time.time()
                if cond["type"] == "Failed":
                    self.failed.append(name)
                self.changed.set()

    async def until(self, count: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self.done) < count:
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{count - len(self.done)} of {count} jobs did not finish in {timeout:.0f} s")
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=min(left, 10))
            except TimeoutError:
                print(f"   ... {len(self.done)}/{count} finished after {timeout - left:.0f} s ({load()})", flush=True)


async def sweep(plane: Plane, count: int, env: dict[str, str]) -> dict[str, float]:
    conn = await Connection.open(plane.url)
    await call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}, 201, 409)
    rv = json.loads(await call(conn, "GET", JOBS))["metadata"]["resourceVersion"]
    conn.close()
    seen = Seen()
    transport, _ = await LineStream.open(plane.url, f"{JOBS}?watch=1&resourceVersion={rv}", seen.on_line)
    manifest = plane.home / f"sweep-{count}.json"
    items = [job(f"sweep-{i:04d}") for i in range(count)]
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    kubectl = ["kubectl", "--kubeconfig", str(plane.home / "kubeconfig"), "apply", "-f", str(manifest)]
    cpu0 = cpu_seconds(plane.pid)
    started = time.time()
    applied = await asyncio.create_subprocess_exec(*kubectl, env=env, stdout=subprocess.DEVNULL)
    if await applied.wait() != 0:
        raise SystemExit("kubectl apply failed")
    applied_in = time.time() - started
    await seen.until(count, timeout=max(600, count * 2))
    elapsed = max(seen.done.values()) - started
    cpu = cpu_seconds(plane.pid) - cpu0
    transport.close()
    hwm_kb = int(proc_status(plane.pid)["VmHWM"].split()[0])
    print(f"{count} two-replica jobs, one `kubectl apply` ({load()} at the end)")
    print(f"   applied in {applied_in:.1f} s; all finished after {elapsed:.1f} s ({count / elapsed:.1f} jobs/s)")
    per_job = cpu / count * 1000
    print(f"   plane CPU {cpu:.1f} s: {per_job:.1f} ms per job   {verdict(per_job, TARGET_CPU_MS, False)}")
    print(f"   plane peak RSS {hwm_kb / 1024:.0f} MB   {verdict(hwm_kb / 1024, TARGET_RSS_MB, False)}")
    if count == 1000:
        print(f"   1,000 jobs in {elapsed:.1f} s   {verdict(elapsed, TARGET_1000_S, False)}")
    if seen.failed:
        print(f"   {len(seen.failed)} job(s) failed: {seen.failed[:5]}")
    return {"s": elapsed, "jobs/s": count / elapsed, "cpu ms/job": cpu / count * 1000, "peak RSS MB": hwm_kb / 1024}


def run_once(count: int, src: Path, secure: bool) -> dict[str, float]:
    """One sweep of ``count`` jobs on a fresh plane running ``src``."""
    home = Path(tempfile.mkdtemp(prefix="yard-jobs-bench-"))
    plane, yard, env = start_plane(home, src, None, secure)
    try:
        return asyncio.run(sweep(plane, count, env))
    finally:
        plane.stop(yard, env)
        shutil.rmtree(home, ignore_errors=True)


def compare(sizes: list[int], src: Path, other: Path, pairs: int, secure: bool) -> None:
    for count in sizes:
        ratios: list[float] = []
        for _ in range(pairs):
            mine, theirs = run_once(count, src, secure), run_once(count, other, secure)
            ratios.append(mine["cpu ms/job"] / theirs["cpu ms/job"])
            print(
                f"   pair: {mine['cpu ms/job']:.1f} vs {theirs['cpu ms/job']:.1f} ms per job, "
                f"{mine['s']:.1f} vs {theirs['s']:.1f} s\n"
            )
        median = statistics.median(ratios)
        print(f"{count} jobs: CPU per job of {src} / {other}, median of {pairs} pairs: {median:.3f}\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", default="100,300", help="comma-separated sweep sizes, each on a fresh plane")
    parser.add_argument("--profile", default=None, help="run the plane under cProfile; stats to FILE.N")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--keep", action="store_true", help="keep each plane's home (its log, pods) afterwards")
    parser.add_argument("--insecure", action="store_true", help="plain http (yard up --insecure) instead of TLS")
    parser.add_argument("--against", default=None, help="another checkout's sources, run interleaved with --src")
    parser.add_argument("--pairs", type=int, default=3, help="with --against: pairs of sweeps per size")
    args = parser.parse_args()
    sizes = [int(n) for n in args.jobs.split(",")]
    if args.against:
        compare(sizes, Path(args.src).resolve(), Path(args.against).resolve(), args.pairs, not args.insecure)
        return
    print(f"trainyard many-jobs benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; {load()}\n")
    results: dict[int, dict[str, float]] = {}
    for count in sizes:
        home = Path(tempfile.mkdtemp(prefix="yard-jobs-bench-"))
        profile = f"{args.profile}.{count}" if args.profile else None
        plane, yard, env = start_plane(home, Path(args.src).resolve(), profile, not args.insecure)
        try:
            results[count] = asyncio.run(sweep(plane, count, env))
        finally:
            plane.stop(yard, env)
            if args.keep:
                print(f"   the plane's home is kept: {home}")
            else:
                shutil.rmtree(home, ignore_errors=True)
        print()
    if 100 in results and 300 in results:
        ratio = results[300]["s"] / results[100]["s"]
        print(f"time(300) / time(100) = {ratio:.2f}   {verdict(ratio, TARGET_RATIO, False)}")
    if len(results) > 1:
        small, large = min(results), max(results)
        a, b = results[small], results[large]
        growth = b["peak RSS MB"] - a["peak RSS MB"]
        print(f"from {small:,} to {large:,} jobs, per job:")
        time_ratio = (b["s"] / large) / (a["s"] / small)
        print(f"   time to all finished {time_ratio:.2f}x   {verdict(time_ratio, TARGET_FLAT, False)}")
        cpu_ratio = b["cpu ms/job"] / a["cpu ms/job"]
        print(f"   plane CPU {cpu_ratio:.2f}x   {verdict(cpu_ratio, TARGET_FLAT, False)}")
        per_job_kb = b["peak RSS MB"] * 1024 / large
        print(
            f"   peak RSS {per_job_kb:.0f} KB a finished job at {large:,} ({growth * 1024 / (large - small):.0f} KB"
            f" a job from {small:,} on)   {verdict(per_job_kb, TARGET_KB_PER_JOB, False)}"
        )


if __name__ == "__main__":
    main()
