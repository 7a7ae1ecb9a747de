"""The node's own measurements of its containers: what the kubelet's resource metrics endpoint serves.

Every ``resolution`` seconds (15 s by default, as metrics-server's ``--metric-resolution``; the
plane's ``--metric-resolution`` flag) the node reads the CPU time and resident memory of each
container it runs: the shim starts a container in a session of its own (its session id is the
container's main pid), so one pass over ``/proc/<pid>/stat`` sorts every process to its container.
The pass runs only while the node has a running container: an idle node reads nothing.

* CPU: the container's CPU time (user + system of its live processes, with the time of the
  children they reaped) used between two passes, over the time between them, in nano-cores; a
  container's first pass counts from its start, so it has a figure at once. Time of a process
  that left the session or was reaped by init is lost (a dip reads as 0, never negative).
* Memory: the resident set of its processes (the working set a kubelet reports; without a cgroup
  this is what there is).
* The node: the sum of its pods' usage. Several simulated nodes share one machine, and the
  machine's whole usage is no one node's.

``summary`` renders the last pass in the kubelet's ``/stats/summary`` shape (``node``, ``pods[]``
with ``podRef`` and ``containers[]`` of ``cpu.usageNanoCores`` and ``memory.workingSetBytes``),
which the plane's metrics server reads, as metrics-server scrapes each kubelet.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from trainyard.api.meta import Obj, format_time
from trainyard.cluster.clients.node.runs import PodRun
from trainyard.cluster.clients.node.runtime import shim

DEFAULT_RESOLUTION = 15.0
RESOLUTION_ENV = "TRAINYARD_METRIC_RESOLUTION"
_TICK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_NANO = 1_000_000_000


def resolution_from_env(environ: dict[str, str] | None = None) -> float:
    """``$TRAINYARD_METRIC_RESOLUTION`` (seconds, set by ``yard up --metric-resolution``), else 15."""
    text = (environ if environ is not None else os.environ).get(RESOLUTION_ENV, "")
    if not text:
        return DEFAULT_RESOLUTION
    value = float(text.rstrip("s"))
    if not value > 0:
        raise ValueError(f"${RESOLUTION_ENV} must be a positive number of seconds, not {text!r}")
    return value


@dataclass
class ContainerUsage:
    name: str
    nano_cores: int
    memory_bytes: int
    window: float
    cpu_ticks: int = 0


@dataclass
class PodUsage:
    namespace: str
    name: str
    uid: str
    containers: list[ContainerUsage] = field(default_factory=list)


def session_usage(sessions: set[int]) -> dict[int, tuple[int, int]]:
    """Session id → (CPU ticks, resident bytes) of its live processes, for the sessions asked: one /proc pass."""
    out: dict[int, tuple[int, int]] = {}
    for entry in os.listdir("/proc"):  # noqa: PTH208 (names only: a Path per process costs more than the scan)
        if not entry.isdigit():
            continue
        fields = shim.proc_stat(int(entry))
        if fields is None or len(fields) < 22:
            continue
        sid = int(fields[3])
        if sid not in sessions:
            continue
        ticks = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        cpu, rss = out.get(sid, (0, 0))
        out[sid] = (cpu + ticks, rss + int(fields[21]) * _PAGE)
    return out


class ResourceStats:
    """The last pass over a node's containers, kept until the next one."""

    def __init__(
        self,
        node_name: str,
        runs: Callable[[], Iterable[PodRun]],
        *,
        resolution: float = DEFAULT_RESOLUTION,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.node_name = node_name
        self.runs = runs
        self.resolution = resolution
        self.clock = clock
        self.pods: list[PodUsage] = []
        self.at: float | None = None
        # (pod uid, container, pid) → (CPU ticks, when) of the last pass: the next one's baseline.
        self._last: dict[tuple[str, str, int], tuple[int, float]] = {}

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(self.resolution)

    def sample(self) -> None:
        now = self.clock()
        running: list[tuple[PodRun, str, int, float]] = []
        for run in self.runs():
            if run.stopping:
                continue
            for cr in run.containers:
                handle = cr.process
                if handle is not None and handle.exit is None and cr.exit_code is None and handle.pid:
                    running.append((run, cr.name, handle.pid, handle.started_at))
        usage = session_usage({pid for _, _, pid, _ in running}) if running else {}
        pods: dict[str, PodUsage] = {}
        last: dict[tuple[str, str, int], tuple[int, float]] = {}
        for run, name, pid, started in running:
            if pid not in usage:
                continue
            ticks, rss = usage[pid]
            key = (run.uid, name, pid)
            before, then = self._last.get(key, (0, started))
            window = max(now - then, 1e-3)
            cores = max(ticks - before, 0) / _TICK / window
            last[key] = (ticks, now)
            pod = pods.setdefault(run.uid, PodUsage(run.namespace, run.name, run.uid))
            pod.containers.append(ContainerUsage(name, round(cores * _NANO), rss, window, ticks))
        self._last = last
        self.pods = list(pods.values())
        self.at = now

    def summary(self) -> Obj:
        """The last pass as the kubelet's ``/stats/summary`` (the parts metrics-server reads)."""
        at = format_time_float(self.at) if self.at is not None else None
        pods: list[Obj] = []
        node_cpu = node_memory = 0
        for pod in self.pods:
            containers = []
            for c in pod.containers:
                node_cpu += c.nano_cores
                node_memory += c.memory_bytes
                containers.append(
                    {
                        "name": c.name,
                        "cpu": {"time": at, "usageNanoCores": c.nano_cores, "window": c.window},
                        "memory": {"time": at, "workingSetBytes": c.memory_bytes},
                    }
                )
            ref = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
            pods.append({"podRef": ref, "containers": containers})
        node = {
            "nodeName": self.node_name,
            "cpu": {"time": at, "usageNanoCores": node_cpu, "window": self.resolution},
            "memory": {"time": at, "workingSetBytes": node_memory},
        }
        return {"node": node, "pods": pods}


def format_time_float(at: float) -> str:
    return format_time(datetime.fromtimestamp(at, UTC))
