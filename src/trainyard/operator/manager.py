"""The operator process: a controller per framework kind, one for TrainJobs and one for TrainingJobs, sharing client,
ports, metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from lightkube import AsyncClient

from trainyard.api import trainer, trainingjob
from trainyard.controller.trainjob import TrainJobSettings
from trainyard.frameworks.registry import kinds, plugin_for
from trainyard.informer import SharedInformers
from trainyard.operator.controller import JobController
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.ports import PortAllocator
from trainyard.operator.settings import OperatorSettings
from trainyard.operator.trainingjobs import TrainingJobController
from trainyard.operator.trainjobs import TrainJobController

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
        # One informer per resource for all the controllers below (every job kind's PodGroups, the
        # jobs a TrainingJob owns), as controller-runtime's manager shares one cache.
        informers = SharedInformers(client)
        # The v1 jobs' replicas report progress to the same status server, on its second route.
        v1 = replace(settings, controller=replace(settings.controller, progress_server=settings.trainer_status))
        self.controllers = [
            JobController(
                client,
                plugin_for(kind),
                v1,
                ports=shared_ports,
                clock=clock,
                metrics=self.metrics,
                may_write=may_write,
                informers=informers,
            )
            for kind in enabled
        ]
        self.trainjobs: TrainJobController | None = None
        if not settings.kinds or trainer.TRAINJOB in settings.kinds:
            self.trainjobs = TrainJobController(
                client,
                TrainJobSettings(
                    settings.controller.network_mode,
                    settings.controller.node_address,
                    status_server=settings.trainer_status,
                ),
                namespace=settings.namespace,
                workers=settings.workers,
                ports=shared_ports,
                clock=clock,
                metrics=self.metrics,
                may_write=may_write,
            )
        self.trainingjobs: TrainingJobController | None = None
        if not settings.kinds or trainingjob.KIND in settings.kinds:
            self.trainingjobs = TrainingJobController(
                client,
                namespace=settings.namespace,
                workers=settings.workers,
                clock=clock,
                metrics=self.metrics,
                may_write=may_write,
                informers=informers,
            )

    async def run(self) -> None:
        log.info(
            "operator running: kinds=%s network=%s namespace=%s",
            ",".join(
                [
                    *(c.plugin.info.kind for c in self.controllers),
                    *([trainer.TRAINJOB] if self.trainjobs else []),
                    *([trainingjob.KIND] if self.trainingjobs else []),
                ]
            ),
            self.settings.controller.network_mode.value,
            self.settings.namespace,
        )
        # Every controller shares the port allocator: all existing jobs' ports are held before
        # any controller's worker may allocate.
        trainjobs = [self.trainjobs] if self.trainjobs is not None else []
        await asyncio.gather(*(c.prime() for c in self.controllers), *(t.prime() for t in trainjobs))
        trainingjobs = [self.trainingjobs] if self.trainingjobs is not None else []
        await asyncio.gather(
            *(c.run() for c in self.controllers),
            *(t.start() for t in trainjobs),
            *(t.start() for t in trainingjobs),
        )
