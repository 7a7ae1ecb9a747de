"""The operator process: one controller per framework kind, sharing a client, ports and metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.frameworks.registry import kinds, plugin_for
from trainyard.operator.controller import JobController
from trainyard.operator.metrics import OperatorMetrics
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
        metrics: OperatorMetrics | None = None,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.settings = settings
        self.metrics = metrics or OperatorMetrics()
        low, high = settings.host_ports
        shared_ports = ports or PortAllocator(low=low, high=high, host=settings.controller.node_address)
        enabled = [k for k in kinds() if not settings.kinds or k in settings.kinds]
        self.controllers = [
            JobController(
                client,
                plugin_for(kind),
                settings,
                ports=shared_ports,
                clock=clock,
                metrics=self.metrics,
                may_write=may_write,
            )
            for kind in enabled
        ]

    async def run(self) -> None:
        log.info(
            "operator running: kinds=%s network=%s namespace=%s",
            ",".join(c.plugin.info.kind for c in self.controllers),
            self.settings.controller.network_mode.value,
            self.settings.namespace,
        )
        # Every controller shares the port allocator: all existing jobs' ports are held before
        # any controller's worker may allocate.
        await asyncio.gather(*(c.prime() for c in self.controllers))
        await asyncio.gather(*(c.run() for c in self.controllers))
