"""The taint eviction controller's decisions: untolerated NoExecute taints evict at once, tolerated
ones after the shortest tolerationSeconds since the countdown began, forever ones never."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from trainyard.api.meta import Obj
from trainyard.cluster.clients.nodelifecycle import taints

T0 = datetime(2026, 1, 1, tzinfo=UTC)
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}


def pod(*tolerations: Obj) -> Obj:
    return {"metadata": {"name": "p"}, "spec": {"tolerations": list(tolerations)}}


def toleration(key: str, seconds: int | None = None, **more: str) -> Obj:
    out: Obj = {"key": key, "operator": "Exists", "effect": "NoExecute", **more}
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


def test_matching_follows_tolerates_taint() -> None:
    assert taints.tolerates({"operator": "Exists"}, UNREACHABLE)
    assert taints.tolerates({"key": UNREACHABLE["key"], "operator": "Exists"}, UNREACHABLE)
    assert not taints.tolerates({"key": UNREACHABLE["key"], "operator": "Exists", "effect": "NoSchedule"}, UNREACHABLE)
    assert taints.tolerates({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"})
    assert not taints.tolerates({"key": "k", "value": "w"}, {"key": "k", "value": "v", "effect": "NoExecute"})
    assert not taints.tolerates({"value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"})


def test_no_taints_no_countdown() -> None:
    assert taints.decide(pod(), [], None, T0) == taints.Decision(None, None)


def test_an_untolerated_taint_evicts_now() -> None:
    assert taints.decide(pod(), [UNREACHABLE], None, T0) == taints.Decision(T0, T0)
    only_one = pod(toleration(UNREACHABLE["key"], 60))
    assert taints.decide(only_one, [UNREACHABLE, NOT_READY], None, T0).evict_at == T0


def test_a_tolerated_taint_evicts_after_toleration_seconds_from_the_countdowns_start() -> None:
    two = pod(toleration(UNREACHABLE["key"], 2))
    first = taints.decide(two, [UNREACHABLE], None, T0)
    assert first == taints.Decision(T0 + timedelta(seconds=2), T0)
    later = taints.decide(two, [UNREACHABLE], first.since, T0 + timedelta(seconds=1))
    assert later.evict_at == T0 + timedelta(seconds=2)  # the countdown keeps its start


def test_forever_unless_one_used_toleration_is_finite() -> None:
    forever = pod(toleration(UNREACHABLE["key"]))
    assert taints.decide(forever, [UNREACHABLE], None, T0).evict_at is None
    mixed = pod(toleration(UNREACHABLE["key"]), toleration(NOT_READY["key"], 5))
    assert taints.decide(mixed, [UNREACHABLE, NOT_READY], None, T0).evict_at == T0 + timedelta(seconds=5)
    assert taints.stay([toleration("k", -3)]) == 0.0


def test_the_disruption_target_condition_is_set_once() -> None:
    p: Obj = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    conditions = taints.disruption_conditions(p, taints.DISRUPTION_TARGET, "now")
    assert conditions is not None
    target = conditions[-1]
    assert (target["type"], target["reason"], target["message"]) == (
        "DisruptionTarget",
        "DeletionByTaintManager",
        "Taint manager: deleting due to NoExecute taint",
    )
    assert taints.disruption_conditions({"status": {"conditions": conditions}}, taints.DISRUPTION_TARGET, "x") is None
