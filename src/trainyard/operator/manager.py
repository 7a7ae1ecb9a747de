"""The operator process: every job family's controllers (``operator.families``), sharing client, ports, metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.kit.informer import SharedInformers
from trainyard.operator.families import Running, Wiring, rows
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
        wiring = Wiring(
            client=client,
            settings=settings,
            clock=clock,
            ports=ports or PortAllocator(low=low, high=high, host=settings.controller.node_address),
            metrics=self.metrics,
            may_write=may_write,
            informers=SharedInformers(client),
        )
        self.controllers: list[Running] = []
        for _name, kinds, family in rows():
            enabled = tuple(k for k in kinds if not settings.kinds or k in settings.kinds)
            if enabled:
                self.controllers += family.controllers(wiring, enabled)

    async def run(self) -> None:
        log.info(
            "operator running: kinds=%s network=%s namespace=%s",
            ",".join(c.kind for c in self.controllers),
            self.settings.controller.network_mode.value,
            self.settings.namespace,
        )
        # Every controller shares the port allocator: all existing jobs' ports are held before
        # any controller's worker may allocate.
        await asyncio.gather(*(c.prime() for c in self.controllers))
        await asyncio.gather(*(c.run() for c in self.controllers))
