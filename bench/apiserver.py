"""Embedded API server figures against a real server process: writes/s, watch latency, big lists, RSS.

The server runs as a separate process in a temporary home, in one of two shapes:

* ``--plane api`` (default): the API server alone (``trainyard.cluster.plane.ApiPlane``: store,
  registry, watch hub, garbage collector, HTTP), no node agent and no operator;
* ``--plane yard``: the whole embedded plane started with ``yard up`` (node agent and operator
  watching too). The benchmark's pods name a node that does not exist, so the node agent leaves
  them Pending either way.

The clients are other processes talking plain HTTP/1.1 with keep-alive connections (aiohttp).
Phases, each reported with the machine's load average and the server's CPU seconds:

1. sustained writes: concurrent clients create ConfigMaps and merge-patch each one once;
2. watch delivery: 20 watchers (a separate process) watch one namespace while a paced writer
   updates ConfigMaps there at 500 writes/s; latency is defined below;
3. a list of 10,000 Pending pods, as a JSON list and as kubectl's Table;
4. the server's resident memory (``VmRSS``) and its peak (``VmHWM``) at the end.

Prints figures and their ratio to the targets; asserts nothing. ``--profile FILE`` (api plane)
writes the server's cProfile statistics at exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing as mp
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

REPO = Path(__file__).resolve().parents[1]
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
PHANTOM_NODE = "bench-node-that-does-not-exist"
TARGET_WRITES = 1000.0
TARGET_WATCH_P99_MS = 20.0
TARGET_LIST_S = 0.3


# -- the server process ------------------------------------------------------------------------


def serve_api_plane(home: Path, profile: str | None) -> None:
    """``--serve``: the API server alone on a free port; prints its URL, runs until SIGTERM."""
    from trainyard.cluster.paths import Layout
    from trainyard.cluster.plane import ApiPlane

    async def run() -> None:
        plane = ApiPlane(Layout(home), port=0)
        await plane.start()
        print(plane.url, flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await plane.stop()

    if profile is None:
        asyncio.run(run())
        return
    import cProfile

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        asyncio.run(run())
    finally:
        profiler.disable()
        profiler.dump_stats(profile)


@dataclass
class Server:
    pid: int
    url: str
    shape: str
    stop: Callable[[], None]


def start_server(kind: str, home: Path, profile: str | None) -> Server:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if kind == "api":
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(home)]
        if profile:
            argv += ["--profile", profile]
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url:
            raise SystemExit("the API server did not start")

        def stop_api() -> None:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=120)

        shape = "API server alone (ApiPlane in its own process; no node agent, no operator)"
        return Server(child.pid, url, shape, stop_api)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yard = [sys.executable, "-m", "trainyard.cli.main", "--home", str(home)]
    subprocess.run([*yard, "up", "--port", str(port), "--workspace", str(home)], check=True, env=env, cwd=REPO)
    state = json.loads((home / "plane.json").read_text())

    def stop_yard() -> None:
        subprocess.run([*yard, "down"], check=False, env=env, cwd=REPO, capture_output=True)

    shape = "`yard up` (API server + node agent + operator, one process)"
    return Server(int(state["pid"]), state["url"], shape, stop_yard)


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} (1/5 min, {os.cpu_count()} cpus)"


# -- helpers -----------------------------------------------------------------------------------


def pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def verdict(measured: float, target: float, higher_is_better: bool) -> str:
    ratio = measured / target if higher_is_better else target / measured
    return f"{ratio:.2f}x target ({'meets' if ratio >= 1 else 'MISSES'})"


async def check(response: aiohttp.ClientResponse, *codes: int) -> Any:
    body = await response.read()
    if response.status not in codes:
        raise RuntimeError(f"{response.method} {response.url}: {response.status} {body[:300]!r}")
    return json.loads(body)


async def ensure_namespace(client: aiohttp.ClientSession, url: str, name: str) -> None:
    async with client.post(f"{url}/api/v1/namespaces", json={"metadata": {"name": name}}) as r:
        await check(r, 201, 409)


async def pool(workers: int, work: Callable[[int], Awaitable[None]]) -> None:
    await asyncio.gather(*(work(w) for w in range(workers)))


def session(connections: int) -> aiohttp.ClientSession:
    # One keep-alive connection per concurrent client coroutine.
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections, force_close=False))


# -- phase 1: sustained writes -----------------------------------------------------------------


async def sustained_writes(url: str, clients: int, seconds: float) -> dict[str, Any]:
    base = f"{url}/api/v1/namespaces/bench-write/configmaps"
    latencies: list[float] = []
    counts = {"create": 0, "update": 0}
    async with session(clients) as client:
        await ensure_namespace(client, url, "bench-write")
        deadline = time.monotonic() + seconds

        async def worker(w: int) -> None:
            i = 0
            while time.monotonic() < deadline:
                name = f"cm-{w}-{i}"
                t = time.monotonic()
                body = {"metadata": {"name": name, "labels": {"app": "bench"}}, "data": {"payload": "v" * 200}}
                async with client.post(base, json=body) as r:
                    await check(r, 201)
                latencies.append(time.monotonic() - t)
                counts["create"] += 1
                t = time.monotonic()
                patch = json.dumps({"data": {"step": str(i)}})
                headers = {"Content-Type": "application/merge-patch+json"}
                async with client.patch(f"{base}/{name}", data=patch, headers=headers) as r:
                    await check(r, 200)
                latencies.append(time.monotonic() - t)
                counts["update"] += 1
                i += 1

        start = time.monotonic()
        await pool(clients, worker)
        elapsed = time.monotonic() - start
    total = counts["create"] + counts["update"]
    return {
        "writes": total,
        "seconds": elapsed,
        "rate": total / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1000,
        "p99_ms": pct(latencies, 0.99) * 1000,
        **counts,
    }


# -- phase 2: watch delivery latency ------------------------------------------------------------


def watcher_process(url: str, rv: str, watchers: int, expected: int, ready: Any, results: Any) -> None:
    """A separate process holding ``watchers`` watch streams; reports each event's latency."""

    async def run() -> None:
        latencies: list[list[int]] = [[] for _ in range(watchers)]
        path = f"{url}/api/v1/namespaces/bench-watch/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=600"
        async with session(watchers) as client:
            streams = [await client.get(path) for _ in range(watchers)]
            ready.put(True)

            async def consume(i: int) -> None:
                mine = latencies[i]
                async for line in streams[i].content:
                    arrived = time.monotonic_ns()
                    event = json.loads(line)
                    mine.append(arrived - int(event["object"]["data"]["sent"]))
                    if len(mine) >= expected:
                        return

            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.gather(*(consume(i) for i in range(watchers))), 120)
            for s in streams:
                s.close()
        results.put(latencies)

    asyncio.run(run())


async def watch_latency(url: str, watchers: int, rate: float, seconds: float, objects: int) -> dict[str, Any]:
    base = f"{url}/api/v1/namespaces/bench-watch/configmaps"
    total = int(rate * seconds)
    async with session(64) as client:
        await ensure_namespace(client, url, "bench-watch")
        for i in range(objects):
            async with client.post(base, json={"metadata": {"name": f"w-{i}"}, "data": {"sent": "0"}}) as r:
                await check(r, 201, 409)
        async with client.get(base) as r:
            rv = (await check(r, 200))["metadata"]["resourceVersion"]
        ctx = mp.get_context("spawn")
        ready, results = ctx.Queue(), ctx.Queue()
        proc = ctx.Process(target=watcher_process, args=(url, rv, watchers, total, ready, results))
        proc.start()
        ready.get(timeout=120)
        write_ms: list[float] = []
        in_flight = asyncio.Semaphore(64)
        headers = {"Content-Type": "application/merge-patch+json"}

        async def write(i: int) -> None:
            async with in_flight:
                sent = time.monotonic_ns()
                body = json.dumps({"data": {"sent": str(sent)}})
                async with client.patch(f"{base}/w-{i % objects}", data=body, headers=headers) as r:
                    await check(r, 200)
                write_ms.append((time.monotonic_ns() - sent) / 1e6)

        start = time.monotonic()
        tasks = []
        for i in range(total):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(write(i)))
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - start
        per_watcher: list[list[int]] = await asyncio.get_running_loop().run_in_executor(None, results.get, True, 180)
        proc.join(timeout=30)
    samples = [ns / 1e6 for lat in per_watcher for ns in lat]
    return {
        "writes": total,
        "achieved_rate": total / elapsed,
        "events": len(samples),
        "expected_events": total * watchers,
        "p50_ms": pct(samples, 0.5),
        "p99_ms": pct(samples, 0.99),
        "max_ms": max(samples),
        "write_p50_ms": pct(write_ms, 0.5),
        "write_p99_ms": pct(write_ms, 0.99),
    }


# -- phase 3: listing 10,000 pods ---------------------------------------------------------------


def pod(name: str, i: int) -> dict[str, Any]:
    """A pod shaped like a training replica: labels, env, ports, resources; bound to no real node."""
    return {
        "metadata": {
            "name": name,
            "labels": {
                "training.kubeflow.org/job-name": f"job-{i // 8}",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(i % 8),
                "training.kubeflow.org/operator-name": "pytorchjob-controller",
            },
        },
        "spec": {
            "nodeName": PHANTOM_NODE,
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "pytorch",
                    "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1-45c5727",
                    "command": ["python", "/opt/pytorch-mnist/mnist.py", "--epochs=1"],
                    "env": [
                        {"name": "MASTER_ADDR", "value": f"job-{i // 8}-master-0"},
                        {"name": "MASTER_PORT", "value": "23456"},
                        {"name": "WORLD_SIZE", "value": "8"},
                        {"name": "RANK", "value": str(i % 8)},
                        {"name": "PYTHONUNBUFFERED", "value": "1"},
                    ],
                    "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


async def list_pods(url: str, count: int, clients: int, repeats: int) -> dict[str, Any]:
    base = f"{url}/api/v1/namespaces/bench-list/pods"
    async with session(clients) as client:
        await ensure_namespace(client, url, "bench-list")
        next_index = iter(range(count))
        start = time.monotonic()

        async def creator(_: int) -> None:
            for i in next_index:
                async with client.post(base, json=pod(f"pod-{i:05d}", i)) as r:
                    await check(r, 201)

        await pool(clients, creator)
        create_rate = count / (time.monotonic() - start)

        async def timed(headers: dict[str, str]) -> tuple[float, int, Any]:
            t = time.monotonic()
            async with client.get(base, headers=headers) as r:
                body = await r.read()
                assert r.status == 200, body[:300]
            return time.monotonic() - t, len(body), body

        figures: dict[str, Any] = {"create_rate": create_rate}
        for label, headers in (("json", {"Accept": "application/json"}), ("table", {"Accept": TABLE_ACCEPT})):
            runs = []
            for _ in range(repeats):
                seconds, size, body = await timed(headers)
                runs.append(seconds)
            doc = json.loads(body)
            items = doc["items"] if label == "json" else doc["rows"]
            assert len(items) == count, f"{label} list returned {len(items)} of {count}"
            figures[label] = {"median_s": statistics.median(runs), "min_s": min(runs), "bytes": size}
    return figures


# -- driver ---------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace, server: Server) -> None:
    print(f"trainyard API server benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine:  {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}")
    print(f"server:   {server.shape}, pid {server.pid}, {server.url}")
    print(f"clients:  separate processes, aiohttp over HTTP/1.1 keep-alive; {load()} at start\n")

    cpu0 = cpu_seconds(server.pid)
    w = await sustained_writes(server.url, args.writers, args.write_seconds)
    cpu1 = cpu_seconds(server.pid)
    print(f"1. sustained writes: {args.writers} concurrent clients (one asyncio process, a keep-alive connection")
    print("   each),")
    print(f"   each looping POST a ConfigMap then merge-PATCH it, for {w['seconds']:.1f} s")
    print(f"   {w['writes']} writes ({w['create']} creates, {w['update']} updates) -> {w['rate']:.0f} writes/s")
    print(f"   per-request latency p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms;")
    print(f"   server CPU {cpu1 - cpu0:.2f} s = {(cpu1 - cpu0) / w['writes'] * 1e6:.0f} us per write; {load()}")
    print(f"   target >= {TARGET_WRITES:.0f} writes/s: {verdict(w['rate'], TARGET_WRITES, True)}\n")

    cpu0 = cpu_seconds(server.pid)
    lat = await watch_latency(server.url, args.watchers, args.rate, args.watch_seconds, args.watch_objects)
    cpu1 = cpu_seconds(server.pid)
    print(f"2. watch delivery: {args.watchers} watchers (one separate asyncio process) on namespace bench-watch;")
    print(
        f"   one paced writer merge-patching {args.watch_objects} ConfigMaps at {args.rate:.0f}/s "
        f"for {args.watch_seconds:.0f} s (achieved {lat['achieved_rate']:.0f}/s)"
    )
    print("   latency = from just before the writer sends the PATCH (CLOCK_MONOTONIC, stamped into the object)")
    print("             to the moment a watcher has read and decoded that event's line")
    print(f"   events received {lat['events']} of {lat['expected_events']}")
    print(f"   p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.1f} ms")
    print(f"   (the PATCH responses alone: p50 {lat['write_p50_ms']:.2f} ms, p99 {lat['write_p99_ms']:.2f} ms)")
    print(f"   server CPU {cpu1 - cpu0:.2f} s; {load()}")
    print(f"   target p99 <= {TARGET_WATCH_P99_MS:.0f} ms: {verdict(lat['p99_ms'], TARGET_WATCH_P99_MS, False)}\n")

    cpu0 = cpu_seconds(server.pid)
    lp = await list_pods(server.url, args.pods, args.writers, args.repeats)
    cpu1 = cpu_seconds(server.pid)
    print(f"3. list {args.pods} Pending pods in one namespace")
    print(f"   (created beforehand at {lp['create_rate']:.0f} pods/s by {args.writers} clients)")
    print(f"   time = request sent to the last byte of the body received; median of {args.repeats} (min)")
    for label, accept in (("json", "application/json"), ("table", "kubectl's Table Accept")):
        f = lp[label]
        print(
            f"   {label:5} ({accept}): {f['median_s'] * 1000:7.1f} ms ({f['min_s'] * 1000:.1f}), "
            f"{f['bytes'] / 1e6:.1f} MB; target <= {TARGET_LIST_S * 1000:.0f} ms: "
            f"{verdict(f['median_s'], TARGET_LIST_S, False)}"
        )
    print(f"   server CPU for the phase {cpu1 - cpu0:.2f} s; {load()}\n")

    st = proc_status(server.pid)
    print(f"4. server memory after the run: VmRSS {st['VmRSS']}, peak VmHWM {st['VmHWM']}")
    disk = sum(f.stat().st_size for f in Path(args.home).glob("store.db*"))
    print(f"   store: {disk / 1e6:.1f} MB on disk (db + WAL)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plane", choices=("api", "yard"), default="api")
    parser.add_argument("--writers", type=int, default=16, help="concurrent write clients (phases 1 and 3)")
    parser.add_argument("--write-seconds", type=float, default=10.0)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--rate", type=float, default=500.0, help="paced writes/s during the watch phase")
    parser.add_argument("--watch-seconds", type=float, default=10.0)
    parser.add_argument("--watch-objects", type=int, default=100)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", default=None, help="api plane: write the server's cProfile stats here")
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_api_plane(Path(args.serve), args.profile)
        return
    with tempfile.TemporaryDirectory(prefix="yard-bench-") as home:
        args.home = home
        server = start_server(args.plane, Path(home), args.profile)
        try:
            asyncio.run(bench(args, server))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
