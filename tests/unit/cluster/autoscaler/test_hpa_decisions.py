"""One HPA pass: status, conditions and events in kube-controller-manager v1.32's words."""

from __future__ import annotations

from decimal import Decimal

from trainyard.api.meta import Obj
from trainyard.cluster.clients.autoscaler import decisions
from trainyard.cluster.clients.autoscaler.behavior import History
from trainyard.cluster.clients.autoscaler.decisions import Reading
from trainyard.cluster.clients.autoscaler.replicas import PodState

STAMP = "2026-01-01T12:00:00Z"
OBJECT = {
    "type": "Object",
    "object": {
        "describedObject": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "j"},
        "metric": {"name": "queue_depth"},
        "target": {"type": "AverageValue", "averageValue": "10"},
    },
}
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}


def hpa(*metrics: Obj, low: int = 2, high: int = 3, status: Obj | None = None) -> Obj:
    spec = {"scaleTargetRef": {"kind": "PyTorchJob", "name": "j"}, "minReplicas": low, "maxReplicas": high}
    return {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {**spec, "metrics": list(metrics)},
        "status": status or {},
    }


def scale(replicas: int, selector: str = "job=j") -> Obj:
    return {"spec": {"replicas": replicas}, "status": {"replicas": replicas, "selector": selector}}


def conditions(status: Obj) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def decide(h: Obj, s: Obj | None, readings: list[Reading], error: str | None = None) -> decisions.Pass:
    # a history from long ago: the initial recommendation (the current count) is outside any window
    old = History(recommendations=((0, -1000.0),))
    return decisions.decide(h, s, error, readings, old, now=0.0, stamp=STAMP, downscale_window=0)


def test_an_object_metric_above_target_rescales_with_upstream_words() -> None:
    plan = decide(hpa(OBJECT), scale(2), [Reading(value=Decimal(25_000))])
    assert plan.scale_to == 3
    assert plan.reason == "external metric queue_depth(nil) above target"  # upstream's name for Object AverageValue
    assert plan.status["currentMetrics"] == [
        {
            "type": "Object",
            "object": {
                "metric": {"name": "queue_depth"},
                "describedObject": OBJECT["object"]["describedObject"],
                "current": {"averageValue": "12500m"},
            },
        }
    ]
    done = decisions.rescaled(plan, hpa(OBJECT), error=None, now=0.0, stamp=STAMP)
    assert [(e.reason, e.message) for e in done.events] == [
        ("SuccessfulRescale", "New size: 3; reason: external metric queue_depth(nil) above target")
    ]
    assert done.status["lastScaleTime"] == STAMP and done.status["desiredReplicas"] == 3
    assert conditions(done.status) == {
        "AbleToScale": ("True", "SucceededRescale"),
        "ScalingActive": ("True", "ValidMetricFound"),
        "ScalingLimited": ("False", "DesiredWithinRange"),
    }


def test_cpu_utilization_and_scale_down_reason() -> None:
    pods = tuple(PodState(n, "Running", True, request=Decimal(1000)) for n in "abc")
    reading = Reading(per_pod={"a": Decimal(100), "b": Decimal(100), "c": Decimal(100)}, pods=pods)
    plan = decide(hpa(CPU, high=5), scale(3), [reading])
    assert plan.scale_to == 2 and plan.reason == "All metrics below target"
    current = plan.status["currentMetrics"][0]["resource"]["current"]
    assert current == {"averageUtilization": 10, "averageValue": "100m"}
    limited = next(c for c in plan.status["conditions"] if c["type"] == "ScalingLimited")
    assert (limited["status"], limited["reason"]) == ("True", "TooFewReplicas")


def test_a_metric_that_cannot_be_read_sets_scaling_active_false() -> None:
    error = "unable to get metric queue_depth: no metrics returned from custom metrics API"
    plan = decide(hpa(OBJECT), scale(2), [Reading(error=error)])
    assert plan.scale_to is None
    assert conditions(plan.status)["ScalingActive"] == ("False", "FailedGetObjectMetric")
    active = next(c for c in plan.status["conditions"] if c["type"] == "ScalingActive")
    assert active["message"] == f"the HPA was unable to compute the replica count: {error}"
    assert [e.reason for e in plan.events] == ["FailedGetObjectMetric", "FailedComputeMetricsReplicas"]
    assert plan.events[1].message == (
        f"invalid metrics (1 invalid out of 1), first error is: failed to get queue_depth object metric: {error}"
    )


def test_scale_failures_and_limits() -> None:
    plan = decide(hpa(OBJECT), None, [], error='no matches for kind "PyTorchJob"')
    assert conditions(plan.status)["AbleToScale"] == ("False", "FailedGetScale")
    assert plan.events[0].reason == "FailedGetScale"
    disabled = decide(hpa(OBJECT), scale(0), [Reading(value=Decimal(1))])
    assert conditions(disabled.status)["ScalingActive"] == ("False", "ScalingDisabled")
    assert disabled.scale_to is None
    above = decide(hpa(OBJECT), scale(5), [Reading(value=Decimal(1))])
    assert (above.scale_to, above.reason) == (3, "Current number of replicas above Spec.MaxReplicas")
    no_selector = decide(hpa(OBJECT), scale(2, selector=""), [Reading(value=Decimal(1))])
    assert conditions(no_selector.status)["ScalingActive"] == ("False", "InvalidSelector")
    failed = decisions.rescaled(above, hpa(OBJECT), error="conflict", now=0.0, stamp=STAMP)
    assert (
        failed.events[-1].message
        == "New size: 3; reason: Current number of replicas above Spec.MaxReplicas; error: conflict"
    )
    assert conditions(failed.status)["AbleToScale"] == ("False", "FailedUpdateScale")


def test_external_value_target_and_the_highest_metric_wins() -> None:
    external = {
        "type": "External",
        "external": {
            "metric": {"name": "kueue_pending_workloads", "selector": {"matchLabels": {"queue_name": "q"}}},
            "target": {"type": "Value", "value": "2"},
        },
    }
    pods = tuple(PodState(n, "Running", True) for n in "ab")
    plan = decide(
        hpa(external, OBJECT, high=10),
        scale(3),
        [Reading(value=Decimal(6000), pods=pods), Reading(value=Decimal(5000))],
    )
    assert plan.scale_to == 6  # 6/2 = 3 x 2 ready pods; the Object metric asks for 1
    assert plan.reason.startswith(
        "external metric kueue_pending_workloads(&LabelSelector{MatchLabels:map[queue_name:q]"
    )
    assert plan.status["currentMetrics"][0]["external"]["current"] == {"value": "6"}


def test_a_failed_metric_does_not_stop_a_scale_up_the_others_ask_for() -> None:
    plan = decide(hpa(CPU, OBJECT), scale(2), [Reading(error="no metrics"), Reading(value=Decimal(25_000))])
    assert plan.scale_to == 3
    assert plan.status["currentMetrics"][0] == {"type": ""}  # kept in the spec's order, as upstream
    assert conditions(plan.status)["ScalingActive"] == ("True", "ValidMetricFound")
    assert [e.reason for e in plan.events] == ["FailedGetResourceMetric"]
    # ...but a scale down needs every metric: the count stays
    down = decide(hpa(CPU, OBJECT), scale(3), [Reading(error="no metrics"), Reading(value=Decimal(5_000))])
    assert down.scale_to is None
    assert conditions(down.status)["ScalingActive"] == ("False", "FailedGetResourceMetric")
