"""The local node agent: this machine's kubelet. Pods become supervised process groups.

It talks to the API server only through the Kubernetes client, like a kubelet: it registers its
``Node`` (capacity from ``capacity``, shape from ``nodestatus``) and heartbeats it, watches the
pods the scheduler bound to it, runs each container's ``command`` + ``args`` with the pod's
environment in the local Python environment its ``image`` stands for (``cluster.environments``;
trainyard's own when none does), and reports phase and container statuses.
Each container run is supervised by a shim process of its own (``runtime``) that writes the
CRI-format log (rotated: ``containerlogs``) and records the exit, so containers outlive the
agent: a restarted agent adopts the runs it finds (``_resume``) and reports those that ended
meanwhile with their real exit status. Deleting a pod stops each container's process group
(SIGTERM, then SIGKILL after the grace period) before the pod object is removed.
``resources.limits.memory`` is enforced by the shim (``OOMKilled``, exit code 137).

Containers restart in place as the pod's ``restartPolicy`` says (``Always``: after any exit;
``OnFailure``: after a non-zero exit), with the kubelet's crash-loop back-off, ``restartCount``,
``lastState`` and the previous run's log kept for ``logs --previous``.

The environment (``env``, ``envFrom``, ``valueFrom``) comes from ``podenv``, the thread counts of a
container's CPU share (``OMP_NUM_THREADS``..., a ``ThreadsSet`` event) from ``threads``; ``emptyDir``,
``configMap``, ``secret`` and ``hostPath`` volumes from ``volumes``, mounted at their
``mountPath`` in a private mount namespace (``runtime.mountns``); ``downwardAPI``, ``projected``
and ``persistentVolumeClaim`` volumes too (claims are provisioned by ``persistentvolumes`` for
their first pod; service-account tokens are issued, and replaced before they expire, by ``tokens``);
``containerconfig`` puts them together for each container. Init containers run
one by one before the main containers. Probes come from ``probes``, pod conditions from
``conditions``, GPU device assignment from ``gpus``. What the agent knows of each pod and
container run, and how a container's status reads, is ``runs``.
Commands exec'd into a running pod (``podexec``, served beside the agent) are the pod's and stop with it.

Not yet here (documented as absent): CPU limits without cgroup v2, sidecar init containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from trainyard.api.meta import format_time
from trainyard.client import build, delete, event_body, is_status, to_dict
from trainyard.cluster import qos
from trainyard.cluster.environments import EnvironmentsError
from trainyard.cluster.node import capacity as node_capacity
from trainyard.cluster.node import containerlogs, gpus, nodestatus, podexec, podstatus, tokens
from trainyard.cluster.node.backoff import KUBELET_BASE, BackOff, go_duration
from trainyard.cluster.node.caches import CONFIG_MAP, EVENT, POD, SECRET, BoundPods, ConfigSources
from trainyard.cluster.node.containerconfig import ContainerConfig
from trainyard.cluster.node.persistentvolumes import Storage, claim_names
from trainyard.cluster.node.podenv import ConfigError, Sources, expand, referenced
from trainyard.cluster.node.probes import ContainerProbes, Hooks, Probe, Target, killing_message, named_ports, probes_of
from trainyard.cluster.node.runs import ContainerRun, PodRun, restarts
from trainyard.cluster.node.runtime import mountns, shims
from trainyard.cluster.node.threads import REASON as THREADS_SET
from trainyard.cluster.paths import Layout

log = logging.getLogger(__name__)

Obj = dict[str, Any]
TERMINAL = ("Succeeded", "Failed")
# How long a container waits between reads of a ConfigMap/Secret it needs but cannot have yet.
CONFIG_RETRY_SECONDS = 2.0
# Status writes and events in flight at once: a burst of pods must not queue hundreds of requests
# in the client's connection pool (they would time out there), and events must not delay statuses.
STATUS_WRITES = 16
EVENT_WRITES = 4
# How long a pod's first Running status waits for a newer one (the kubelet notices a start on its
# next relist, up to a second later): a container done at once costs one status write, not two.
RUNNING_HOLD_SECONDS = 0.1
# How often the Node's conditions are re-measured and its heartbeat written (the kubelet's
# nodeStatusUpdateFrequency).
HEARTBEAT_SECONDS = 10.0


def _created_waiting(run: PodRun) -> str:
    """A container's waiting reason before it runs: the kubelet says PodInitializing in a pod with init containers."""
    return "PodInitializing" if run.init_containers else "ContainerCreating"


class NodeAgent:
    def __init__(
        self,
        client: AsyncClient,
        layout: Layout,
        *,
        node_name: str | None = None,
        workspace: Path | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        address: str = "127.0.0.1",
        restart_backoff: float = KUBELET_BASE,
        capacity: node_capacity.Capacity | None = None,
        taints: list[Obj] | None = None,
        rotation: containerlogs.LogRotation | None = None,
    ) -> None:
        self.client = client
        self.layout = layout
        self.node_name = node_name or socket.gethostname().lower()
        self.workspace = (workspace or Path.cwd()).resolve()
        self.clock = clock
        self.address = address
        self.backoff = BackOff(restart_backoff)
        self.capacity = capacity or node_capacity.detect(layout.home)
        self.taints = list(taints or [])
        self.runtime = shims.ShimRuntime()
        self._statuses = podstatus.StatusWriter(self._patch_status, STATUS_WRITES, retryable=podstatus.server_failed)
        self._event_slots = asyncio.Semaphore(EVENT_WRITES)
        self.pods: dict[str, PodRun] = {}
        self._changes: asyncio.Queue[tuple[str, Obj]] = asyncio.Queue()
        self.bound = BoundPods(client, self.node_name, lambda kind, pod: self._changes.put_nowait((kind, pod)))
        self.config_sources = ConfigSources(client)
        self.storage = Storage(client, layout.storage, self.node_name, self.now)
        self.tokens = tokens.ProjectedTokens(client, clock)
        self.container_config = ContainerConfig(
            layout,
            self.workspace,
            node_name=self.node_name,
            address=address,
            capacity=self.capacity,
            running=self.bound.active,
            rotation=rotation,
        )
        # One allocation at a time: each reads the devices the others recorded.
        self._devices_lock = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def now(self) -> str:
        return format_time(self.clock())

    # -- lifecycle -------------------------------------------------------------------------------

    async def run(self) -> None:
        self.runtime.cgroup_root = shims.prepare_cgroups()
        await self._register()
        self._spawn(self._heartbeat())
        watching = asyncio.create_task(self.bound.run(), name="node-pods")
        self._spawn(self.container_config.prune(self.bound))
        try:
            while True:
                kind, pod = await self._changes.get()
                try:
                    await self._sync(kind, pod)
                except Exception:
                    log.exception("node agent failed handling pod %s", pod.get("metadata", {}).get("name"))
        finally:
            watching.cancel()
            await self.config_sources.close()

    async def shutdown(self, grace: float = 5.0) -> None:
        """Stop every process this node runs (``yard down``): SIGTERM, then SIGKILL."""
        await asyncio.gather(*(self._kill(run, grace) for run in list(self.pods.values())), return_exceptions=True)
        await self.runtime.close()
        self.container_config.close()
        self.tokens.close()

    async def _register(self) -> None:
        """Create or refresh this node's Node: labels and taints from ``yard up``, then its status."""
        uname = os.uname()
        wanted = nodestatus.manifest(self.node_name, machine=uname.machine, capacity=self.capacity, taints=self.taints)
        try:
            await self.client.create(build(Node, wanted))
        except ApiError as exc:
            if not is_status(exc, 409):
                raise
            # Re-registration: the well-known labels and the declared taints are yard up's to set.
            patch = {
                "metadata": {
                    "labels": wanted["metadata"]["labels"],
                    "annotations": {nodestatus.DECLARED_ANNOTATION: None} | wanted["metadata"]["annotations"],
                },
                "spec": {"taints": self.taints or None},
            }
            await self.client.patch(Node, self.node_name, patch, patch_type=PatchType.MERGE)
        await self._write_status()

    async def _write_status(self) -> None:
        current = await self.client.get(Node, self.node_name)
        previous = [c.to_dict() for c in (current.status.conditions if current.status else None) or []]
        pressure = node_capacity.pressure(self.layout.home)
        uname = os.uname()
        status = nodestatus.status(
            self.node_name,
            capacity=self.capacity,
            address=self.address,
            conditions=nodestatus.conditions(previous, pressure, self.now()),
            uname=(uname.sysname, uname.release, uname.machine),
        )
        await self.client.patch(Node.Status, self.node_name, {"status": status}, patch_type=PatchType.MERGE)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self._write_status()
            except ApiError as exc:
                if not is_status(exc, 404):
                    log.warning("node heartbeat failed: %s", exc)
                    continue
                await self._register()  # someone deleted the Node: register again, as a kubelet does
            except Exception:
                log.exception("node heartbeat failed")

    # -- level-triggered pod handling --------------------------------------------------------------

    async def _sync(self, kind: str, pod: Obj) -> None:
        m, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        uid = m["uid"]
        run = self.pods.get(uid)
        if kind == "DELETED":
            if run is not None:
                await self._kill(run, 0)
            return
        node = spec.get("nodeName")
        if node != self.node_name:
            return
        if m.get("deletionTimestamp"):
            if run is None:
                # Processes a previous agent started may still run: they go before the pod does.
                run = self._leftovers(pod)
            if not run.stopping:
                run.stopping = True
                self._spawn(self._stop_and_confirm(run, float(m.get("deletionGracePeriodSeconds") or 0)))
            return
        if run is not None:
            return
        # A Running pod (or a Pending one whose start was interrupted) with no run here was started
        # by a previous agent: _run_pod adopts what is still running and reports what ended.
        if status.get("phase", "Pending") in ("Pending", "Running"):
            run = PodRun(m["namespace"], m["name"], uid, pod=pod)
            self.pods[uid] = run
            run.task = asyncio.create_task(self._run_pod(run, pod))

    # -- running -----------------------------------------------------------------------------------

    async def _run_pod(self, run: PodRun, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        run.init_containers = [
            ContainerRun(c["name"], c.get("image", ""), init=True) for c in spec.get("initContainers") or []
        ]
        run.containers = [ContainerRun(c["name"], c.get("image", "")) for c in spec.get("containers") or []]
        for cr in [*run.init_containers, *run.containers]:
            cr.waiting = _created_waiting(run)
        resumed = self._resume(run, pod)
        if not await self._admit_devices(run, pod):
            run.stopped.set()
            return
        if resumed:
            # Its containers ran before: volumes are refreshed in place, and nothing waits for config.
            await self._read_sources(run, pod)
            if problem := self.container_config.materialize(run, pod):
                log.warning("pod %s/%s: %s", run.namespace, run.name, problem)
        elif not await self._await_config(run, pod):
            run.stopped.set()
            return
        self.tokens.keep_fresh(run.uid, pod, run.volumes)
        policy = spec.get("restartPolicy") or "Always"
        ended = False
        # Like the kubelet: a failed init container is retried unless the pod never restarts.
        init_policy = "Never" if policy == "Never" else "OnFailure"
        try:
            for container, cr in zip(spec.get("initContainers") or [], run.init_containers, strict=True):
                if not cr.has_run:
                    await self._start(run, pod, container, cr)
                    await self._report(run, pod, "Pending")
                await self._supervise(run, pod, container, cr, init_policy, "Pending")
                if cr.exit_code != 0 or run.stopping:
                    await self._report(run, pod, "Failed")
                    ended = True
                    return
            for container, cr in zip(spec.get("containers") or [], run.containers, strict=True):
                if not cr.has_run:
                    await self._start(run, pod, container, cr)
                elif cr.exit_code is None:
                    # Adopted from an earlier agent: probed afresh, unready until readiness passes (as a
                    # restarted kubelet does).
                    self._start_probes(run, pod, container, cr)
            # Not waited for, and held a moment: a container that ends first makes this write its
            # final status instead.
            await self._report(run, pod, "Running", wait=False, hold=RUNNING_HOLD_SECONDS)
            pending = [
                asyncio.create_task(self._supervise(run, pod, container, cr, policy, "Running"))
                for container, cr in zip(spec.get("containers") or [], run.containers, strict=True)
            ]
            for done in asyncio.as_completed(pending):
                await done
                if not all(cr.exit_code is not None for cr in run.containers):
                    await self._report(run, pod, "Running", wait=False)
            ok = all(cr.exit_code == 0 for cr in run.containers)
            await self._report(run, pod, "Succeeded" if ok else "Failed")
            ended = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("pod %s/%s could not run", run.namespace, run.name)
            await self._report(run, pod, "Failed", reason="StartError", message=str(exc))
            ended = True
        finally:
            if ended:  # its containers never run again
                self.container_config.release(run)
                self.tokens.forget(run.uid)
            run.stopped.set()

    async def _supervise(
        self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun, policy: str, phase: str
    ) -> None:
        """Wait for a started container and restart it in place for as long as ``policy`` says."""
        delay: float | None = None
        while True:
            await self._wait(run, cr)
            if cr.reason == "OOMKilled":
                self._spawn(self._event(pod, "Warning", "OOMKilled", f"Container {cr.name} {cr.message}"))
            if run.stopping or not restarts(policy, cr.exit_code):
                return
            delay = self.backoff.delay(delay, time.monotonic() - cr.started_mono)
            if delay > 0:
                m = pod["metadata"]
                target = f"{m['name']}_{m['namespace']}({m['uid']})"
                cr.restarted()
                cr.waiting = "CrashLoopBackOff"
                cr.message = f"back-off {go_duration(delay)} restarting failed container={cr.name} pod={target}"
                await self._report(run, pod, phase)
                await self._event(
                    pod, "Warning", "BackOff", f"Back-off restarting failed container {cr.name} in pod {target}"
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(run.wake.wait(), timeout=delay)
                if run.stopping:
                    return
            else:
                cr.restarted()
            cr.restart_count += 1
            # The finished run's log becomes the previous one (its shim, which wrote it, has exited).
            self.container_config.retire_log(run, cr.name)
            await self._start(run, pod, container, cr)
            await self._report(run, pod, phase)

    async def _admit_devices(self, run: PodRun, pod: Obj) -> bool:
        """Give the pod its GPUs (recorded on it) or reject it as the kubelet's admission does."""
        if gpus.pod_need(pod) == 0:
            return True
        m = pod["metadata"]
        async with self._devices_lock:
            mine = gpus.recorded(pod)
            try:
                if mine is None:
                    # The node's pods from the cache: each allocation made here is put back in it
                    # below, so the next one (this lock serialises them) sees it without a LIST.
                    held = gpus.in_use(self.bound.items(), except_uid=run.uid)
                    allocation = gpus.allocate(self.capacity.gpus, pod, held)
                    if isinstance(allocation, gpus.Rejected):
                        await self._event(pod, "Warning", allocation.reason, allocation.event)
                        await self._report(run, pod, "Failed", reason=allocation.reason, message=allocation.message)
                        return False
                    mine = allocation
                    patch = {"metadata": {"annotations": {gpus.ANNOTATION: json.dumps(mine, sort_keys=True)}}}
                    answer = await self.client.patch(
                        POD, m["name"], patch, namespace=m["namespace"], patch_type=PatchType.MERGE
                    )
                    self.bound.mutated(to_dict(answer))
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
                return False
        run.devices = mine
        return True

    async def _read_sources(self, run: PodRun, pod: Obj) -> None:
        config_maps, secrets = referenced(pod)
        sources = Sources(tokens=await self.tokens.issue(run.uid, pod))
        for names, res, table in ((config_maps, CONFIG_MAP, sources.config_maps), (secrets, SECRET, sources.secrets)):
            for name in names:
                table[name] = await self.config_sources.read(res, run.namespace, name)
        if claims := claim_names(pod):
            sources.claims, sources.persistent_volumes = await self.storage.read(run.namespace, claims)
        run.sources = sources

    async def _await_config(self, run: PodRun, pod: Obj) -> bool:
        """Wait, like the kubelet, until every container can be created; False when the pod stopped first.

        Meanwhile the pod stays Pending with the containers Waiting in ``CreateContainerConfigError``
        (or ``ContainerCreating`` while a volume cannot be set up).
        """
        spec = pod.get("spec") or {}
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        reported: list[str] | None = None
        while not run.stopping:
            await self._read_sources(run, pod)
            volume_error = self.container_config.materialize(run, pod)
            problems = [
                (cr, problem)
                for container, cr in zip(containers, [*run.init_containers, *run.containers], strict=True)
                if (problem := volume_error or self.container_config.config_error(run, pod, container)) is not None
            ]
            if not problems:
                if reported:
                    for cr in [*run.init_containers, *run.containers]:
                        cr.waiting, cr.message = _created_waiting(run), None
                return True
            messages = [problem for _, problem in problems]
            if messages != reported:
                # A volume the kubelet cannot set up keeps containers in ContainerCreating (FailedMount).
                waiting = "ContainerCreating" if volume_error else "CreateContainerConfigError"
                for cr, problem in problems:
                    cr.waiting, cr.message = waiting, problem
                await self._report(run, pod, "Pending")
                if volume_error:
                    await self._event(pod, "Warning", "FailedMount", volume_error)
                else:
                    await self._event(pod, "Warning", "Failed", f"Error: {messages[0]}")
                reported = messages
            await asyncio.sleep(CONFIG_RETRY_SECONDS)
        return False

    async def _start(self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun) -> None:
        try:
            env, pulled, threads = self.container_config.start(run, pod, container)
        except (ConfigError, EnvironmentsError) as exc:
            # Checked before the first start; a restart after an environment or a ConfigMap went away
            # fails this run with the reason, and the restart policy retries.
            self._fail_start(cr, str(exc))
            return
        argv = podexec.command(
            [expand(a, env) for a in (container.get("command") or []) + (container.get("args") or [])]
        )
        cr.started_at = self.now()
        cr.started_mono = time.monotonic()
        spec = {
            "container": cr.name,
            "argv": argv,
            "env": env,
            **self.container_config.placement(run, container),
            **self.container_config.logging(run, cr.name),
            "state": str(self.layout.container_state(run.namespace, run.name, run.uid, cr.name)),
            "restartCount": cr.restart_count,
            "memoryLimit": qos.memory_limit(container),
            "cpuMillis": qos.cpu_limit_millis(container),
            "cgroup": f"{run.uid}_{cr.name}",
        }
        try:
            handle = await self.runtime.start(spec)
        except shims.ShimError as exc:
            self._fail_start(cr, str(exc))
            return
        if handle.exit is not None and handle.exit.reason == "StartError":
            self._fail_start(cr, handle.exit.message or "the container could not be started")
            return
        cr.process, cr.env = handle, env
        cr.started_at = _stamp(handle.started_at)
        if run.stopping:
            handle.signal(signal.SIGKILL)
        self._spawn(self._started_events(pod, cr, pulled, threads))
        self._start_probes(run, pod, container, cr)

    async def _started_events(self, pod: Obj, cr: ContainerRun, pulled: str, threads: str | None) -> None:
        # Images are not pulled here: "Pulled" names the local environment that stands for the image.
        await self._event(pod, "Normal", "Pulled", pulled)
        if threads is not None:  # describe shows the spec's env, not what the node added to it
            await self._event(pod, "Normal", THREADS_SET, threads)
        await self._event(pod, "Normal", "Started", f"Started container {cr.name}")

    def _start_probes(self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun) -> None:
        listens = podexec.stand_in(list(container.get("command") or [])) is None  # the sshd stand-in: nowhere
        if not cr.init and (found := probes_of(container, listens=listens)):
            cr.probes = self._probes(run, pod, container, cr, found)
            cr.probes.start()

    def _probes(self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun, found: list[Probe]) -> ContainerProbes:
        """Probe workers for this run of ``cr``, wired to this node's processes, status and events."""
        spec = pod.get("spec") or {}

        async def execute(argv: list[str], timeout: float) -> tuple[int | None, str]:
            return await self._probe_exec(run, pod, container, cr, argv, timeout)

        async def changed() -> None:
            # Not awaited here: stopping the probes (the container exited) must not cancel a report.
            self._spawn(self._report(run, pod, "Running"))

        async def event(type_: str, reason: str, message: str) -> None:
            await self._event(pod, type_, reason, message)

        async def kill(probe: Probe) -> None:
            process = cr.process
            if run.stopping or process is None or process.exit is not None:
                return
            policy = spec.get("restartPolicy") or "Always"
            await self._event(pod, "Normal", "Killing", killing_message(cr.name, probe, policy))
            grace = probe.termination_grace
            if grace is None:
                grace = int(spec.get("terminationGracePeriodSeconds", 30))
            self._spawn(self._kill_group(process, float(grace)))

        target = Target(self.address, named_ports(container), execute)
        return ContainerProbes(found, target, Hooks(changed, event, kill))

    async def _probe_exec(
        self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun, argv: list[str], timeout: float
    ) -> tuple[int | None, str]:
        """Run an exec probe's command as the container runs (its env and mounts): exit code, or None on timeout."""
        mounts, cwd = self.container_config.joining_spec(run, container, cr)
        if mounts is not None:
            argv = [sys.executable, mountns.__file__, json.dumps(mounts), "--", *argv]
        process = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=cr.env or self.container_config.exec_environment(run, pod, container),
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

    async def _kill_group(self, handle: shims.Handle, grace: float) -> None:
        """Stop one container's process group: SIGTERM, then SIGKILL after ``grace`` seconds."""
        handle.signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(handle.wait(), timeout=max(grace, 0.1))
        except TimeoutError:
            handle.signal(signal.SIGKILL)

    def _resume(self, run: PodRun, pod: Obj) -> bool:
        """Take over the containers an earlier agent started, from their state files; whether there were any.

        A run whose shim still runs is adopted as it is; one that ended meanwhile carries its
        recorded exit, and the restart policy then applies as usual. A container the pod's status
        says was running but that left no state here is reported lost (``shims.LOST_REASON``).
        """
        status = pod.get("status") or {}
        seen = {
            s.get("name"): s
            for s in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        }
        found = False
        for cr in [*run.init_containers, *run.containers]:
            reported = seen.get(cr.name) or {}
            state = reported.get("state") or {}
            handle = self.runtime.adopt(self.layout.container_state(run.namespace, run.name, run.uid, cr.name))
            if handle is not None:
                cr.process = handle
                cr.restart_count = handle.restart_count
                cr.started_at = _stamp(handle.started_at)
                cr.started_mono = time.monotonic() - max(0.0, time.time() - handle.started_at)
            elif "running" in state:
                cr.restart_count = int(reported.get("restartCount") or 0)
                cr.started_at = state["running"].get("startedAt")
                cr.exit_code, cr.reason, cr.finished_at = 137, shims.LOST_REASON, self.now()
                cr.message = shims.LOST_MESSAGE
            elif "terminated" in state:
                done = state["terminated"]
                cr.restart_count = int(reported.get("restartCount") or 0)
                cr.started_at, cr.finished_at = done.get("startedAt"), done.get("finishedAt") or self.now()
                cr.exit_code, cr.reason = int(done.get("exitCode", 137)), done.get("reason")
                cr.message = done.get("message")
            else:
                continue
            cr.last_state = reported.get("lastState") or {}
            found = True
        return found

    def _leftovers(self, pod: Obj) -> PodRun:
        """A run holding whatever an earlier agent left running for ``pod``, so that it can be stopped."""
        m, spec = pod["metadata"], pod.get("spec") or {}
        run = PodRun(m["namespace"], m["name"], m["uid"])
        for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            cr = ContainerRun(container["name"], container.get("image", ""))
            cr.process = self.runtime.adopt(self.layout.container_state(run.namespace, run.name, run.uid, cr.name))
            run.containers.append(cr)
        self.pods[run.uid] = run
        return run

    def _fail_start(self, cr: ContainerRun, message: str) -> None:
        cr.exit_code, cr.reason, cr.message, cr.finished_at = 128, "StartError", message, self.now()

    async def _wait(self, run: PodRun, cr: ContainerRun) -> None:
        if cr.process is None:
            return
        ended = await cr.process.wait()
        if cr.probes is not None:
            await cr.probes.stop()
        cr.finished_at = _stamp(ended.finished_at)
        cr.exit_code, cr.reason, cr.message = ended.exit_code, ended.reason, ended.message
        if ended.reason == "OOMKilled":
            limit = (ended.oom or {}).get("limit")
            used = (ended.oom or {}).get("used")
            over = f"its processes used {qos.format_bytes(used)}, over" if used else "it reached"
            cr.message = (
                f"was OOM-killed: {over} its memory limit resources.limits.memory="
                f"{qos.format_bytes(limit) if limit else '?'}; raise resources.limits.memory"
            )

    async def _report(
        self,
        run: PodRun,
        pod: Obj,
        phase: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        wait: bool = True,
        hold: float = 0.0,
    ) -> None:
        """Write the pod's status (through ``podstatus``, newest wins); with ``wait``, return once it is written.

        None goes out after the terminal one (probe results report too).
        """
        async with run.reporting:
            if run.final:
                return
            run.final = phase in TERMINAL
            status = podstatus.pod_status(
                run, pod, phase, address=self.address, now=self.now(), reason=reason, message=message
            )
            written = self._statuses.put(run.namespace, run.name, status, hold=hold)
        if wait:
            await written
        else:
            written.add_done_callback(podstatus.log_failure)

    async def _patch_status(self, namespace: str, name: str, status: Obj) -> None:
        try:
            # A plain-dict resource: the answer (the whole pod) is not decoded into typed models.
            answer = await self.client.patch(
                POD.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
            )
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
        else:
            self.bound.mutated(to_dict(answer))  # GPU admission reads phases from the cache

    # -- stopping ----------------------------------------------------------------------------------

    async def _kill(self, run: PodRun, grace: float) -> None:
        """Stop the pod's containers: SIGTERM to each process group, SIGKILL after ``grace``; return once gone."""
        run.stopping = True
        run.wake.set()
        groups = [cr.process for cr in run.init_containers + run.containers if cr.process and cr.process.exit is None]
        sessions = asyncio.ensure_future(podexec.stop_sessions(run.exec_sessions, grace))  # exec'd: the pod's too
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
        await sessions
        if run.task is not None and not run.task.done():
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(run.stopped.wait()), timeout=5)
        self.container_config.release(run)
        self.tokens.forget(run.uid)
        self.pods.pop(run.uid, None)

    async def _stop_and_confirm(self, run: PodRun, grace: float) -> None:
        await self._kill(run, grace)
        await self._confirm_deleted(run.namespace, run.name, run.uid)

    async def _confirm_deleted(self, namespace: str, name: str, uid: str) -> None:
        # As the kubelet's final delete: only this pod's uid, for a controller may already have
        # created its successor under the same name (a gang restart does, as soon as it sees this one go).
        await delete(self.client, POD, name, namespace=namespace, uid=uid, grace_period=0)

    async def _event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        m = pod["metadata"]
        involved = {"apiVersion": "v1", "kind": "Pod", "name": m["name"], "namespace": m["namespace"], "uid": m["uid"]}
        body = event_body(
            involved,
            type_=type_,
            reason=reason,
            message=message,
            component="kubelet",
            now=self.now(),
            host=self.node_name,
        )
        try:
            async with self._event_slots:
                await self.client.create(EVENT.from_dict(body))
        except Exception as exc:  # an event is best effort, as the kubelet's recorder
            log.warning("could not record event %s on %s/%s: %s", reason, m["namespace"], m["name"], exc)


def _stamp(moment: float) -> str:
    return format_time(datetime.fromtimestamp(moment, UTC))
