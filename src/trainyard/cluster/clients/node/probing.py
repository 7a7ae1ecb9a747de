"""A container's probes wired to this node: ``probes.ContainerProbes`` given its ``Target`` and ``Hooks``.

An exec probe's command runs as the container runs (its environment, mounts and working
directory from ``containerconfig``), in a session of its own that is killed when it times out; a
probe result that changes ``started`` or ``ready`` reports the pod's ``Running`` status again; a
liveness or startup probe that fails for good records ``Killing`` and stops the container's
process group with the probe's grace period (else the pod's), and the restart policy decides what
follows. Init containers and the sshd stand-in (it listens nowhere) are not probed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node import podexec
from trainyard.cluster.clients.node.containerconfig import ContainerConfig
from trainyard.cluster.clients.node.lifecycle import kill_group
from trainyard.cluster.clients.node.probes import (
    ContainerProbes,
    Hooks,
    Probe,
    Target,
    killing_message,
    named_ports,
    probes_of,
)
from trainyard.cluster.clients.node.runs import ContainerRun, PodRun
from trainyard.cluster.clients.node.runtime import mountns


@dataclass(frozen=True)
class ProbeWiring:
    address: str
    config: ContainerConfig
    report: Callable[[PodRun, Obj], Coroutine[Any, Any, None]]  # write the pod's Running status
    event: Callable[[Obj, str, str, str], Awaitable[None]]  # pod, type, reason, message
    spawn: Callable[[Coroutine[Any, Any, None]], None]  # run in the background, kept by the agent

    def start(self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun) -> None:
        """Start the probes of this run of ``cr``, if it has any."""
        listens = podexec.stand_in(list(container.get("command") or [])) is None  # the sshd stand-in: nowhere
        if not cr.init and (found := probes_of(container, listens=listens)):
            cr.probes = self._probes(run, pod, container, cr, found)
            cr.probes.start()

    def _probes(self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun, found: list[Probe]) -> ContainerProbes:
        """Probe workers for this run of ``cr``, wired to this node's processes, status and events."""
        spec = pod.get("spec") or {}

        async def execute(argv: list[str], timeout: float) -> tuple[int | None, str]:
            return await self._exec(run, pod, container, cr, argv, timeout)

        async def changed() -> None:
            # Not awaited here: stopping the probes (the container exited) must not cancel a report.
            self.spawn(self.report(run, pod))

        async def event(type_: str, reason: str, message: str) -> None:
            await self.event(pod, type_, reason, message)

        async def kill(probe: Probe) -> None:
            process = cr.process
            if run.stopping or process is None or process.exit is not None:
                return
            policy = spec.get("restartPolicy") or "Always"
            await self.event(pod, "Normal", "Killing", killing_message(cr.name, probe, policy))
            grace = probe.termination_grace
            if grace is None:
                grace = int(spec.get("terminationGracePeriodSeconds", 30))
            self.spawn(kill_group(process, float(grace)))

        target = Target(self.address, named_ports(container), execute)
        return ContainerProbes(found, target, Hooks(changed, event, kill))

    async def _exec(
        self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun, argv: list[str], timeout: float
    ) -> tuple[int | None, str]:
        """Run an exec probe's command as the container runs (its env and mounts): exit code, or None on timeout."""
        mounts, cwd = self.config.joining_spec(run, container, cr)
        if mounts is not None:
            argv = [sys.executable, mountns.__file__, json.dumps(mounts), "--", *argv]
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=cr.env or self.config.exec_environment(run, pod, container),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            async with asyncio.timeout(timeout):
                output, _ = await process.communicate()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
            return None, ""
        return process.returncode, output.decode(errors="replace")
