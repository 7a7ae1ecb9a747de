"""A container run's process as its ``ContainerRun`` records it: how a start fails, how it ends, how it stops.

``fail_start`` records a start that could not happen (``StartError``, exit code 128, as the
kubelet reports it); ``wait`` waits for the run's shim to report the exit and records it, its
probes stopped first, an ``OOMKilled`` exit worded with the memory used and the limit it went
over; ``kill_group`` and ``stop_groups`` stop process groups as the kubelet stops containers
(SIGTERM, then SIGKILL after the grace period); ``kill_trees`` kills containers' every process at
once, as a machine losing power does. ``stamp`` renders a shim's epoch time as the API's timestamps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from trainyard.api.meta import format_time
from trainyard.cluster import qos
from trainyard.cluster.clients.node.runs import ContainerRun
from trainyard.cluster.clients.node.runtime import shims


def stamp(moment: float) -> str:
    return format_time(datetime.fromtimestamp(moment, UTC))


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process, from ``/proc``."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                out[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return out


def kill_trees(roots: Iterable[int]) -> None:
    """SIGKILL every process of these containers at once: each root's group and every descendant,
    also those that left it for a session of their own (torchrun's and mpirun's workers do, and a
    signal to the group alone would leave them running on a machine that is gone)."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    doomed: set[int] = set()
    frontier = [r for r in roots if r > 1]
    while frontier:
        pid = frontier.pop()
        if pid in doomed:
            continue
        doomed.add(pid)
        frontier.extend(children.get(pid, ()))
    for root in roots:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(root, signal.SIGKILL)
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def fail_start(cr: ContainerRun, message: str, now: str) -> None:
    cr.exit_code, cr.reason, cr.message, cr.finished_at = 128, "StartError", message, now


async def wait(cr: ContainerRun) -> None:
    """Wait for the current run of ``cr`` to end and record how it did (nothing to wait for: return)."""
    if cr.process is None:
        return
    ended = await cr.process.wait()
    if cr.probes is not None:
        await cr.probes.stop()
    cr.finished_at = stamp(ended.finished_at)
    cr.exit_code, cr.reason, cr.message = ended.exit_code, ended.reason, ended.message
    if ended.reason == "OOMKilled":
        limit = (ended.oom or {}).get("limit")
        used = (ended.oom or {}).get("used")
        over = f"its processes used {qos.format_bytes(used)}, over" if used else "it reached"
        cr.message = (
            f"was OOM-killed: {over} its memory limit resources.limits.memory="
            f"{qos.format_bytes(limit) if limit else '?'}; raise resources.limits.memory"
        )


async def kill_group(handle: shims.Handle, grace: float) -> None:
    """Stop one container's process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
    handle.signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(handle.wait(), timeout=max(grace, 0.1))
    except TimeoutError:
        handle.signal(signal.SIGKILL)


async def stop_groups(groups: list[shims.Handle], grace: float) -> None:
    """Stop these process groups together: SIGTERM to each, SIGKILL after ``grace``; return once all are gone."""
    for handle in groups:
        handle.signal(signal.SIGTERM)
    if groups:
        try:
            await asyncio.wait_for(asyncio.gather(*(h.wait() for h in groups)), timeout=max(grace, 0.1))
        except TimeoutError:
            for handle in groups:
                handle.signal(signal.SIGKILL)
            # Each shim exits once its container's group is gone (it kills what its first process leaves).
            await asyncio.gather(*(h.wait() for h in groups))
