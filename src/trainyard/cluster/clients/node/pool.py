"""The plane's nodes: one node agent per ``NodeSpec``, and the simulated cloud's machines under them.

The embedded plane runs every node in its process. ``NodePool`` boots an agent per node, each
with an API client of its own behind a ``Link`` (the machine's network: cut when it stops, so
nothing a stopped agent was still doing reaches the cluster). Pods of different nodes are all
local processes; each node accounts, starts and kills its own.

It is a controller of the kit's kind: an informer on the Nodes enqueues node names, ``reconcile``
asks ``machines.plan`` what the node's annotations ask (``yard node stop|start|preempt``) and
applies it:

* **power off**: the link is cut, the agent's loop cancelled and every process of its pods
  killed (``NodeAgent.power_off``); its Node and pods stay as they were, and the node lifecycle
  controller judges the missed heartbeats. **Power on**: a new agent boots, registers again and
  takes over the pods still bound to it (their containers died with the machine), as a rebooted
  kubelet does.
* **spot notice**: the ``trainyard.dev/spot-interruption:NoSchedule`` taint, the
  ``SpotInterruption`` condition and a Warning event on the Node at once; **reclaim** at the
  deadline: the kubelet's graceful node shutdown of its pods (``NodeAgent.shut_down_node``), then
  the agent stops and the Node is deleted (its Lease, which it owns, goes with it). Pods still
  bound to it are the pod garbage collector's.

Level-triggered: a plane started again finds the annotations on its Nodes and acts on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.meta import Obj, format_time
from trainyard.client.events import record_event
from trainyard.client.resources import global_resource, to_dict
from trainyard.cluster.clients.node import machines, podexec
from trainyard.cluster.clients.node.agent import NodeAgent
from trainyard.cluster.clients.node.link import Link
from trainyard.cluster.clients.node.nodespec import NodeSpec
from trainyard.cluster.tasks import cancel_all
from trainyard.kit.informer import Caches, Informer
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

log = logging.getLogger(__name__)

NODE = global_resource("", "v1", "Node", "nodes")
COMPONENT = "trainyard-cloud"


@dataclass
class Machine:
    """One node's machine: the agent running on it (None while it is off) and its link."""

    spec: NodeSpec
    agent: NodeAgent | None = None
    link: Link | None = None
    client: AsyncClient | None = None
    task: asyncio.Task[None] | None = None
    reclaimed: bool = False


class NodePool:
    def __init__(
        self,
        specs: tuple[NodeSpec, ...],
        *,
        client: AsyncClient,
        connect: Callable[[], AsyncClient],
        make_agent: Callable[[NodeSpec, AsyncClient], NodeAgent],
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.connect = connect
        self.make_agent = make_agent
        self.clock = clock
        self.machines = {spec.name: Machine(spec) for spec in specs}
        self.queue: WorkQueue[str] = WorkQueue()
        self.nodes = Informer(client, NODE, self._on_node, namespaced=False)
        self.caches = Caches(COMPONENT)

    @property
    def first(self) -> NodeAgent:
        """The first node's agent, as booted (the one ``yard status`` and the state file name first)."""
        agent = next(iter(self.machines.values())).agent
        assert agent is not None, "the pool has not booted"
        return agent

    def agents(self) -> Iterator[NodeAgent]:
        """The agents of the machines that run now."""
        return (m.agent for m in self.machines.values() if m.agent is not None)

    # -- machines ------------------------------------------------------------------------------------

    def boot(self) -> None:
        """Start every node's agent (each registers its Node as it starts)."""
        for name in self.machines:
            self._power_on(name)

    def _power_on(self, name: str) -> None:
        machine = self.machines[name]
        link = Link(name)
        client = link.attach(self.connect())
        agent = self.make_agent(machine.spec, client)
        machine.agent, machine.link, machine.client = agent, link, client
        machine.task = asyncio.create_task(agent.run(), name=f"node {name}")

    async def _power_off(self, name: str) -> None:
        machine = self.machines[name]
        if machine.agent is None:
            return
        log.info("node %s: powered off", name)
        assert machine.link is not None
        machine.link.cut()
        machine.agent.power_off()
        await self._stop_agent(machine)

    async def _stop_agent(self, machine: Machine) -> None:
        agent, task, client = machine.agent, machine.task, machine.client
        machine.agent = machine.task = machine.client = None
        if task is not None:
            await cancel_all([task])
        if agent is not None:
            await agent.close()
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _reclaim(self, name: str) -> None:
        machine = self.machines[name]
        machine.reclaimed = True
        if machine.agent is not None:
            log.info("node %s: reclaimed (spot interruption): terminating its pods", name)
            await machine.agent.shut_down_node(machines.RECLAIM_GRACE_SECONDS)
            assert machine.link is not None
            machine.link.cut()
            await self._stop_agent(machine)
        with contextlib.suppress(ApiError):
            await self.client.delete(NODE, name)

    async def shutdown(self, grace: float) -> None:
        """``yard down``: every node stops its pods (SIGTERM, SIGKILL after ``grace``) and its agent."""

        async def stop(machine: Machine) -> None:
            if machine.task is not None:
                await cancel_all([machine.task])
                machine.task = None
            if machine.agent is not None:
                await machine.agent.shutdown(grace)
            if machine.client is not None:
                with contextlib.suppress(Exception):
                    await machine.client.close()

        await asyncio.gather(*(stop(m) for m in self.machines.values()), return_exceptions=True)

    # -- the controller ------------------------------------------------------------------------------

    def _on_node(self, _: str, obj: Obj) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        if name in self.machines:
            self.queue.add(name)

    async def run(self) -> None:
        await self.caches.sync({"nodes": self.nodes})
        try:
            await work(self.queue, self.reconcile, name=COMPONENT)
        finally:
            self.queue.close()
            await cancel_all(list(self.caches.tasks.values()))

    async def reconcile(self, name: str) -> float | None:
        machine = self.machines[name]
        node = self.nodes.get("", name)
        if node is None:
            return None  # not registered yet, or deleted: a running agent registers it again
        decided = machines.plan(node, self.clock(), running=machine.agent is not None, reclaimed=machine.reclaimed)
        if decided.problem:
            await self._event(node, "Warning", "InvalidAnnotation", decided.problem)
        if decided.reclaim:
            await self._reclaim(name)
            return None
        if decided.power_off:
            await self._power_off(name)
        elif decided.power_on:
            log.info("node %s: powered on", name)
            self._power_on(name)
        if decided.notice is not None:
            await self._notice(node, decided.notice["at"])
        return decided.requeue

    async def _notice(self, node: Obj, at: datetime) -> None:
        name = node["metadata"]["name"]
        now = self.clock()
        notice = _seconds((at - now).total_seconds())
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != machines.SPOT_TAINT["key"]]
        taints.append({**machines.SPOT_TAINT, "timeAdded": format_time(now)})
        await self.client.patch(NODE, name, {"spec": {"taints": taints}}, patch_type=PatchType.MERGE)
        current = to_dict(await self.client.get(NODE, name))
        conditions = [
            c for c in (current.get("status") or {}).get("conditions") or [] if c.get("type") != machines.SPOT_CONDITION
        ]
        conditions.append(machines.notice_condition(at, format_time(now), notice))
        await self.client.patch(NODE.Status, name, {"status": {"conditions": conditions}}, patch_type=PatchType.MERGE)
        await self._event(
            node,
            "Warning",
            machines.SPOT_CONDITION,
            f"Node {name} is a spot instance being reclaimed: its pods are terminated at {format_time(at)} "
            f"(in {notice}) and the node is removed",
        )

    async def _event(self, node: Obj, type_: str, reason: str, message: str) -> None:
        name = node["metadata"]["name"]
        involved = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": node["metadata"].get("uid", name)}
        await record_event(
            self.client, involved, type_=type_, reason=reason, message=message, component=COMPONENT, now=self.now()
        )

    def now(self) -> str:
        return format_time(self.clock())

    # -- exec into pods, whichever node runs them ----------------------------------------------------

    def exec_target(self, request: podexec.Request) -> podexec.Target:
        """Where an exec request runs: the pod it names, on the node that runs it."""
        holders = [
            agent
            for agent in self.agents()
            if podexec.select(request, (run.pod for run in agent.pods.values() if run.pod))
        ]
        if len(holders) > 1:
            names = ", ".join(a.node_name for a in holders)
            raise podexec.Refused(
                f"ssh: {request.host} names pods on several nodes ({names}): add <subdomain>.<namespace>"
            )
        if not holders:
            raise podexec.Refused(podexec.not_found(request))
        agent = holders[0]
        return agent.container_config.exec_target(agent.pods, agent.runtime, request)


def _seconds(value: float) -> str:
    return f"{max(0, round(value))}s"
