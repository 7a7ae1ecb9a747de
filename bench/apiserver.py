"""Embedded API server figures against a real server process: writes/s, watch latency, big lists, RSS.

The server runs as a separate process in a temporary home, in one of two shapes:

* ``--plane api`` (default): the API server alone (``trainyard.cluster.server.plane.ApiPlane``: store,
  registry, watch hub, garbage collector, HTTP), no node agent and no operator;
* ``--plane yard``: the whole embedded plane started with ``yard up`` (node agent and operator
  watching too). The benchmark's pods name a node that does not exist, so the node agent leaves
  them Pending either way.

The clients are other processes talking HTTP/1.1 over keep-alive connections, through a
minimal client (``rawhttp``) so that on a small machine the load generator costs little CPU.
``--schemes http,https`` (the default) runs everything twice, each time against a fresh server:
plain http (``yard up --insecure``), then HTTPS with the bearer token (``yard up``'s default; the
clients verify the plane's CA and send its token, as kubectl does), and ends with the two side by side.
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
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
from rawhttp import Connection, LineStream, use_credentials

REPO = Path(__file__).resolve().parents[1]
TABLE_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
)
PHANTOM_NODE = "bench-node-that-does-not-exist"
TARGET_WRITES = 1000.0
TARGET_WATCH_P99_MS = 20.0
TARGET_LIST_S = 0.3


# -- the server process ------------------------------------------------------------------------


def serve_api_plane(home: Path, profile: str | None, secure: bool) -> None:
    """``--serve``: the API server alone on a free port; prints its URL, runs until SIGTERM."""
    from trainyard.cluster.paths import Layout
    from trainyard.cluster.server.plane import ApiPlane

    async def run() -> None:
        plane = ApiPlane(Layout(home), port=0, secure=secure)
        await plane.start()
        print(plane.url, flush=True)
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await plane.stop()

    if os.environ.get("BENCH_GCSTATS"):
        import gc

        spent = {0: [0, 0.0], 1: [0, 0.0], 2: [0, 0.0]}
        began = [0.0]

        def track(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                began[0] = time.perf_counter()
            else:
                spent[info["generation"]][0] += 1
                spent[info["generation"]][1] += time.perf_counter() - began[0]

        gc.callbacks.append(track)
        import atexit

        atexit.register(lambda: print(f"gc: {spent}", file=sys.stderr))
    if profile is None:
        if os.environ.get("BENCH_UVLOOP"):
            import uvloop

            uvloop.run(run())
            return
        asyncio.run(run())
        return
    import cProfile

    profiler = cProfile.Profile(time.process_time)  # CPU time: wall time on a shared machine is noise
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


def trust(home: Path, url: str) -> None:
    """Let this process's clients (and those it starts) reach a secure server as kubectl would."""
    if url.startswith("https:"):
        use_credentials(str(home / "pki" / "ca.crt"), (home / "pki" / "token").read_text().strip())


def start_server(kind: str, home: Path, profile: str | None, src: Path, secure: bool) -> Server:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    if kind == "api":
        argv = [sys.executable, str(Path(__file__).resolve()), "--serve", str(home)]
        if secure:
            argv.append("--serve-secure")
        if profile:
            argv += ["--profile", profile]
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
        assert child.stdout is not None
        url = child.stdout.readline().strip()
        if not url:
            raise SystemExit("the API server did not start")
        trust(home, url)

        def stop_api() -> None:
            child.send_signal(signal.SIGTERM)
            child.wait(timeout=120)

        shape = "API server alone (ApiPlane in its own process; no node agent, no operator)"
        return Server(child.pid, url, shape, stop_api)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yard = [sys.executable, "-m", "trainyard.cli.main", "--home", str(home)]
    mode = "--secure" if secure else "--insecure"
    subprocess.run(
        [*yard, "up", "--port", str(port), "--workspace", str(home), mode],
        check=True,
        env=env,
        cwd=REPO,
        stderr=subprocess.DEVNULL,  # --insecure's warning, expected here
    )
    state = json.loads((home / "plane.json").read_text())
    trust(home, state["url"])

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


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


def children_cpu() -> float:
    """CPU seconds (user + system) of this process's children that have been waited for (a ``kubectl`` run)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_split(pid: int, before: tuple[float, float]) -> str:
    user, system = cpu_times(pid)
    return f"user {user - before[0]:.2f} s + system {system - before[1]:.2f} s"


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


async def call(conn: Connection, method: str, path: str, body: Any = None, *codes: int, patch: bool = False) -> Any:
    data = b"" if body is None else json.dumps(body).encode()
    ctype = "application/merge-patch+json" if patch else "application/json"
    status, raw = await conn.request(method, path, data, ctype)
    if status not in (codes or (200, 201)):
        raise RuntimeError(f"{method} {path}: {status} {raw[:300]!r}")
    return raw


async def ensure_namespace(url: str, name: str) -> None:
    conn = await Connection.open(url)
    await call(conn, "POST", "/api/v1/namespaces", {"metadata": {"name": name}}, 201, 409)
    conn.close()


# -- phase 1: sustained writes -----------------------------------------------------------------


def writer_process(url: str, proc: int, clients: int, start_at: float, seconds: float, results: Any) -> None:
    """One client process of phase 1: ``clients`` connections writing until the shared deadline."""

    async def run() -> None:
        base = "/api/v1/namespaces/bench-write/configmaps"
        latencies: list[float] = []
        counts = {"create": 0, "update": 0}
        deadline = start_at + seconds
        conns = [await Connection.open(url) for _ in range(clients)]

        async def worker(w: int) -> None:
            conn, i = conns[w], 0
            while time.monotonic() < deadline:
                name = f"cm-{proc}-{w}-{i}"
                t = time.monotonic()
                body = {"metadata": {"name": name, "labels": {"app": "bench"}}, "data": {"payload": "v" * 200}}
                await call(conn, "POST", base, body, 201)
                latencies.append(time.monotonic() - t)
                counts["create"] += 1
                t = time.monotonic()
                await call(conn, "PATCH", f"{base}/{name}", {"data": {"step": str(i)}}, 200, patch=True)
                latencies.append(time.monotonic() - t)
                counts["update"] += 1
                i += 1

        await asyncio.sleep(max(0.0, start_at - time.monotonic()))
        cpu = time.process_time()
        await asyncio.gather(*(worker(w) for w in range(clients)))
        results.put((counts, latencies, time.monotonic() - start_at, time.process_time() - cpu))

    asyncio.run(run())


async def sustained_writes(url: str, procs: int, clients: int, seconds: float) -> dict[str, Any]:
    await ensure_namespace(url, "bench-write")
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    start_at = time.monotonic() + 3.0  # every process connected and waiting before the clock starts
    workers = [
        ctx.Process(target=writer_process, args=(url, p, clients, start_at, seconds, results)) for p in range(procs)
    ]
    for w in workers:
        w.start()
    loop = asyncio.get_running_loop()
    outcomes = [await loop.run_in_executor(None, results.get, True, seconds + 120) for _ in workers]
    for w in workers:
        w.join(timeout=30)
    latencies = [x for _, lat, _, _ in outcomes for x in lat]
    creates = sum(c["create"] for c, _, _, _ in outcomes)
    updates = sum(c["update"] for c, _, _, _ in outcomes)
    elapsed = max(e for _, _, e, _ in outcomes)
    return {
        "writes": creates + updates,
        "create": creates,
        "update": updates,
        "seconds": elapsed,
        "rate": (creates + updates) / elapsed,
        "p50_ms": pct(latencies, 0.5) * 1000,
        "p99_ms": pct(latencies, 0.99) * 1000,
        "client_cpu": sum(c for _, _, _, c in outcomes),
    }


# -- phase 2: watch delivery latency ------------------------------------------------------------


def watcher_process(url: str, rv: str, watchers: int, expected: int, ready: Any, results: Any) -> None:
    """A separate process holding ``watchers`` watch streams; reports each event's latency."""
    # A fast decoder, like client-go's: this process's CPU time is part of the latency it measures.
    decode = msgspec.json.Decoder().decode

    async def run() -> None:
        latencies: list[list[int]] = [[] for _ in range(watchers)]
        path = f"/api/v1/namespaces/bench-watch/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=600"
        complete = asyncio.get_running_loop().create_future()
        left = [watchers]

        def receiver(mine: list[int]) -> Callable[[bytes], None]:
            def on_line(line: bytes) -> None:
                arrived = time.monotonic_ns()
                mine.append(arrived - int(decode(line)["object"]["data"]["sent"]))
                if len(mine) == expected:
                    left[0] -= 1
                    if not left[0]:
                        complete.set_result(None)

            return on_line

        streams = [await LineStream.open(url, path, receiver(latencies[i])) for i in range(watchers)]
        # No event can come before the writer starts; a moment lets the server subscribe them all.
        await asyncio.sleep(1.0)
        ready.put(True)
        cpu = time.process_time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(complete, 180)
        results.put((latencies, time.process_time() - cpu))
        for transport, _ in streams:
            transport.close()

    asyncio.run(run())


async def watch_latency(url: str, watchers: int, rate: float, seconds: float, objects: int) -> dict[str, Any]:
    base = "/api/v1/namespaces/bench-watch/configmaps"
    total = int(rate * seconds)
    await ensure_namespace(url, "bench-watch")
    conn = await Connection.open(url)
    for i in range(objects):
        await call(conn, "POST", base, {"metadata": {"name": f"w-{i}"}, "data": {"sent": "0"}}, 201, 409)
    rv = json.loads(await call(conn, "GET", base))["metadata"]["resourceVersion"]
    conn.close()
    ctx = mp.get_context("spawn")
    ready, results = ctx.Queue(), ctx.Queue()
    proc = ctx.Process(target=watcher_process, args=(url, rv, watchers, total, ready, results))
    proc.start()
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, ready.get, True, 120)
    # A pool of keep-alive connections, so a slow response never holds back the pace.
    free: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(32):
        free.put_nowait(await Connection.open(url))
    write_ms: list[float] = []

    async def write(i: int) -> None:
        c = await free.get()
        sent = time.monotonic_ns()
        await call(c, "PATCH", f"{base}/w-{i % objects}", {"data": {"sent": str(sent)}}, 200, patch=True)
        write_ms.append((time.monotonic_ns() - sent) / 1e6)
        free.put_nowait(c)

    cpu = time.process_time()
    start = time.monotonic()
    tasks = []
    for i in range(total):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(write(i)))
    await asyncio.gather(*tasks)
    elapsed = time.monotonic() - start
    writer_cpu = time.process_time() - cpu
    per_watcher, watcher_cpu = await loop.run_in_executor(None, results.get, True, 240)
    proc.join(timeout=30)
    while not free.empty():
        free.get_nowait().close()
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
        "watcher_cpu": watcher_cpu,
        "writer_cpu": writer_cpu,
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
    base = "/api/v1/namespaces/bench-list/pods"
    await ensure_namespace(url, "bench-list")
    next_index = iter(range(count))
    start = time.monotonic()

    async def creator() -> None:
        conn = await Connection.open(url)
        for i in next_index:
            await call(conn, "POST", base, pod(f"pod-{i:05d}", i), 201)
        conn.close()

    await asyncio.gather(*(creator() for _ in range(clients)))
    figures: dict[str, Any] = {"create_rate": count / (time.monotonic() - start)}
    conn = await Connection.open(url)
    for label, accept in (("json", "application/json"), ("table", TABLE_ACCEPT)):
        runs = []
        for _ in range(repeats):
            t = time.monotonic()
            head = f"GET {base} HTTP/1.1\r\nHost: {conn.host}\r\nAccept: {accept}\r\n{conn.auth}\r\n"
            conn.writer.write(head.encode())
            status, headers = await conn._head()
            body = await conn.reader.readexactly(int(headers["content-length"]))
            runs.append(time.monotonic() - t)
            assert status == 200, body[:300]
        doc = json.loads(body)
        items = doc["items"] if label == "json" else doc["rows"]
        assert len(items) == count, f"{label} list returned {len(items)} of {count}"
        figures[label] = {"median_s": statistics.median(runs), "min_s": min(runs), "bytes": len(body)}
    conn.close()
    return figures


# -- driver ---------------------------------------------------------------------------------------


async def bench(args: argparse.Namespace, server: Server) -> dict[str, float]:
    print(f"trainyard API server benchmark, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine:  {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}")
    print(f"server:   {server.shape}, pid {server.pid}, {server.url}")
    print(f"          running {args.src}")
    tls = "over TLS with the bearer token, " if server.url.startswith("https:") else ""
    print(f"clients:  separate processes, HTTP/1.1 keep-alive {tls}(bench/rawhttp.py); {load()} at start\n")

    figures: dict[str, float] = {}
    if "writes" in args.phases:
        figures |= await phase_writes(args, server)
    if "watch" in args.phases:
        figures |= await phase_watch(args, server)
    if "list" in args.phases:
        figures |= await phase_list(args, server)
    st = proc_status(server.pid)
    print(f"4. server memory after the run: VmRSS {st['VmRSS']}, peak VmHWM {st['VmHWM']}")
    sizes = {f.name: f.stat().st_size / 1e6 for f in Path(args.home).glob("store.db*")}
    print("   store on disk: " + ", ".join(f"{name} {mb:.1f} MB" for name, mb in sorted(sizes.items())))
    return figures


async def phase_writes(args: argparse.Namespace, server: Server) -> dict[str, float]:
    split0 = cpu_times(server.pid)
    cpu0 = cpu_seconds(server.pid)
    w = await sustained_writes(server.url, args.write_procs, args.writers, args.write_seconds)
    cpu = cpu_seconds(server.pid) - cpu0
    print(
        f"1. sustained writes: {args.write_procs} client processes x {args.writers} asyncio clients, "
        "one keep-alive connection each;"
    )
    print(f"   every client loops: POST a ConfigMap, then merge-PATCH it; for {w['seconds']:.1f} s")
    print(f"   {w['writes']} writes ({w['create']} creates, {w['update']} updates) -> {w['rate']:.0f} writes/s")
    print(f"   per-request latency p50 {w['p50_ms']:.2f} ms, p99 {w['p99_ms']:.2f} ms")
    print(
        f"   server CPU {cpu:.2f} s = {cpu / w['writes'] * 1e6:.0f} us per write "
        f"(one core would sustain {w['writes'] / cpu:.0f} writes/s); clients' CPU {w['client_cpu']:.1f} s"
    )
    print(f"   ({cpu_split(server.pid, split0)}); {load()}")
    print(f"   target >= {TARGET_WRITES:.0f} writes/s: {verdict(w['rate'], TARGET_WRITES, True)}\n")
    return {"writes/s": w["rate"], "write p99 ms": w["p99_ms"], "server us/write": cpu / w["writes"] * 1e6}


async def phase_watch(args: argparse.Namespace, server: Server) -> dict[str, float]:
    split0 = cpu_times(server.pid)
    cpu0 = cpu_seconds(server.pid)
    lat = await watch_latency(server.url, args.watchers, args.rate, args.watch_seconds, args.watch_objects)
    cpu1 = cpu_seconds(server.pid)
    print(f"2. watch delivery: {args.watchers} watchers (one separate asyncio process) on namespace bench-watch;")
    print(
        f"   a paced writer (32 keep-alive connections) merge-patches {args.watch_objects} ConfigMaps at "
        f"{args.rate:.0f}/s for {args.watch_seconds:.0f} s (achieved {lat['achieved_rate']:.0f}/s)"
    )
    print("   latency = from just before the writer sends the PATCH (CLOCK_MONOTONIC, stamped into the object)")
    print("             to the moment a watcher has read and decoded that event's line")
    print(f"   events received {lat['events']} of {lat['expected_events']}")
    print(f"   p50 {lat['p50_ms']:.2f} ms, p99 {lat['p99_ms']:.2f} ms, max {lat['max_ms']:.1f} ms")
    print(f"   (the PATCH responses alone: p50 {lat['write_p50_ms']:.2f} ms, p99 {lat['write_p99_ms']:.2f} ms)")
    print(
        f"   server CPU {cpu1 - cpu0:.2f} s = {(cpu1 - cpu0) / lat['writes'] * 1e6:.0f} us per write delivered to "
        f"{args.watchers} watchers;"
    )
    print(f"   clients' CPU: watchers' process {lat['watcher_cpu']:.1f} s, writer {lat['writer_cpu']:.1f} s")
    print(f"   ({cpu_split(server.pid, split0)}); {load()}")
    print(f"   target p99 <= {TARGET_WATCH_P99_MS:.0f} ms: {verdict(lat['p99_ms'], TARGET_WATCH_P99_MS, False)}\n")
    return {"watch p50 ms": lat["p50_ms"], "watch p99 ms": lat["p99_ms"]}


async def phase_list(args: argparse.Namespace, server: Server) -> dict[str, float]:
    cpu0 = cpu_seconds(server.pid)
    lp = await list_pods(server.url, args.pods, args.writers * args.write_procs, args.repeats)
    cpu1 = cpu_seconds(server.pid)
    print(f"3. list {args.pods} Pending pods in one namespace")
    print(f"   (created beforehand at {lp['create_rate']:.0f} pods/s by {args.writers * args.write_procs} clients)")
    print(f"   time = request sent to the last byte of the body received; median of {args.repeats} (min)")
    for label, accept in (("json", "application/json"), ("table", "kubectl's Table Accept")):
        f = lp[label]
        print(
            f"   {label:5} ({accept}): {f['median_s'] * 1000:7.1f} ms ({f['min_s'] * 1000:.1f}), "
            f"{f['bytes'] / 1e6:.1f} MB; target <= {TARGET_LIST_S * 1000:.0f} ms: "
            f"{verdict(f['median_s'], TARGET_LIST_S, False)}"
        )
    print(f"   server CPU for the phase {cpu1 - cpu0:.2f} s; {load()}\n")
    return {"list json ms": lp["json"]["median_s"] * 1000, "list table ms": lp["table"]["median_s"] * 1000}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--plane", choices=("api", "yard"), default="api")
    parser.add_argument("--phases", default="writes,watch,list", help="which of writes,watch,list to run")
    parser.add_argument("--write-procs", type=int, default=2, help="client processes in phase 1")
    parser.add_argument("--writers", type=int, default=8, help="concurrent clients per process (phases 1, 3)")
    parser.add_argument("--write-seconds", type=float, default=10.0)
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--rate", type=float, default=500.0, help="paced writes/s during the watch phase")
    parser.add_argument("--watch-seconds", type=float, default=10.0)
    parser.add_argument("--watch-objects", type=int, default=100)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--profile", default=None, help="api plane: write the server's cProfile stats here")
    parser.add_argument(
        "--src", default=str(REPO / "src"), help="the trainyard sources the server runs (e.g. a baseline checkout)"
    )
    parser.add_argument(
        "--schemes", default="http,https", help="http (--insecure), https (the default: TLS + token), or both"
    )
    parser.add_argument("--serve", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--serve-secure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve_api_plane(Path(args.serve), args.profile, args.serve_secure)
        return
    results: dict[str, dict[str, float]] = {}
    for scheme in args.schemes.split(","):
        if scheme not in ("http", "https"):
            raise SystemExit(f"--schemes: {scheme!r} is neither http nor https")
        print(f"===== {scheme} =====")
        with tempfile.TemporaryDirectory(prefix="yard-bench-") as home:
            args.home = home
            server = start_server(args.plane, Path(home), args.profile, Path(args.src).resolve(), scheme == "https")
            try:
                results[scheme] = asyncio.run(bench(args, server))
            finally:
                server.stop()
        print()
    print_side_by_side(results)


def print_side_by_side(results: dict[str, dict[str, float]]) -> None:
    """The figures of each scheme in columns, with HTTPS's change against http."""
    if len(results) < 2:
        return
    schemes = list(results)
    print("side by side: " + " vs ".join(schemes) + " (one run each; the machine's load moves both)")
    for key in results[schemes[0]]:
        values = [results[s].get(key, float("nan")) for s in schemes]
        change = f"{(values[-1] / values[0] - 1) * 100:+.0f}%" if values[0] else ""
        print(f"   {key:24} " + "  ".join(f"{v:10.2f}" for v in values) + f"   {change}")


if __name__ == "__main__":
    main()
