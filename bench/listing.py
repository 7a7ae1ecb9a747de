"""Big lists through the real ``kubectl``: ``kubectl get pytorchjobs -A`` of 10,000 jobs, pods of 20,000.

A plane as a user's is after a large sweep: ``--jobs`` (10,000) finished two-replica PyTorchJobs
and their twice as many pods, spread over ``--namespaces`` (4) namespaces. To fill it in a minute
instead of a sweep's hour, the plane is ``yard up --no-operator`` (nothing reconciles, nothing
runs) and the benchmark writes what the operator and the node would have: each job is created
(``jobs.job()``'s manifest) and given the status of a finished job through ``/status`` (its
``Created``, ``Running`` and ``Succeeded`` conditions, replica statuses, start and completion
times); each pod is created bound to a node that does not exist (so nothing starts it) and given
a ``Succeeded`` status with a terminated container. The writes go over ``rawhttp`` connections.

Then each command is run ``--runs`` (3) times with the plane's kubeconfig, and its median wall
time (the whole ``kubectl`` process: start, TLS, every chunk of 500, printing), the plane's CPU
seconds and kubectl's own for it are printed, and the output checked for the right number of
items:

* ``kubectl get pytorchjobs -A`` (a Table, ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``),
  ``-o name`` and ``-o json``;
* ``kubectl get pods -A``, ``-o name`` and ``-o json``.

Target (issue #35): ``kubectl get pytorchjobs -A`` of 10,000 ≤ 2 s. Prints figures and ratios;
asserts nothing. ``--against OTHER_SRC`` measures the same filled home with another checkout's
sources too, interleaved (a fresh plane for each round, ``--rounds`` rounds: this source, then the
other). ``--profile FILE`` runs the measuring plane under cProfile (CPU time) and writes its
statistics to FILE.
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

from apiserver import PHANTOM_NODE, call, children_cpu, cpu_seconds, load, verdict
from jobs import job
from node import Plane, start_plane
from rawhttp import Connection

REPO = Path(__file__).resolve().parents[1]
TARGET_JOBS_S = 2.0
FINISHED = "2026-01-01T00:00:10Z"
STARTED = "2026-01-01T00:00:01Z"


def namespace(i: int, spaces: int) -> str:
    return f"bench-listing-{i % spaces}"


def job_status(ns: str, name: str) -> dict[str, Any]:
    """What the operator writes on a two-replica job that succeeded."""

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": message,
            "lastUpdateTime": FINISHED,
            "lastTransitionTime": FINISHED,
        }

    def replica(rtype: str) -> dict[str, Any]:
        selector = (
            f"training.kubeflow.org/job-name={name},training.kubeflow.org/operator-name=pytorchjob-controller,"
            f"training.kubeflow.org/replica-type={rtype}"
        )
        return {"succeeded": 1, "selector": selector}

    return {
        "status": {
            "conditions": [
                condition("Created", "True", "PyTorchJobCreated", f"PyTorchJob {ns}/{name} is created."),
                condition("Running", "False", "PyTorchJobRunning", f"PyTorchJob {ns}/{name} is running."),
                condition(
                    "Succeeded", "True", "PyTorchJobSucceeded", f"PyTorchJob {ns}/{name} successfully completed."
                ),
            ],
            "replicaStatuses": {"Master": replica("master"), "Worker": replica("worker")},
            "startTime": STARTED,
            "completionTime": FINISHED,
            "lastReconcileTime": FINISHED,
        }
    }


def pod(ns: str, job_name: str, rtype: str) -> dict[str, Any]:
    """A replica's pod as the operator makes one (labels, env, port), bound to no real node."""
    master = f"{job_name}-master-0"
    return {
        "metadata": {
            "name": f"{job_name}-{rtype}-0",
            "namespace": ns,
            "labels": {
                "training.kubeflow.org/job-name": job_name,
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
                "training.kubeflow.org/replica-type": rtype,
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/job-role": "master" if rtype == "master" else "",
            },
        },
        "spec": {
            "nodeName": PHANTOM_NODE,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pytorch",
                    "image": "busybox",
                    "command": ["true"],
                    "env": [
                        {"name": "MASTER_ADDR", "value": master},
                        {"name": "MASTER_PORT", "value": "23456"},
                        {"name": "WORLD_SIZE", "value": "2"},
                        {"name": "RANK", "value": "0" if rtype == "master" else "1"},
                        {"name": "PYTHONUNBUFFERED", "value": "1"},
                    ],
                    "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
                }
            ],
        },
    }


def pod_status() -> dict[str, Any]:
    terminated = {"exitCode": 0, "reason": "Completed", "startedAt": STARTED, "finishedAt": FINISHED}
    return {
        "status": {
            "phase": "Succeeded",
            "conditions": [
                {"type": kind, "status": "False" if kind in ("Ready", "ContainersReady") else "True"}
                for kind in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "startTime": STARTED,
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "image": "busybox",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "started": False,
                    "state": {"terminated": terminated},
                    "lastState": {},
                }
            ],
        }
    }


async def fill(url: str, jobs: int, spaces: int, connections: int) -> None:
    conn = await Connection.open(url)
    for s in range(spaces):
        await call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace(s, spaces)}}, 201, 409)
    conn.close()
    todo = iter(range(jobs))
    status = json.dumps(pod_status()).encode()

    async def writer() -> None:
        conn = await Connection.open(url)
        for i in todo:
            ns, name = namespace(i, spaces), f"job-{i:05d}"
            base = f"/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs"
            manifest = job(name)
            manifest["metadata"]["namespace"] = ns
            await call(conn, "POST", base, manifest, 201)
            await call(conn, "PATCH", f"{base}/{name}/status", job_status(ns, name), 200, patch=True)
            for rtype in ("master", "worker"):
                pods = f"/api/v1/namespaces/{ns}/pods"
                await call(conn, "POST", pods, pod(ns, name, rtype), 201)
                merge = "application/merge-patch+json"
                code, raw = await conn.request("PATCH", f"{pods}/{name}-{rtype}-0/status", status, merge)
                if code != 200:
                    raise RuntimeError(f"pod status: {code} {raw[:300]!r}")
        conn.close()

    started = time.monotonic()
    await asyncio.gather(*(writer() for _ in range(connections)))
    took = time.monotonic() - started
    print(f"filled: {jobs} jobs and {2 * jobs} pods in {spaces} namespaces in {took:.0f} s ({load()})")


COMMANDS: list[tuple[str, list[str], str]] = [
    ("get pytorchjobs -A", ["get", "pytorchjobs", "-A"], "table"),
    ("get pytorchjobs -A -o name", ["get", "pytorchjobs", "-A", "-o", "name"], "lines"),
    ("get pytorchjobs -A -o json", ["get", "pytorchjobs", "-A", "-o", "json"], "json"),
    ("get pods -A", ["get", "pods", "-A"], "table"),
    ("get pods -A -o name", ["get", "pods", "-A", "-o", "name"], "lines"),
    ("get pods -A -o json", ["get", "pods", "-A", "-o", "json"], "json"),
]


def count_items(output: bytes, form: str) -> int:
    if form == "json":
        return len(json.loads(output)["items"])
    lines = [line for line in output.splitlines() if line.strip()]
    return len(lines) - 1 if form == "table" else len(lines)


def measure(plane: Plane, env: dict[str, str], runs: int, jobs: int) -> dict[str, tuple[float, float, float]]:
    """Each command ``runs`` times: median wall seconds, plane CPU seconds, kubectl's CPU seconds."""
    kubectl = ["kubectl", "--kubeconfig", str(plane.home / "kubeconfig")]
    figures: dict[str, tuple[float, float, float]] = {}
    for label, argv, form in COMMANDS:
        walls, cpus, clients = [], [], []
        expected = jobs if "pytorchjobs" in argv else 2 * jobs
        for _ in range(runs):
            cpu0, client0 = cpu_seconds(plane.pid), children_cpu()
            started = time.monotonic()
            done = subprocess.run([*kubectl, *argv], env=env, capture_output=True, check=False)
            walls.append(time.monotonic() - started)
            cpus.append(cpu_seconds(plane.pid) - cpu0)
            clients.append(children_cpu() - client0)
            if done.returncode != 0:
                raise SystemExit(f"kubectl {label} failed: {done.stderr.decode()[:500]}")
            got = count_items(done.stdout, form)
            if got != expected:
                raise SystemExit(f"kubectl {label}: {got} items, expected {expected}")
        wall, cpu, client = statistics.median(walls), statistics.median(cpus), statistics.median(clients)
        figures[label] = (wall, cpu, client)
        runs_text = " / ".join(f"{w:.2f}" for w in walls)
        line = (
            f"   kubectl {label:<28} {wall:6.2f} s (runs {runs_text}; CPU: plane {cpu:.2f} s, kubectl {client:.2f} s)"
        )
        if label == "get pytorchjobs -A":
            line += f"   {verdict(wall, TARGET_JOBS_S, False)}"
        print(line, flush=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000, help="finished PyTorchJobs (and twice as many pods)")
    parser.add_argument("--namespaces", type=int, default=4, help="namespaces the jobs are spread over")
    parser.add_argument("--connections", type=int, default=8, help="connections filling the plane")
    parser.add_argument("--runs", type=int, default=3, help="runs of each command; the median is printed")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--against", default=None, help="another checkout's sources, measured interleaved")
    parser.add_argument("--rounds", type=int, default=2, help="with --against: rounds of (this, other)")
    parser.add_argument("--profile", default=None, help="run the (first) measuring plane under cProfile")
    args = parser.parse_args()
    print(f"trainyard listing benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; {load()}\n")
    home = Path(tempfile.mkdtemp(prefix="yard-listing-bench-"))
    src = Path(args.src).resolve()
    sources = [src] if not args.against else [src, Path(args.against).resolve()] * args.rounds
    results: dict[Path, list[dict[str, tuple[float, float, float]]]] = {s: [] for s in sources}
    try:
        plane, yard, env = start_plane(home, src, None, True, ("--no-operator",))
        try:
            asyncio.run(fill(plane.url, args.jobs, args.namespaces, args.connections))
        finally:
            plane.stop(yard, env)
        for n, source in enumerate(sources):
            profile = args.profile if n == 0 else None
            plane, yard, env = start_plane(home, source, profile, True, ("--no-operator",))
            print(f"\n{source} ({load()})")
            try:
                results[source].append(measure(plane, env, args.runs, args.jobs))
            finally:
                plane.stop(yard, env)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    if args.against:
        mine, theirs = sources[0], sources[1]
        print(f"\nmedians over {args.rounds} rounds: {mine} / {theirs}")
        for label, *_ in COMMANDS:
            a, b = (statistics.median(r[label][0] for r in results[s]) for s in (mine, theirs))
            pa, pb = (statistics.median(r[label][1] for r in results[s]) for s in (mine, theirs))
            print(
                f"   kubectl {label:<28} {a:6.2f} s vs {b:6.2f} s (ratio {a / b:.2f}); plane CPU {pa:.2f} vs {pb:.2f} s"
            )


if __name__ == "__main__":
    main()
