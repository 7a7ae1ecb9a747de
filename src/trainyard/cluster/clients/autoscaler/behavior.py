"""What the autoscaler makes of a recommendation: stabilization windows and scaling policies.

As kube-controller-manager v1.32's ``normalizeDesiredReplicas`` (an HPA without ``behavior``: the
highest recommendation of the last ``--horizontal-pod-autoscaler-downscale-stabilization``
(5 min) when scaling down, at most ``max(2 * current, 4)`` when scaling up) and
``normalizeDesiredReplicasWithBehaviors`` (the lowest recommendation within
``scaleUp.stabilizationWindowSeconds``, the highest within ``scaleDown``'s; then each rule's
``Pods``/``Percent`` policies over their ``periodSeconds``, the scale events of the period counted,
picked by ``selectPolicy`` ``Max``/``Min``/``Disabled``), with the ``AbleToScale`` and
``ScalingLimited`` reasons and messages upstream gives.

Pure: the memory of past recommendations and scale events is a ``History`` value the controller
keeps per HPA (in memory, as upstream's: a restarted plane starts afresh); times are seconds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from trainyard.api.autoscaling import scale_down_rules, scale_up_rules

Obj = dict[str, Any]
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
DEFAULT_DOWNSCALE_STABILIZATION = 300.0


@dataclass(frozen=True)
class History:
    recommendations: tuple[tuple[int, float], ...] = ()  # (replicas, when)
    scale_up: tuple[tuple[int, float], ...] = ()  # (replicas added, when)
    scale_down: tuple[tuple[int, float], ...] = ()  # (replicas removed, when)


@dataclass(frozen=True)
class Outcome:
    replicas: int
    able: tuple[str, str]  # AbleToScale: reason, message (status True)
    limited: tuple[bool, str, str]  # ScalingLimited: status, reason, message
    history: History = field(default_factory=History)


STABILIZED_DOWN = (
    "ScaleDownStabilized",
    "recent recommendations were higher than current one, applying the highest recent recommendation",
)
STABILIZED_UP = (
    "ScaleUpStabilized",
    "recent recommendations were lower than current one, applying the lowest recent recommendation",
)
READY = ("ReadyForNewScale", "recommended size matches current size")
WITHIN = ("DesiredWithinRange", "the desired count is within the acceptable range")
UP_LIMIT = ("ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate")
DOWN_LIMIT = ("ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate")
TOO_MANY = ("TooManyReplicas", "the desired replica count is more than the maximum replica count")
TOO_FEW = ("TooFewReplicas", "the desired replica count is less than the minimum replica count")


def normalize(
    behavior: Obj | None,
    history: History,
    *,
    current: int,
    desired: int,
    minimum: int,
    maximum: int,
    now: float,
    downscale_window: float = DEFAULT_DOWNSCALE_STABILIZATION,
) -> Outcome:
    if behavior is None:
        return _without_behavior(history, current, desired, minimum, maximum, now, downscale_window)
    return _with_behavior(behavior, history, current, desired, minimum, maximum, now, downscale_window)


def _without_behavior(
    history: History, current: int, desired: int, minimum: int, maximum: int, now: float, window: float
) -> Outcome:
    cutoff = now - window
    kept = [r for r in history.recommendations if r[1] >= cutoff]
    stabilized = max([desired, *(r[0] for r in kept)])
    able = STABILIZED_DOWN if stabilized != desired else READY
    up_limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
    if maximum > up_limit:
        top, top_why = up_limit, UP_LIMIT
    else:
        top, top_why = maximum, TOO_MANY
    if stabilized < minimum:
        replicas, why = minimum, TOO_FEW
    elif stabilized > top:
        replicas, why = top, top_why
    else:
        replicas, why = stabilized, WITHIN
    recorded = replace(history, recommendations=(*kept, (desired, now)))
    return Outcome(replicas, able, (replicas != stabilized, *why), recorded)


def _changed(events: tuple[tuple[int, float], ...], period: float, now: float) -> int:
    return sum(change for change, at in events if at > now - period)


def up_limit(current: int, events: tuple[tuple[int, float], ...], rules: Obj, now: float) -> int:
    select = rules.get("selectPolicy")
    if select == "Disabled":
        return current
    pick = min if select == "Min" else max
    result: int | None = None
    for policy in rules.get("policies") or []:
        start = current - _changed(events, float(policy["periodSeconds"]), now)
        if policy["type"] == "Pods":
            proposed = start + int(policy["value"])
        else:
            proposed = math.ceil(start * (1 + int(policy["value"]) / 100))
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


def down_limit(current: int, events: tuple[tuple[int, float], ...], rules: Obj, now: float) -> int:
    select = rules.get("selectPolicy")
    if select == "Disabled":
        return current
    pick = max if select == "Min" else min
    result: int | None = None
    for policy in rules.get("policies") or []:
        start = current + _changed(events, float(policy["periodSeconds"]), now)
        if policy["type"] == "Pods":
            proposed = start - int(policy["value"])
        else:
            proposed = int(start * (1 - int(policy["value"]) / 100))
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


def _with_behavior(
    behavior: Obj,
    history: History,
    current: int,
    desired: int,
    minimum: int,
    maximum: int,
    now: float,
    flag_window: float,
) -> Outcome:
    up = scale_up_rules(behavior.get("scaleUp"))
    down = scale_down_rules(behavior.get("scaleDown"))
    if down.get("stabilizationWindowSeconds") is None:
        down["stabilizationWindowSeconds"] = int(flag_window)
    up_window, down_window = float(up["stabilizationWindowSeconds"]), float(down["stabilizationWindowSeconds"])
    if desired >= current:
        window, pick, able = up_window, min, STABILIZED_UP
    else:
        window, pick, able = down_window, max, STABILIZED_DOWN
    stabilized = desired
    for replicas, at in history.recommendations:
        if at > now - window:
            stabilized = pick(replicas, stabilized)
    obsolete = now - max(up_window, down_window)
    kept = tuple(r for r in history.recommendations if r[1] >= obsolete)
    if stabilized == desired:
        able = READY
    replicas, why = stabilized, WITHIN
    if stabilized > current:
        limit = max(up_limit(current, history.scale_up, up, now), current)
        top, top_why = (limit, UP_LIMIT) if maximum > limit else (maximum, TOO_MANY)
        if stabilized > top:
            replicas, why = top, top_why
    elif stabilized < current:
        limit = min(down_limit(current, history.scale_down, down, now), current)
        bottom, bottom_why = (limit, DOWN_LIMIT) if minimum < limit else (minimum, TOO_FEW)
        if stabilized < bottom:
            replicas, why = bottom, bottom_why
    recorded = replace(history, recommendations=(*kept, (desired, now)))
    return Outcome(replicas, able, (replicas != stabilized, *why), recorded)


def record_scale(behavior: Obj | None, history: History, before: int, after: int, now: float) -> History:
    """Remember a rescale for the rate policies (upstream's ``storeScaleEvent``: only with ``behavior``)."""
    if behavior is None or before == after:
        return history
    if after > before:
        period = max((p["periodSeconds"] for p in scale_up_rules(behavior.get("scaleUp"))["policies"]), default=0)
        kept = tuple(e for e in history.scale_up if e[1] >= now - period)
        return replace(history, scale_up=(*kept, (after - before, now)))
    period = max((p["periodSeconds"] for p in scale_down_rules(behavior.get("scaleDown"))["policies"]), default=0)
    kept = tuple(e for e in history.scale_down if e[1] >= now - period)
    return replace(history, scale_down=(*kept, (before - after, now)))
