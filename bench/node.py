"""Local node figures against a real ``yard up``: pod start latency, 1,000 pods to completion, plane memory.

The plane runs as ``yard up`` would start it, in a temporary home; the client creates pods over
HTTP/1.1 keep-alive connections (``rawhttp``) and follows them through one watch.
``--schemes http,https`` (the default) runs it all twice, each against a fresh plane: plain http
(``yard up --insecure``), then HTTPS with the bearer token (the default), then prints both side
by side. Phases:

1. **Start latency** over ``--pods`` (100) pods created one at a time (the next once the previous
   is Running), each running ``date +%s.%N`` under ``restartPolicy: Never``:
   * *created → Running*: from just before the client sends the POST to the moment the watch
     delivers the status with ``phase: Running``;
   * *bind → process start*: from the moment the watch delivers the pod with ``spec.nodeName``
     set (the binding) to the time the container's own process printed (``date``'s clock, read
     from its log): the node agent's and the shim's share, measured by the process itself.
2. **Throughput**: ``--burst`` (1,000) pods running ``true`` created by ``--creators`` (16)
   concurrent connections; time from the first POST until the watch has seen every pod
   Succeeded, and the plane's CPU seconds for it.
3. **Memory**: the plane's ``VmRSS`` and peak ``VmHWM`` at the end (shims are separate processes
   and not counted; their number at the peak is printed).

Targets (issue #4): p50 ≤ 50 ms from bind to process start; 1,000 pods ≤ 30 s. Prints figures
and their ratio to the targets; asserts nothing. ``--profile FILE`` runs the plane under
cProfile (CPU time) and writes its statistics there when it stops.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from apiserver import call, cpu_seconds, load, pct, print_side_by_side, proc_status, trust, verdict
from rawhttp import Connection, LineStream

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "bench-node"
TARGET_START_P50_MS = 50.0
TARGET_BURST_S = 30.0


@dataclass
class Plane:
    pid: int
    url: str
    home: Path
    process: subprocess.Popen[bytes] | None = None

    def stop(self, yard: list[str], env: dict[str, str]) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=300)
        subprocess.run([*yard, "down"], check=False, env=env, cwd=REPO, capture_output=True)


def start_plane(
    home: Path, src: Path, profile: str | None, secure: bool, options: tuple[str, ...] = ()
) -> tuple[Plane, list[str], dict[str, str]]:
    """``yard up`` in ``home`` running ``src``; ``options``: more of ``yard up``'s flags (``--no-operator``)."""
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    yard = [sys.executable, "-m", "trainyard.cli.main", "--home", str(home)]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mode = "--secure" if secure else "--insecure"
    if not profile:
        subprocess.run(
            [*yard, "up", "--port", str(port), "--workspace", str(home), mode, *options],
            check=True,
            env=env,
            cwd=REPO,
            stderr=subprocess.DEVNULL,  # --insecure's warning, expected here
        )
        state = json.loads((home / "plane.json").read_text())
        trust(home, state["url"])
        return Plane(int(state["pid"]), state["url"], home), yard, env
    argv = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "trainyard.cli.main", "--home", str(home)]
    argv += ["up", "--foreground", "--port", str(port), "--workspace", str(home), mode, *options]
    log = (home / "yard.log").open("ab")
    child = subprocess.Popen(argv, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not (home / "plane.json").exists():
        if time.monotonic() > deadline or child.poll() is not None:
            raise SystemExit("the plane did not start under the profiler")
        time.sleep(0.1)
    state = json.loads((home / "plane.json").read_text())
    trust(home, state["url"])
    return Plane(child.pid, state["url"], home, child), yard, env


@dataclass
class Seen:
    """When the watch first delivered each pod's milestones (time.time())."""

    bound: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    done: dict[str, float] = field(default_factory=dict)
    uids: dict[str, str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def on_line(self, line: bytes) -> None:
        if not line.strip():
            return
        now = time.time()
        event = json.loads(line)
        obj = event["object"]
        name = obj["metadata"]["name"]
        self.uids[name] = obj["metadata"]["uid"]
        if (obj.get("spec") or {}).get("nodeName"):
            self.bound.setdefault(name, now)
        phase = (obj.get("status") or {}).get("phase")
        if phase in ("Running", "Succeeded", "Failed"):
            self.running.setdefault(name, now)
        if phase in ("Succeeded", "Failed") and name not in self.done:
            self.done[name] = now
            if phase == "Failed":
                self.failed.append(name)
        self.changed.set()

    async def until(self, check: Any, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            self.changed.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the pods did not get there in time")
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=left)
            except TimeoutError:
                continue


def pod(name: str, command: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"bench": "node"}},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "busybox", "command": command}],
        },
    }


def printed_time(home: Path, name: str, uid: str) -> float | None:
    path = home / "pods" / f"{NAMESPACE}_{name}_{uid}" / "logs" / "c.log"
    try:
        line = path.read_text().splitlines()[0]
    except (OSError, IndexError):
        return None
    return float(line.split(" ", 3)[3])


def forked_time(home: Path, name: str, uid: str) -> float | None:
    """When the shim forked the container's process (its state file), where the plane has shims."""
    path = home / "pods" / f"{NAMESPACE}_{name}_{uid}" / "state" / "c.json"
    try:
        return float(json.loads(path.read_text())["startedAt"])
    except (OSError, ValueError, KeyError):
        return None


def shim_count() -> int:
    count = 0
    for entry in os.listdir("/proc"):  # noqa: PTH208
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as handle:
                    if b"trainyard.cluster.clients.node.runtime.shim" in handle.read():
                        count += 1
            except OSError:
                pass
    return count


async def start_latency(plane: Plane, count: int) -> dict[str, float]:
    seen = Seen()
    conn = await Connection.open(plane.url)
    raw = await call(conn, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    rv = json.loads(raw)["metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={rv}&labelSelector=phase%3Dlatency"
    transport, _ = await LineStream.open(plane.url, path, seen.on_line)
    created: dict[str, float] = {}
    for i in range(count):
        name = f"lat-{i}"
        body = pod(name, ["date", "+%s.%N"])
        body["metadata"]["labels"]["phase"] = "latency"
        created[name] = time.time()
        await call(conn, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body, 201)
        await seen.until(lambda n=name: n in seen.running, timeout=60)
    await seen.until(lambda: len(seen.done) == count, timeout=120)
    transport.close()
    conn.close()
    to_running = [(seen.running[n] - created[n]) * 1000 for n in created]
    to_bind = [(seen.bound[n] - created[n]) * 1000 for n in created]
    to_process, to_fork = [], []
    for name in created:
        started = printed_time(plane.home, name, seen.uids[name])
        if started is not None:
            to_process.append((started - seen.bound[name]) * 1000)
        forked = forked_time(plane.home, name, seen.uids[name])
        if forked is not None:
            to_fork.append((forked - seen.bound[name]) * 1000)
    print(f"1. start latency over {count} pods created one at a time ({load()})")
    print(f"   created -> Running        p50 {pct(to_running, 0.5):6.1f} ms   p99 {pct(to_running, 0.99):6.1f} ms")
    print(f"   created -> bound          p50 {pct(to_bind, 0.5):6.1f} ms   p99 {pct(to_bind, 0.99):6.1f} ms")
    p50 = pct(to_process, 0.5)
    print(
        f"   bind -> process start     p50 {p50:6.1f} ms   p99 {pct(to_process, 0.99):6.1f} ms"
        f"   ({len(to_process)} processes printed; p50 {verdict(p50, TARGET_START_P50_MS, False)})"
    )
    if to_fork:
        fork50, fork99 = pct(to_fork, 0.5), pct(to_fork, 0.99)
        print(f"     of which bind -> fork   p50 {fork50:6.1f} ms   p99 {fork99:6.1f} ms   (the shim's own clock)")
    if seen.failed:
        print(f"   {len(seen.failed)} pod(s) failed: {seen.failed[:5]}")
    return {
        "created->Running p50 ms": pct(to_running, 0.5),
        "created->Running p99 ms": pct(to_running, 0.99),
        "bind->process p50 ms": p50,
    }


async def burst(plane: Plane, count: int, creators: int) -> dict[str, float]:
    seen = Seen()
    conn = await Connection.open(plane.url)
    raw = await call(conn, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    rv = json.loads(raw)["metadata"]["resourceVersion"]
    path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={rv}&labelSelector=phase%3Dburst"
    transport, _ = await LineStream.open(plane.url, path, seen.on_line)
    names = [f"burst-{i}" for i in range(count)]
    queue: asyncio.Queue[str] = asyncio.Queue()
    for name in names:
        queue.put_nowait(name)
    peak_shims = 0

    async def creator() -> None:
        c = await Connection.open(plane.url)
        while not queue.empty():
            name = queue.get_nowait()
            body = pod(name, ["true"])
            body["metadata"]["labels"]["phase"] = "burst"
            await call(c, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body, 201)
        c.close()

    async def sample() -> None:
        nonlocal peak_shims
        while True:
            peak_shims = max(peak_shims, shim_count())
            await asyncio.sleep(0.5)

    cpu0 = cpu_seconds(plane.pid)
    started = time.time()
    sampler = asyncio.create_task(sample())
    await asyncio.gather(*(creator() for _ in range(creators)))
    created_in = time.time() - started
    try:
        await seen.until(lambda: len(seen.done) == count, timeout=600)
    except TimeoutError:
        late = [n for n in names if n not in seen.done]
        print(f"   {len(late)} pods never finished, e.g. {late[:5]} (bound {sum(n in seen.bound for n in late)})")
        raise
    elapsed = max(seen.done.values()) - started
    sampler.cancel()
    cpu = cpu_seconds(plane.pid) - cpu0
    transport.close()
    conn.close()
    print(f"2. {count} pods running `true`, created by {creators} connections ({load()})")
    print(
        f"   all Succeeded after {elapsed:.1f} s ({count / elapsed:.0f} pods/s; created in {created_in:.1f} s)"
        f"   {verdict(elapsed, TARGET_BURST_S, False)}"
    )
    print(f"   plane CPU {cpu:.1f} s ({cpu / count * 1000:.1f} ms per pod); at most {peak_shims} shims at once")
    if seen.failed:
        print(f"   {len(seen.failed)} pod(s) failed: {seen.failed[:5]}")
    return {f"{count} pods s": elapsed, "plane ms/pod": cpu / count * 1000}


async def bench(args: argparse.Namespace, plane: Plane) -> dict[str, float]:
    print(f"trainyard local node benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}")
    print(f"plane:   `yard up` pid {plane.pid}, {plane.url}, running {args.src}; {load()} at start\n")
    conn = await Connection.open(plane.url)
    await call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}, 201, 409)
    conn.close()
    figures: dict[str, float] = {}
    if args.pods:
        figures |= await start_latency(plane, args.pods)
    if args.burst:
        figures |= await burst(plane, args.burst, args.creators)
    st = proc_status(plane.pid)
    print(f"3. plane memory after the run: VmRSS {st['VmRSS']}, peak VmHWM {st['VmHWM']}")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=100, help="pods for the start-latency phase (0 skips it)")
    parser.add_argument("--burst", type=int, default=1000, help="pods for the throughput phase (0 skips it)")
    parser.add_argument("--creators", type=int, default=16, help="concurrent connections creating the burst")
    parser.add_argument("--profile", default=None, help="run the plane under cProfile and write its stats here")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--keep", action="store_true", help="keep the plane's home (its log, pods) afterwards")
    parser.add_argument(
        "--schemes", default="http,https", help="http (--insecure), https (the default: TLS + token), or both"
    )
    args = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    for scheme in args.schemes.split(","):
        if scheme not in ("http", "https"):
            raise SystemExit(f"--schemes: {scheme!r} is neither http nor https")
        print(f"===== {scheme} =====")
        home = Path(tempfile.mkdtemp(prefix="yard-node-bench-"))
        plane, yard, env = start_plane(home, Path(args.src).resolve(), args.profile, scheme == "https")
        try:
            results[scheme] = asyncio.run(bench(args, plane))
        finally:
            plane.stop(yard, env)
            if args.keep:
                print(f"the plane's home is kept: {home}")
            else:
                shutil.rmtree(home, ignore_errors=True)
        print()
    print_side_by_side(results)


if __name__ == "__main__":
    main()
