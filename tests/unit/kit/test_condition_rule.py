"""The kit's condition rule: the transition time moves only when the status does."""

from __future__ import annotations

from trainyard.kit.conditions import set_condition, transition_time


def test_the_transition_time_moves_only_with_the_status() -> None:
    assert transition_time("True", "t0", "True", "t1") == "t0"
    assert transition_time("False", "t0", "True", "t1") == "t1"
    assert transition_time(None, None, "True", "t1") == "t1"


def test_set_condition_adds_updates_and_tells_whether_it_changed() -> None:
    first, changed = set_condition([], "Ready", "True", "Up", "all up", "t0")
    assert changed and first == [
        {"type": "Ready", "status": "True", "reason": "Up", "message": "all up", "lastTransitionTime": "t0"}
    ]
    same, changed = set_condition(first, "Ready", "True", "Up", "all up", "t1", lastProbeTime="t1")
    assert not changed and same == first
    reworded, changed = set_condition(first, "Ready", "True", "Up", "still up", "t2")
    assert changed and reworded[0]["lastTransitionTime"] == "t0" and reworded[0]["message"] == "still up"
    down, changed = set_condition(reworded, "Ready", "False", "Down", "gone", "t3")
    assert changed and down[0]["lastTransitionTime"] == "t3"
    assert first[0]["message"] == "all up"  # nothing given is mutated
