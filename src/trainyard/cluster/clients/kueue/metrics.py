"""Kueue's queue metrics (Kueue's ``pkg/metrics`` names and labels), from the controller's last decision.

``kueue_pending_workloads{cluster_queue, status}`` (``active``: in line; ``inadmissible``: waiting
on something quota cannot give, a missing queue or selector), ``kueue_reserving_active_workloads``
and ``kueue_admitted_active_workloads{cluster_queue}``, and per flavor and resource
``kueue_cluster_queue_resource_reservation`` and ``kueue_cluster_queue_nominal_quota``
``{cohort, cluster_queue, flavor, resource}``, served on the plane's ``/metrics`` beside the
operator's. Read when scraped, never kept per workload.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from trainyard.api import kueue
from trainyard.api.kueue.admission import Config, Decision, cohort_of
from trainyard.api.kueue.books import nominal_quotas
from trainyard.api.kueue.workloads import amount


class QueueMetrics(Collector):
    def __init__(self) -> None:
        self.config: Config | None = None
        self.decision = Decision()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def observe(self, config: Config, decision: Decision) -> None:
        self.config, self.decision = config, decision

    def exposition(self) -> bytes:
        return bytes(generate_latest(self.registry))

    def collect(self) -> Iterator[Metric]:
        config = self.config
        pending = GaugeMetricFamily(
            "kueue_pending_workloads",
            "The number of pending workloads, per cluster_queue and status",
            labels=["cluster_queue", "status"],
        )
        reserving = GaugeMetricFamily(
            "kueue_reserving_active_workloads",
            "The number of Workloads that are reserving quota, per cluster_queue",
            labels=["cluster_queue"],
        )
        admitted = GaugeMetricFamily(
            "kueue_admitted_active_workloads",
            "The number of admitted Workloads that are active, per cluster_queue",
            labels=["cluster_queue"],
        )
        labels = ["cohort", "cluster_queue", "flavor", "resource"]
        reservation = GaugeMetricFamily(
            "kueue_cluster_queue_resource_reservation", "Reserved quantity of a resource, per flavor", labels=labels
        )
        nominal = GaugeMetricFamily(
            "kueue_cluster_queue_nominal_quota", "Nominal quota of a resource, per flavor", labels=labels
        )
        if config is not None:
            inadmissible: dict[str, int] = {}
            for waiting in self.decision.waiting:
                if waiting.reason == kueue.INADMISSIBLE and waiting.cluster_queue:
                    inadmissible[waiting.cluster_queue] = inadmissible.get(waiting.cluster_queue, 0) + 1
            for name, status in sorted(self.decision.cluster_queue_status.items()):
                cq = config.cluster_queues.get(name) or {}
                held = inadmissible.get(name, 0)
                pending.add_metric([name, "active"], status.get("pendingWorkloads", 0) - held)
                pending.add_metric([name, "inadmissible"], held)
                reserving.add_metric([name], status.get("reservingWorkloads", 0))
                admitted.add_metric([name], status.get("admittedWorkloads", 0))
                cohort = cohort_of(cq)
                for flavor in status.get("flavorsReservation") or []:
                    for res in flavor.get("resources") or []:
                        reservation.add_metric(
                            [cohort, name, flavor["name"], res["name"]], float(amount(res.get("total")))
                        )
                for (flavor_name, resource), quota in nominal_quotas(cq).items():
                    nominal.add_metric([cohort, name, flavor_name, resource], float(quota))
        yield from (pending, reserving, admitted, reservation, nominal)
