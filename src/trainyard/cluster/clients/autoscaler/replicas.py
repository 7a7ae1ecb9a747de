"""How many replicas a metric asks for: kube-controller-manager v1.32's ``ReplicaCalculator``.

The ratio of the current value to the target, applied to the pods that count, with a tolerance
(0.1: a ratio within 10% of 1 keeps the current count). Per-pod metrics (Resource, Pods) sort the
target's pods as upstream does: deleted or failed pods are ignored, pending ones (and, for CPU,
ones not Ready) are unready, pods without a metric are missing. When pods are missing or unready
and the first estimate would move the count, they are counted conservatively (a missing pod at the
target when scaling down, at 0 when scaling up; an unready one at 0 when scaling up) and the move
is made only if the ratio still points the same way. Object and External metrics with a
``Value`` target scale the ready pods by the ratio; with an ``AverageValue`` target the count is
the value over the per-pod target.

Pure: values in, counts out; ``MetricError`` carries upstream's wording of what went wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

TOLERANCE = 0.1


class MetricError(Exception):
    """A metric that gives no count (its message is the one the HPA's condition and events show)."""


@dataclass(frozen=True)
class PodState:
    name: str
    phase: str
    ready: bool
    deleting: bool = False
    # Sum over the pod's containers of the resource's request (millicores or bytes), None: a container has none.
    request: Decimal | None = None


def _within(ratio: float, tolerance: float) -> bool:
    return abs(1.0 - ratio) <= tolerance


def group(
    pods: Sequence[PodState], metrics: Mapping[str, Decimal], *, cpu: bool
) -> tuple[int, set[str], set[str], set[str]]:
    """(ready count, unready, missing, ignored) as upstream's ``groupPods``."""
    ready, unready, missing, ignored = 0, set(), set(), set()
    for pod in pods:
        if pod.deleting or pod.phase == "Failed":
            ignored.add(pod.name)
        elif pod.phase == "Pending":
            unready.add(pod.name)
        elif pod.name not in metrics:
            missing.add(pod.name)
        elif cpu and not pod.ready:
            unready.add(pod.name)
        else:
            ready += 1
    return ready, unready, missing, ignored


def _utilization(
    metrics: Mapping[str, Decimal], pods: Mapping[str, PodState], target: int
) -> tuple[float, int, Decimal]:
    total = request = Decimal(0)
    for name, value in metrics.items():
        pod = pods.get(name)
        if pod is None:
            continue
        if pod.request is None:
            raise MetricError(f"missing request for cpu in a container of Pod {name}")
        total += value
        request += pod.request
    if request == 0:
        raise MetricError("no metrics returned matched known pods")
    utilization = int(total * 100 / request)
    return utilization / target, utilization, total / len(metrics)


def _average(metrics: Mapping[str, Decimal], target: Decimal) -> tuple[float, Decimal]:
    average = sum(metrics.values(), Decimal(0)) / len(metrics)
    return float(average / target), average


def per_pod_replicas(
    current: int,
    metrics: Mapping[str, Decimal],
    pods: Sequence[PodState],
    *,
    utilization: int | None = None,
    average: Decimal | None = None,
    cpu: bool = False,
    tolerance: float = TOLERANCE,
) -> tuple[int, int | None, Decimal]:
    """Resource and Pods metrics: (replicas, utilization % or None, average value per pod)."""
    if not pods:
        raise MetricError("no pods returned by selector while calculating replica count")
    _, unready, missing, ignored = group(pods, metrics, cpu=cpu)
    by_name = {p.name: p for p in pods}
    kept = {k: v for k, v in metrics.items() if k in by_name and k not in ignored and k not in unready}
    if not kept:
        raise MetricError("did not receive metrics for targeted pods (pods might be unready)")

    def ratio_of(values: Mapping[str, Decimal]) -> tuple[float, int | None, Decimal]:
        if utilization is not None:
            return _utilization(values, by_name, utilization)
        assert average is not None
        ratio, avg = _average(values, average)
        return ratio, None, avg

    ratio, shown, raw = ratio_of(kept)
    rebalance = bool(unready) and ratio > 1.0
    if not rebalance and not missing:
        if _within(ratio, tolerance):
            return current, shown, raw
        return math.ceil(ratio * len(kept)), shown, raw
    filled = dict(kept)
    for name in missing:
        if ratio < 1.0:
            pod = by_name[name]
            if utilization is not None:
                filled[name] = (pod.request or Decimal(0)) * max(100, utilization) / 100
            else:
                filled[name] = average or Decimal(0)
        elif ratio > 1.0:
            filled[name] = Decimal(0)
    if rebalance:
        for name in unready:
            filled[name] = Decimal(0)
    new_ratio, _, _ = ratio_of(filled)
    if _within(new_ratio, tolerance) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current, shown, raw
    wanted = math.ceil(new_ratio * len(filled))
    if (new_ratio < 1.0 and wanted > current) or (new_ratio > 1.0 and wanted < current):
        return current, shown, raw
    return wanted, shown, raw


def ready_pods(pods: Sequence[PodState]) -> int:
    return sum(1 for p in pods if p.phase == "Running" and p.ready and not p.deleting)


def ratio_replicas(current: int, ratio: float, pods: Sequence[PodState], *, tolerance: float = TOLERANCE) -> int:
    """Object and External metrics with a ``Value`` target (upstream's ``getUsageRatioReplicaCount``)."""
    if current == 0:
        return math.ceil(ratio)
    if _within(ratio, tolerance):
        return current
    ready = ready_pods(pods)
    if ready == 0:
        raise MetricError("unable to calculate ready pods: no ready pods found for the target's selector")
    return math.ceil(ratio * ready)


def average_replicas(
    current: int, usage: Decimal, target: Decimal, *, tolerance: float = TOLERANCE
) -> tuple[int, Decimal]:
    """Object and External metrics with an ``AverageValue`` target: (replicas, value per replica)."""
    if current == 0:
        return math.ceil(usage / target), usage
    ratio = float(usage / (target * current))
    replicas = current if _within(ratio, tolerance) else math.ceil(usage / target)
    return replicas, usage / current
