"""Kueue on a real ``yard up``: admission latency, and a long queue drained at a flat cost per job.

1. **Admission latency**: a ClusterQueue of 2 CPUs, ``--rounds`` pairs of one-pod batch/v1 Jobs
   of 2 CPUs each; the first runs ``sleep``, the second waits in the queue. Measured, per pair,
   from the moment the first Job's pod is seen Succeeded (its quota is free once its Job is
   ``Complete`` and its Workload ``Finished``) to the second Job's pod seen Running: what the
   queue adds between capacity freed and the next workload's pods running. Goal (issue #37):
   ≤ 1 s.
2. **Drain**: ``--jobs N`` one-pod Jobs (``true``, 1 CPU each) applied at once into a ClusterQueue
   of 2 CPUs, so they run about two at a time in queue order; time until all are Complete and
   the plane's CPU per job. ``--jobs 200,1000`` runs both sizes on fresh planes and prints the
   ratio of CPU per job (goal: flat, ≤ 1.3x from 200 to 1,000).

Watches are polled through one kept-alive connection (``bench/rawhttp.py``); the plane's CPU is
read from ``/proc/<pid>/stat``. Prints figures and ratios; asserts nothing.
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
from typing import Any

from apiserver import call, cpu_seconds, load, verdict
from node import Plane, start_plane
from rawhttp import Connection

REPO = Path(__file__).resolve().parents[1]
NS = "bench-queues"
JOBS = f"/apis/batch/v1/namespaces/{NS}/jobs"
PODS = f"/api/v1/namespaces/{NS}/pods"
TARGET_LATENCY_S = 1.0
TARGET_FLAT = 1.3

QUEUES = [
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "bench"}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "bench"},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "bench", "resources": [{"name": "cpu", "nominalQuota": "2"}]}],
                }
            ],
        },
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "bench", "namespace": NS},
        "spec": {"clusterQueue": "bench"},
    },
]


def batch_job(name: str, cpu: str, command: list[str]) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": command, "resources": {"requests": {"cpu": cpu}}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NS, "labels": {"kueue.x-k8s.io/queue-name": "bench"}},
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [container]}
            }
        },
    }


def kubectl_apply(plane: Plane, env: dict[str, str], items: list[dict[str, Any]]) -> None:
    manifest = plane.home / f"apply-{time.monotonic_ns()}.json"
    manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    cmd = ["kubectl", "--kubeconfig", str(plane.home / "kubeconfig"), "apply", "-f", str(manifest)]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)


async def pod_phases(conn: Connection) -> dict[str, str]:
    """Job name → its pod's phase (the newest pod's)."""
    pods = json.loads(await call(conn, "GET", PODS))["items"]
    return {
        p["metadata"]["labels"].get("batch.kubernetes.io/job-name", ""): (p.get("status") or {}).get("phase", "")
        for p in sorted(pods, key=lambda p: p["metadata"]["creationTimestamp"])
    }


async def until_phase(conn: Connection, job: str, phase: str, every: float = 0.01) -> None:
    """Poll (a watch would need a second connection per Job) until ``job``'s pod is in ``phase``."""
    while True:
        if (await pod_phases(conn)).get(job) == phase:
            return
        await asyncio.sleep(every)


async def latency(plane: Plane, env: dict[str, str], rounds: int) -> list[float]:
    conn = await Connection.open(plane.url)
    out = []
    for i in range(rounds):
        first, second = f"first-{i}", f"second-{i}"
        kubectl_apply(plane, env, [batch_job(first, "2", ["sleep", "1"])])
        await until_phase(conn, first, "Running")
        kubectl_apply(plane, env, [batch_job(second, "2", ["sleep", "0.2"])])
        await until_phase(conn, first, "Succeeded")
        freed = time.monotonic()
        await until_phase(conn, second, "Running")
        out.append(time.monotonic() - freed)
        await until_phase(conn, second, "Succeeded", every=0.05)
    conn.close()
    return out


async def drain(plane: Plane, env: dict[str, str], count: int) -> dict[str, float]:
    conn = await Connection.open(plane.url)
    cpu0 = cpu_seconds(plane.pid)
    started = time.monotonic()
    kubectl_apply(plane, env, [batch_job(f"drain-{i:05d}", "1", ["true"]) for i in range(count)])
    last_report = started
    while True:
        jobs = json.loads(await call(conn, "GET", JOBS + "?labelSelector=kueue.x-k8s.io%2Fqueue-name%3Dbench"))["items"]
        done = sum(
            1
            for j in jobs
            if j["metadata"]["name"].startswith("drain-")
            and any(
                c["type"] == "Complete" and c["status"] == "True"
                for c in (j.get("status") or {}).get("conditions") or []
            )
        )
        if done >= count:
            break
        if time.monotonic() - last_report > 10:
            print(f"   ... {done}/{count} complete after {time.monotonic() - started:.0f} s ({load()})", flush=True)
            last_report = time.monotonic()
        await asyncio.sleep(0.5)
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(plane.pid) - cpu0
    conn.close()
    return {"s": elapsed, "cpu ms/job": cpu / count * 1000}


def on_fresh_plane(src: Path, secure: bool, work: Any, profile: str | None = None) -> Any:
    home = Path(tempfile.mkdtemp(prefix="yard-queues-bench-"))
    plane, yard, env = start_plane(home, src, profile, secure)
    try:
        subprocess.run(
            ["kubectl", "--kubeconfig", str(home / "kubeconfig"), "create", "namespace", NS],
            check=True,
            env=env,
            stdout=subprocess.DEVNULL,
        )
        kubectl_apply(plane, env, QUEUES)
        return asyncio.run(work(plane, env))
    finally:
        plane.stop(yard, env)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="admission-latency pairs")
    parser.add_argument("--jobs", default="200,1000", help="comma-separated drain sizes, each on a fresh plane")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--insecure", action="store_true", help="plain http (yard up --insecure) instead of TLS")
    parser.add_argument("--profile", default=None, help="run each drain's plane under cProfile; stats to FILE.N")
    args = parser.parse_args()
    src, secure = Path(args.src).resolve(), not args.insecure
    print(f"trainyard queues benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; {load()}\n")
    if args.rounds:
        waits = on_fresh_plane(src, secure, lambda plane, env: latency(plane, env, args.rounds))
        shown = ", ".join(f"{w * 1000:.0f}" for w in waits)
        print(f"1. capacity freed -> next workload's pod Running, {len(waits)} rounds: {shown} ms")
        median = statistics.median(waits)
        worst = max(waits)
        print(
            f"   median {median * 1000:.0f} ms, max {worst * 1000:.0f} ms   {verdict(worst, TARGET_LATENCY_S, False)}\n"
        )
    results: dict[int, dict[str, float]] = {}
    for count in [int(n) for n in args.jobs.split(",") if n]:
        profile = f"{args.profile}.{count}" if args.profile else None
        results[count] = on_fresh_plane(src, secure, lambda plane, env, n=count: drain(plane, env, n), profile)
        r = results[count]
        rate = count / r["s"]
        print(
            f"2. {count} queued one-pod Jobs drained through a 2-CPU ClusterQueue in {r['s']:.1f} s ({rate:.1f} jobs/s)"
        )
        print(f"   plane CPU {r['cpu ms/job']:.1f} ms per job ({load()})\n")
    if len(results) > 1:
        small, large = min(results), max(results)
        ratio = results[large]["cpu ms/job"] / results[small]["cpu ms/job"]
        print(f"CPU per job, {large} / {small} jobs: {ratio:.2f}   {verdict(ratio, TARGET_FLAT, False)}")


if __name__ == "__main__":
    main()
