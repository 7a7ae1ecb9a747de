"""The operator's Prometheus metrics: upstream's job counters, reconcile timing, queue depth, leadership.

The job counters keep upstream's names and labels (reference §11) but count each job event once:
they are derived from the condition transitions that a status write the operator actually made
carried (a condition that was not True before the write and is True after it). So an operator
restart does not count every existing job as created again (upstream does), a retried status
write does not count twice, and every path to Failed counts (upstream counts only one of them).

The rest use the names controller-runtime and client-go expose, so dashboards built for the
upstream operator keep working: ``controller_runtime_reconcile_total``/``_errors_total``/
``_time_seconds``, ``workqueue_depth``, ``leader_election_master_status``.

Each ``OperatorMetrics`` has its own registry (no process globals), served by ``exposition``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from trainyard.api.kinds import framework_label

# Counters are exposed as ``<name>_total`` only, as Go's client does; no ``_created`` series.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST

# Condition that became True in a written status → the counter it moves.
_TRANSITIONS = {"Created": "created", "Succeeded": "successful", "Failed": "failed", "Restarting": "restarted"}


def true_conditions(status: Mapping[str, Any] | None) -> set[str]:
    """Types of the conditions that are True in a status (a job's ``status`` as JSON)."""
    conditions = (status or {}).get("conditions") or []
    return {str(c.get("type")) for c in conditions if isinstance(c, dict) and c.get("status") == "True"}


class _QueueDepth(Collector):
    """``workqueue_depth{name}`` read from the live queues at scrape time."""

    def __init__(self) -> None:
        self.queues: dict[str, Callable[[], int]] = {}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("workqueue_depth", "Current depth of workqueue", labels=["name"])
        for name, depth in sorted(self.queues.items()):
            family.add_metric([name], float(depth()))
        yield family


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        job_labels = ["job_namespace", "framework"]
        self._jobs = {
            event: Counter(
                f"training_operator_jobs_{event}",
                f"Counts number of jobs {event}",
                job_labels,
                registry=self.registry,
            )
            for event in ("created", "deleted", "successful", "failed", "restarted")
        }
        self.reconcile_total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0),
            registry=self.registry,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=self.registry,
        )
        self._depth = _QueueDepth()
        self.registry.register(self._depth)

    # -- job events ------------------------------------------------------------------------------

    def status_written(
        self, kind: str, namespace: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]
    ) -> None:
        """Count the job events a status write made: conditions it turned True."""
        became_true = true_conditions(after) - true_conditions(before)
        for ctype in sorted(became_true):
            event = _TRANSITIONS.get(ctype)
            if event is not None:
                self._jobs[event].labels(namespace, framework_label(kind)).inc()

    def job_deleted(self, kind: str, namespace: str) -> None:
        """The operator deleted a finished job (``ttlSecondsAfterFinished``)."""
        self._jobs["deleted"].labels(namespace, framework_label(kind)).inc()

    # -- the controllers -------------------------------------------------------------------------

    def reconciled(self, controller: str, seconds: float, result: str) -> None:
        """One reconcile: ``result`` is ``success``, ``error``, ``requeue_after``."""
        self.reconcile_time.labels(controller).observe(seconds)
        self.reconcile_total.labels(controller, result).inc()
        if result == "error":
            self.reconcile_errors.labels(controller).inc()

    def watch_queue(self, name: str, depth: Callable[[], int]) -> None:
        self._depth.queues[name] = depth

    def leading(self, lease: str, value: bool) -> None:
        self.leader.labels(lease).set(1 if value else 0)

    def exposition(self) -> bytes:
        return bytes(prometheus_client.generate_latest(self.registry))
