"""The operator process: one controller per framework kind, sharing a client and a port allocator."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.frameworks.registry import kinds, plugin_for
from trainyard.operator.controller import JobController
from trainyard.operator.ports import PortAllocator
from trainyard.operator.settings import OperatorSettings

log = logging.getLogger(__name__)


class Operator:
    def __init__(
        self,
        client: AsyncClient,
        settings: OperatorSettings,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        ports: PortAllocator | None = None,
    ) -> None:
        self.settings = settings
        shared_ports = ports or PortAllocator(host=settings.controller.node_address)
        self.controllers = [
            JobController(client, plugin_for(kind), settings, ports=shared_ports, clock=clock) for kind in kinds()
        ]

    async def run(self) -> None:
        log.info(
            "operator running: kinds=%s network=%s namespace=%s",
            ",".join(c.plugin.info.kind for c in self.controllers),
            self.settings.controller.network_mode.value,
            self.settings.namespace,
        )
        await asyncio.gather(*(c.run() for c in self.controllers))
