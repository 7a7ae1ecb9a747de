"""The replica calculation of kube-controller-manager v1.32's HPA: ratio, tolerance, pods that
count, conservative filling of missing and unready pods, Object/External value and average targets."""

from __future__ import annotations

from decimal import Decimal

import pytest

from trainyard.cluster.clients.autoscaler import replicas
from trainyard.cluster.clients.autoscaler.replicas import MetricError, PodState


def running(*names: str, request: int | None = 1000, ready: bool = True) -> list[PodState]:
    req = Decimal(request) if request is not None else None
    return [PodState(n, "Running", ready, request=req) for n in names]


def milli(**values: int) -> dict[str, Decimal]:
    return {k: Decimal(v) for k, v in values.items()}


def test_cpu_utilization_scales_by_the_ratio_of_usage_to_requests() -> None:
    # 2 pods at 90% of their 1-core request, target 50%: ceil(1.8 * 2) = 4
    count, utilization, raw = replicas.per_pod_replicas(
        2, milli(a=900, b=900), running("a", "b"), utilization=50, cpu=True
    )
    assert (count, utilization, raw) == (4, 90, Decimal(900))


def test_a_ratio_within_the_tolerance_keeps_the_count() -> None:
    count, utilization, _ = replicas.per_pod_replicas(
        3, milli(a=540, b=520, c=530), running("a", "b", "c"), utilization=50
    )
    assert (count, utilization) == (3, 53)


def test_missing_pods_count_at_the_target_when_scaling_down() -> None:
    # a and b at 10% of 50%: alone that is 1 replica; c (no metric yet) counts at 100% of its request
    count, _, _ = replicas.per_pod_replicas(3, milli(a=100, b=100), running("a", "b", "c"), utilization=50, cpu=True)
    assert count == 3  # (100+100+1000)/3000 = 40% → 0.8 ratio → ceil(2.4) = 3


def test_unready_pods_count_at_zero_when_scaling_up() -> None:
    pods = running("a", "b") + running("c", ready=False)
    count, _, _ = replicas.per_pod_replicas(3, milli(a=1000, b=1000, c=0), pods, utilization=50, cpu=True)
    assert count == 4  # 2000/3000 = 66% → 1.33 → ceil(4.0) = 4


def test_pending_deleted_and_failed_pods_do_not_count() -> None:
    pods = [
        PodState("a", "Running", True, request=Decimal(1000)),
        PodState("b", "Pending", False, request=Decimal(1000)),
        PodState("c", "Failed", False, request=Decimal(1000)),
        PodState("d", "Running", True, deleting=True, request=Decimal(1000)),
    ]
    _, unready, missing, ignored = replicas.group(pods, milli(a=1), cpu=False)
    assert (unready, missing, ignored) == ({"b"}, set(), {"c", "d"})


def test_pods_metric_average_value() -> None:
    count, _, raw = replicas.per_pod_replicas(2, milli(a=30_000, b=10_000), running("a", "b"), average=Decimal(10_000))
    assert (count, raw) == (4, Decimal(20_000))


def test_no_requests_and_no_pods_are_errors_in_upstream_words() -> None:
    with pytest.raises(MetricError, match="missing request for cpu"):
        replicas.per_pod_replicas(1, milli(a=5), running("a", request=None), utilization=50)
    with pytest.raises(MetricError, match="no pods returned by selector while calculating replica count"):
        replicas.per_pod_replicas(1, {}, [], utilization=50)
    with pytest.raises(MetricError, match="did not receive metrics for targeted pods"):
        replicas.per_pod_replicas(1, {}, running("a", ready=False), utilization=50, cpu=True)


def test_object_value_scales_the_ready_pods() -> None:
    pods = [*running("a", "b"), PodState("c", "Pending", False)]
    assert replicas.ratio_replicas(3, 2.0, pods) == 4  # 2 ready pods x 2
    assert replicas.ratio_replicas(3, 1.05, pods) == 3
    assert replicas.ratio_replicas(0, 2.5, []) == 3


def test_average_value_is_the_value_over_the_per_pod_target() -> None:
    assert replicas.average_replicas(2, Decimal(25_000), Decimal(10_000)) == (3, Decimal(12_500))
    assert replicas.average_replicas(3, Decimal(15_000), Decimal(10_000)) == (2, Decimal(5_000))
    assert replicas.average_replicas(2, Decimal(20_500), Decimal(10_000))[0] == 2  # within 10%
