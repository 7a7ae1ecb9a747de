"""Stabilization windows and scaling policies of the HPA, with injected time (seconds)."""

from __future__ import annotations

from trainyard.api.autoscaling import scale_down_rules, scale_up_rules
from trainyard.cluster.clients.autoscaler import behavior
from trainyard.cluster.clients.autoscaler.behavior import History


def normalize(b: dict | None, history: History, current: int, desired: int, now: float, **kw: int) -> behavior.Outcome:
    return behavior.normalize(
        b,
        history,
        current=current,
        desired=desired,
        minimum=kw.get("minimum", 1),
        maximum=kw.get("maximum", 10),
        now=now,
        downscale_window=kw.get("window", 300),
    )


def test_without_behavior_a_scale_down_waits_for_the_window() -> None:
    history = History(recommendations=((5, 0.0),))
    held = normalize(None, history, 5, 2, 100.0)
    assert held.replicas == 5 and held.able[0] == "ScaleDownStabilized"
    later = normalize(None, held.history, 5, 2, 401.0)
    assert later.replicas == 2 and later.able == behavior.READY
    assert later.limited == (False, "DesiredWithinRange", "the desired count is within the acceptable range")


def test_without_behavior_a_scale_up_is_capped_at_twice_or_four() -> None:
    out = normalize(None, History(), 1, 9, 0.0)
    assert out.replicas == 4 and out.limited[:2] == (True, "ScaleUpLimit")
    out = normalize(None, History(), 3, 9, 0.0, maximum=5)
    assert out.replicas == 5 and out.limited[:2] == (True, "TooManyReplicas")
    out = normalize(None, History(), 3, 0, 0.0, minimum=2, window=0)
    assert out.replicas == 2 and out.limited[:2] == (True, "TooFewReplicas")


def test_behavior_windows_from_the_spec() -> None:
    b = {"scaleUp": {"stabilizationWindowSeconds": 10}, "scaleDown": {"stabilizationWindowSeconds": 5}}
    history = History(recommendations=((2, 0.0),))
    first = normalize(b, history, 2, 3, 1.0)
    assert first.replicas == 2 and first.able[0] == "ScaleUpStabilized"
    up = normalize(b, first.history, 2, 3, 12.0)
    assert up.replicas == 3
    down = normalize(b, up.history, 3, 2, 13.0)
    assert down.replicas == 3 and down.able[0] == "ScaleDownStabilized"
    assert normalize(b, down.history, 3, 2, 19.0).replicas == 2


def test_policies_limit_the_rate_and_select_policy_picks() -> None:
    pods_1 = {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}], "stabilizationWindowSeconds": 0}
    out = normalize({"scaleUp": pods_1}, History(), 2, 6, 0.0)
    assert out.replicas == 3 and out.limited[:2] == (True, "ScaleUpLimit")
    history = behavior.record_scale({"scaleUp": pods_1}, out.history, 2, 3, 0.0)
    assert normalize({"scaleUp": pods_1}, history, 3, 6, 30.0).replicas == 3  # the period's one pod is spent
    assert normalize({"scaleUp": pods_1}, history, 3, 6, 61.0).replicas == 4
    both = {
        "selectPolicy": "Min",
        "stabilizationWindowSeconds": 0,
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 50, "periodSeconds": 15},
        ],
    }
    assert normalize({"scaleUp": both}, History(), 4, 10, 0.0).replicas == 6
    disabled = {"selectPolicy": "Disabled", "stabilizationWindowSeconds": 0}
    assert normalize({"scaleDown": disabled}, History(), 4, 1, 0.0).replicas == 4


def test_scale_down_percent_policy_and_defaults() -> None:
    half = {"stabilizationWindowSeconds": 0, "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]}
    out = normalize({"scaleDown": half}, History(), 8, 1, 0.0)
    assert out.replicas == 4 and out.limited[:2] == (True, "ScaleDownLimit")
    assert scale_up_rules(None)["policies"][0] == {"type": "Pods", "value": 4, "periodSeconds": 15}
    assert scale_down_rules(None)["selectPolicy"] == "Max"
