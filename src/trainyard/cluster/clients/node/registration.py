"""This node's ``Node`` object, kept as a kubelet keeps it: registered, then heartbeated.

``register`` creates the Node (labels, taints and capacity from ``yard up``, through
``nodestatus.manifest``) or, when it exists already, sets again what ``yard up`` declares on it;
then it writes the status. ``heartbeat`` re-measures the node's conditions (disk pressure from
``capacity.pressure``) and writes its status every ``HEARTBEAT_SECONDS``, and registers the
node again if someone deleted its Node.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from pathlib import Path

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from trainyard.api.meta import Obj
from trainyard.client.resources import build, is_status
from trainyard.cluster.clients.node import capacity as node_capacity
from trainyard.cluster.clients.node import nodestatus

log = logging.getLogger(__name__)

# How often the Node's conditions are re-measured and its heartbeat written (the kubelet's
# nodeStatusUpdateFrequency).
HEARTBEAT_SECONDS = 10.0


class Registration:
    def __init__(
        self,
        client: AsyncClient,
        node_name: str,
        *,
        home: Path,
        address: str,
        capacity: node_capacity.Capacity,
        taints: list[Obj],
        now: Callable[[], str],
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.home = home
        self.address = address
        self.capacity = capacity
        self.taints = taints
        self.now = now

    async def register(self) -> None:
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
        await self.write_status()

    async def write_status(self) -> None:
        current = await self.client.get(Node, self.node_name)
        previous = [c.to_dict() for c in (current.status.conditions if current.status else None) or []]
        pressure = node_capacity.pressure(self.home)
        uname = os.uname()
        status = nodestatus.status(
            self.node_name,
            capacity=self.capacity,
            address=self.address,
            conditions=nodestatus.conditions(previous, pressure, self.now()),
            uname=(uname.sysname, uname.release, uname.machine),
        )
        await self.client.patch(Node.Status, self.node_name, {"status": status}, patch_type=PatchType.MERGE)

    async def heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self.write_status()
            except ApiError as exc:
                if not is_status(exc, 404):
                    log.warning("node heartbeat failed: %s", exc)
                    continue
                await self.register()  # someone deleted the Node: register again, as a kubelet does
            except Exception:
                log.exception("node heartbeat failed")
