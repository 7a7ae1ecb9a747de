"""The local node agent: this machine's kubelet. Pods become supervised process groups.

It talks to the API server only through the Kubernetes client, like a kubelet: it registers its
``Node`` (capacity from ``capacity``, shape from ``nodestatus``) and heartbeats it
(``registration``), watches the pods the scheduler bound to it, runs each container's
``command`` + ``args`` with the pod's environment in the local Python environment its ``image``
stands for (``cluster.environments``; trainyard's own when none does), and reports phase and
container statuses (``podstatus``) and the kubelet's events (``events``).
Each container run is supervised by a shim process of its own (``runtime``) that writes the
CRI-format log (rotated: ``containerlogs``) and records the exit, so containers outlive the
agent: a restarted agent adopts the runs it finds (``adoption``) and reports those that ended
meanwhile with their real exit status. Deleting a pod stops each container's process group
(SIGTERM, then SIGKILL after the grace period) before the pod object is removed; how a run's
start failure, exit and stop are recorded is ``lifecycle``.
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
one by one before the main containers. Probes come from ``probes`` (wired to the node's
processes, status and events by ``probing``), pod conditions from
``conditions``, GPU device assignment from ``gpus``. What the agent knows of each pod and
container run, and how a container's status reads, is ``runs``.

What the node measures of its containers' CPU and memory (for ``kubectl top`` and autoscaling) is
``resourcestats``.

Commands exec'd into a running pod (``podexec``, served beside the agent) are the pod's and stop with it.

Not yet here (documented as absent): CPU limits without cgroup v2, sidecar init containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import time
from collections.abc import Callable, Coroutine, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.meta import Obj, format_time
from trainyard.client.resources import is_status, to_dict
from trainyard.client.transport import delete
from trainyard.cluster import qos
from trainyard.cluster.clients.node import adoption, containerlogs, gpus, lifecycle, podexec, podstatus, tokens
from trainyard.cluster.clients.node import capacity as node_capacity
from trainyard.cluster.clients.node.backoff import KUBELET_BASE, BackOff, go_duration
from trainyard.cluster.clients.node.caches import CONFIG_MAP, POD, SECRET, BoundPods, ConfigSources
from trainyard.cluster.clients.node.containerconfig import ContainerConfig
from trainyard.cluster.clients.node.dnsconfig import NodeDns
from trainyard.cluster.clients.node.events import PodEvents
from trainyard.cluster.clients.node.persistentvolumes import Storage, claim_names
from trainyard.cluster.clients.node.podenv import ConfigError, Sources, expand, referenced
from trainyard.cluster.clients.node.probing import ProbeWiring
from trainyard.cluster.clients.node.registration import DEFAULT_LEASE_SECONDS, Registration
from trainyard.cluster.clients.node.resourcestats import DEFAULT_RESOLUTION, ResourceStats
from trainyard.cluster.clients.node.runs import ContainerRun, PodRun, restarts
from trainyard.cluster.clients.node.runtime import shims
from trainyard.cluster.environments import EnvironmentsError
from trainyard.cluster.paths import Layout

log = logging.getLogger(__name__)

# How long a container waits between reads of a ConfigMap/Secret it needs but cannot have yet.
CONFIG_RETRY_SECONDS = 2.0
# Status writes and events in flight at once: a burst of pods must not queue hundreds of requests
# in the client's connection pool (they would time out there), and events must not delay statuses.
STATUS_WRITES = 16
# How long a pod's first Running status waits for a newer one (the kubelet notices a start on its
# next relist, up to a second later): a container done at once costs one status write, not two.
RUNNING_HOLD_SECONDS = 0.1
# The kubelet's graceful node shutdown (pkg/kubelet/nodeshutdown): what a pod it terminated says.
SHUTDOWN_REASON = "Terminated"
SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
SHUTDOWN_TARGET = {
    "type": "DisruptionTarget",
    "status": "True",
    "reason": "TerminationByKubelet",
    "message": SHUTDOWN_MESSAGE,
}


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
        labels: Mapping[str, str] | None = None,
        control_plane: bool = True,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
        metric_resolution: float = DEFAULT_RESOLUTION,
        dns: NodeDns | None = None,
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
        self.registration = Registration(
            client,
            self.node_name,
            home=layout.home,
            address=address,
            capacity=self.capacity,
            taints=self.taints,
            now=self.now,
            clock=clock,
            labels=labels,
            control_plane=control_plane,
            lease_seconds=lease_seconds,
        )
        self.events = PodEvents(client, self.node_name, self.now)
        self.pods: dict[str, PodRun] = {}
        self.stats = ResourceStats(self.node_name, lambda: self.pods.values(), resolution=metric_resolution)
        # Pods whose containers ended here for good: their runs (env, tasks, events, the pod as
        # taken) are dropped, 20,000 of them after a 10,000-job sweep, and an event of one queued
        # before it ended (still Running) must not be taken for a pod a previous agent started.
        self.ended: set[str] = set()
        self._changes: asyncio.Queue[tuple[str, Obj]] = asyncio.Queue()
        self.bound = BoundPods(client, self.node_name, lambda kind, pod: self._changes.put_nowait((kind, pod)))
        self.statuses = podstatus.PodStatuses(
            client, self.bound, address=address, now=self.now, concurrency=STATUS_WRITES
        )
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
            dns=dns,
        )
        self.probing = ProbeWiring(
            address,
            self.container_config,
            report=lambda run, pod: self.statuses.report(run, pod, "Running"),
            event=self.events.record,
            spawn=self._spawn,
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
        await self.registration.register()
        self._spawn(self.registration.heartbeat())
        self._spawn(self.registration.renew())
        self._spawn(self.stats.run())
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
        await self.close()

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await self.runtime.close()
        self.container_config.close()
        self.tokens.close()

    def power_off(self) -> None:
        """The machine stops at once (``yard node stop``): every process of its pods killed, nothing reported.

        The caller has already cut the agent off the API server (its writes cannot arrive, as a
        dead machine's cannot) and cancels its loop; the pods' objects stay as they were, for the
        node lifecycle controller to judge once the heartbeats are missed.
        """
        roots = []
        for run in list(self.pods.values()):
            run.stopping = True
            if run.task is not None:
                run.task.cancel()
            roots += [
                cr.process.pid
                for cr in run.init_containers + run.containers
                if cr.process is not None and cr.process.exit is None and cr.process.pid and cr.process.supervised()
            ]
            podexec.signal_sessions(run.exec_sessions, signal.SIGKILL)
        lifecycle.kill_trees(roots)
        for task in list(self._background):
            task.cancel()

    async def shut_down_node(self, grace: float) -> None:
        """The kubelet's graceful node shutdown: every pod's containers get SIGTERM, SIGKILL after the
        pod's grace period (at most ``grace``), and the pod is reported ``Failed`` with reason
        ``Terminated`` and a ``DisruptionTarget`` condition (``TerminationByKubelet``), in its words."""

        async def terminate(run: PodRun) -> None:
            pod = run.pod or {}
            own = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            run.shutdown = True
            await self._kill(run, min(grace, float(own if own is not None else grace)))

        await asyncio.gather(*(terminate(run) for run in list(self.pods.values())), return_exceptions=True)

    # -- level-triggered pod handling --------------------------------------------------------------

    async def _sync(self, kind: str, pod: Obj) -> None:
        m, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        uid = m["uid"]
        run = self.pods.get(uid)
        if kind == "DELETED":
            self.ended.discard(uid)
            if run is not None:
                await self._kill(run, 0)
            return
        node = spec.get("nodeName")
        if node != self.node_name:
            return
        if m.get("deletionTimestamp"):
            if run is None:
                # Processes a previous agent started may still run: they go before the pod does.
                run = adoption.leftovers(self.runtime, self.layout, pod)
                self.pods[run.uid] = run
            if not run.stopping:
                run.stopping = True
                self._spawn(self._stop_and_confirm(run, float(m.get("deletionGracePeriodSeconds") or 0)))
            return
        if run is not None or uid in self.ended:
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
        resumed = adoption.resume(self.runtime, self.layout, run, pod, self.now)
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
                    await self.statuses.report(run, pod, "Pending")
                await self._supervise(run, pod, container, cr, init_policy, "Pending")
                if cr.exit_code != 0 or run.stopping:
                    await self.statuses.report(run, pod, "Failed")
                    ended = True
                    return
            for container, cr in zip(spec.get("containers") or [], run.containers, strict=True):
                if not cr.has_run:
                    await self._start(run, pod, container, cr)
                elif cr.exit_code is None:
                    # Adopted from an earlier agent: probed afresh, unready until readiness passes (as a
                    # restarted kubelet does).
                    self.probing.start(run, pod, container, cr)
            # Not waited for, and held a moment: a container that ends first makes this write its
            # final status instead.
            await self.statuses.report(run, pod, "Running", wait=False, hold=RUNNING_HOLD_SECONDS)
            pending = [
                asyncio.create_task(self._supervise(run, pod, container, cr, policy, "Running"))
                for container, cr in zip(spec.get("containers") or [], run.containers, strict=True)
            ]
            for done in asyncio.as_completed(pending):
                await done
                if not all(cr.exit_code is not None for cr in run.containers):
                    await self.statuses.report(run, pod, "Running", wait=False)
            if run.shutdown:
                await self.statuses.report(
                    run, pod, "Failed", reason=SHUTDOWN_REASON, message=SHUTDOWN_MESSAGE, disruption=SHUTDOWN_TARGET
                )
            else:
                ok = all(cr.exit_code == 0 for cr in run.containers)
                await self.statuses.report(run, pod, "Succeeded" if ok else "Failed")
            ended = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("pod %s/%s could not run", run.namespace, run.name)
            await self.statuses.report(run, pod, "Failed", reason="StartError", message=str(exc))
            ended = True
        finally:
            if ended:  # its containers never run again
                self.container_config.release(run)
                self.tokens.forget(run.uid)
                if self.pods.get(run.uid) is run and not run.stopping:
                    self.ended.add(run.uid)
                    del self.pods[run.uid]
            run.stopped.set()

    async def _supervise(
        self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun, policy: str, phase: str
    ) -> None:
        """Wait for a started container and restart it in place for as long as ``policy`` says."""
        delay: float | None = None
        while True:
            await lifecycle.wait(cr)
            if cr.reason == "OOMKilled":
                self._spawn(self.events.record(pod, "Warning", "OOMKilled", f"Container {cr.name} {cr.message}"))
            if run.stopping or not restarts(policy, cr.exit_code):
                return
            delay = self.backoff.delay(delay, time.monotonic() - cr.started_mono)
            if delay > 0:
                m = pod["metadata"]
                target = f"{m['name']}_{m['namespace']}({m['uid']})"
                cr.restarted()
                cr.waiting = "CrashLoopBackOff"
                cr.message = f"back-off {go_duration(delay)} restarting failed container={cr.name} pod={target}"
                await self.statuses.report(run, pod, phase)
                await self.events.record(
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
            await self.statuses.report(run, pod, phase)

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
                        await self.events.record(pod, "Warning", allocation.reason, allocation.event)
                        await self.statuses.report(
                            run, pod, "Failed", reason=allocation.reason, message=allocation.message
                        )
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
                await self.statuses.report(run, pod, "Pending")
                if volume_error:
                    await self.events.record(pod, "Warning", "FailedMount", volume_error)
                else:
                    await self.events.record(pod, "Warning", "Failed", f"Error: {messages[0]}")
                reported = messages
            await asyncio.sleep(CONFIG_RETRY_SECONDS)
        return False

    async def _start(self, run: PodRun, pod: Obj, container: Obj, cr: ContainerRun) -> None:
        try:
            env, pulled, threads = self.container_config.start(run, pod, container)
        except (ConfigError, EnvironmentsError) as exc:
            # Checked before the first start; a restart after an environment or a ConfigMap went away
            # fails this run with the reason, and the restart policy retries.
            lifecycle.fail_start(cr, str(exc), self.now())
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
            # `stdin: true`: a FIFO that stays open for `kubectl attach` to write to (else /dev/null).
            "stdin": str(self.layout.container_stdin(run.namespace, run.name, run.uid, cr.name))
            if container.get("stdin")
            else None,
            "restartCount": cr.restart_count,
            "memoryLimit": qos.memory_limit(container),
            "cpuMillis": qos.cpu_limit_millis(container),
            "cgroup": f"{run.uid}_{cr.name}",
        }
        try:
            handle = await self.runtime.start(spec)
        except shims.ShimError as exc:
            lifecycle.fail_start(cr, str(exc), self.now())
            return
        if handle.exit is not None and handle.exit.reason == "StartError":
            lifecycle.fail_start(cr, handle.exit.message or "the container could not be started", self.now())
            return
        cr.process, cr.env = handle, env
        cr.started_at = lifecycle.stamp(handle.started_at)
        if run.stopping:
            handle.signal(signal.SIGKILL)
        self._spawn(self.events.started(pod, cr.name, pulled, threads))
        self.probing.start(run, pod, container, cr)

    # -- stopping ----------------------------------------------------------------------------------

    async def _kill(self, run: PodRun, grace: float) -> None:
        """Stop the pod's containers: SIGTERM to each process group, SIGKILL after ``grace``; return once gone."""
        run.stopping = True
        run.wake.set()
        groups = [cr.process for cr in run.init_containers + run.containers if cr.process and cr.process.exit is None]
        sessions = asyncio.ensure_future(podexec.stop_sessions(run.exec_sessions, grace))  # exec'd: the pod's too
        await lifecycle.stop_groups(groups, grace)
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
