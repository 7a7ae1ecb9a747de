"""This node's ``Node`` object and its ``Lease``, kept as a kubelet keeps them: registered, then heartbeated.

``register`` creates the Node (labels, taints and capacity from ``yard up``, through
``nodestatus.manifest``) or, when it exists already, sets again what ``yard up`` declares on it;
then it writes the status. ``heartbeat`` re-measures the node's conditions (disk pressure from
``capacity.pressure``) and writes its status every ``HEARTBEAT_SECONDS``, and registers the
node again if someone deleted its Node. ``renew`` keeps the node's Lease
(``kube-node-lease/<node>``, owned by the Node) as the kubelet's node lease controller does:
renewed every quarter of its ``leaseDurationSeconds`` (the kubelet's ``nodeLeaseDurationSeconds``,
40 by default), the heartbeat the node lifecycle controller watches.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node
from lightkube.types import PatchType

from trainyard.api.meta import Obj, format_micro_time
from trainyard.client.resources import build, is_status
from trainyard.cluster.clients.node import capacity as node_capacity
from trainyard.cluster.clients.node import nodestatus

log = logging.getLogger(__name__)

# How often the Node's conditions are re-measured and its heartbeat written (the kubelet's
# nodeStatusUpdateFrequency).
HEARTBEAT_SECONDS = 10.0
LEASE_NAMESPACE = "kube-node-lease"
DEFAULT_LEASE_SECONDS = 40  # the kubelet's nodeLeaseDurationSeconds


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
        clock: Callable[[], datetime],
        labels: Mapping[str, str] | None = None,
        control_plane: bool = True,
        lease_seconds: int = DEFAULT_LEASE_SECONDS,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.home = home
        self.address = address
        self.capacity = capacity
        self.taints = taints
        self.now = now
        self.clock = clock
        self.labels = dict(labels or {})
        self.control_plane = control_plane
        self.lease_seconds = lease_seconds
        self.uid = ""  # the Node's, which owns its Lease

    async def register(self) -> None:
        """Create or refresh this node's Node: labels and taints from ``yard up``, then its status."""
        uname = os.uname()
        wanted = nodestatus.manifest(
            self.node_name,
            machine=uname.machine,
            capacity=self.capacity,
            taints=self.taints,
            extra_labels=self.labels,
            control_plane=self.control_plane,
        )
        try:
            created = await self.client.create(build(Node, wanted))
            self.uid = created.metadata.uid if created.metadata and created.metadata.uid else ""
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
            patched = await self.client.patch(Node, self.node_name, patch, patch_type=PatchType.MERGE)
            self.uid = patched.metadata.uid if patched.metadata and patched.metadata.uid else ""
        await self.write_status()
        await self.write_lease()

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

    def lease(self) -> Obj:
        owner = {"apiVersion": "v1", "kind": "Node", "name": self.node_name, "uid": self.uid}
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {
                "name": self.node_name,
                "namespace": LEASE_NAMESPACE,
                "ownerReferences": [owner] if self.uid else [],
            },
            "spec": {
                "holderIdentity": self.node_name,
                "leaseDurationSeconds": self.lease_seconds,
                "renewTime": format_micro_time(self.clock()),
            },
        }

    async def write_lease(self) -> None:
        """Renew the node's Lease, creating it (owned by the Node) when it is not there."""
        wanted = self.lease()
        try:
            await self.client.patch(
                Lease, self.node_name, {"spec": wanted["spec"]}, namespace=LEASE_NAMESPACE, patch_type=PatchType.MERGE
            )
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            await self.client.create(build(Lease, wanted))

    async def renew(self) -> None:
        """The node lease controller's loop: a renewal every quarter of the lease's duration."""
        while True:
            await asyncio.sleep(self.lease_seconds / 4)
            try:
                await self.write_lease()
            except Exception as exc:
                log.warning("node %s: lease not renewed: %s", self.node_name, exc)

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
