"""The node and disruption controllers of kube-controller-manager, as one component of the plane.

One Node informer (cluster-wide) is shared by the node lifecycle controller, the taint eviction
controller and PodGC, as kube-controller-manager's shared informer factory shares one; the pod
informer is the plane's (its owner runs it). The disruption controller runs beside them.
Settings come from the plane's environment (``settings.from_env``: ``yard up``'s flags).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.cluster.clients.disruption.controller import DisruptionController
from trainyard.cluster.clients.nodelifecycle import settings as node_settings
from trainyard.cluster.clients.nodelifecycle.eviction import TaintEvictionController
from trainyard.cluster.clients.nodelifecycle.gc import PodGC
from trainyard.cluster.clients.nodelifecycle.lifecycle import NODE, NodeLifecycleController
from trainyard.cluster.tasks import cancel_all
from trainyard.kit.informer import Informer


class NodeControllers:
    def __init__(
        self,
        client: AsyncClient,
        pods: Informer,
        *,
        settings: node_settings.Settings | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        chosen = settings or node_settings.from_env()
        self.nodes = Informer(client, NODE, namespaced=False)
        self.lifecycle = NodeLifecycleController(client, self.nodes, pods, settings=chosen, clock=clock)
        self.eviction = TaintEvictionController(client, self.nodes, pods, clock=clock)
        self.podgc = PodGC(client, self.nodes, pods, settings=chosen, clock=clock)
        self.disruption = DisruptionController(client, pods, clock=clock)

    async def run(self) -> None:
        tasks = [
            self.nodes.start("node controllers informer nodes"),
            asyncio.create_task(self.lifecycle.run(), name="node lifecycle controller"),
            asyncio.create_task(self.eviction.run(), name="taint eviction controller"),
            asyncio.create_task(self.podgc.run(), name="pod garbage collector"),
            asyncio.create_task(self.disruption.run(), name="disruption controller"),
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            await cancel_all(tasks)
