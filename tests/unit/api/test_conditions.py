"""The job-condition state machine of reference §5.2, as ``set_condition`` applies it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from trainyard.api import ConditionType, JobStatus
from trainyard.api.conditions import FALSE, TRUE, find, is_finished, is_true, set_condition

NOW = datetime(2026, 1, 1, tzinfo=UTC)
EARLIER = NOW - timedelta(minutes=5)

C = ConditionType


def status(*conds: str) -> JobStatus:
    """Conditions written ``"Running"``, ``"Running=False"`` or ``"Running=True:OtherReason"``."""
    out = []
    for spec in conds:
        ctype, _, rest = spec.partition("=")
        value, _, reason = rest.partition(":")
        out.append(
            {
                "type": ctype,
                "status": value or TRUE,
                "reason": reason or f"PyTorchJob{ctype}",
                "message": f"old {ctype} message",
                "lastUpdateTime": EARLIER,
                "lastTransitionTime": EARLIER,
            }
        )
    return JobStatus.model_validate({"conditions": out})


def apply(before: JobStatus, ctype: ConditionType, value: str = TRUE, reason: str | None = None) -> JobStatus:
    reason = reason or f"PyTorchJob{ctype.value}"
    return set_condition(before, ctype, reason=reason, message=f"new {ctype.value} message", now=NOW, value=value)


def shape(s: JobStatus) -> list[str]:
    return [f"{c.type.value}={c.status}" for c in s.conditions]


TRANSITIONS = [
    # id, conditions before, condition set, conditions after (in order)
    ("first-condition", [], (C.CREATED, TRUE), ["Created=True"]),
    ("appended-at-the-end", ["Created"], (C.RUNNING, TRUE), ["Created=True", "Running=True"]),
    (
        "updated-one-moves-to-the-end",
        ["Created", "Running=False"],
        (C.CREATED, FALSE),
        ["Running=False", "Created=False"],
    ),
    ("restarting-removes-running", ["Created", "Running"], (C.RESTARTING, TRUE), ["Created=True", "Restarting=True"]),
    ("running-removes-restarting", ["Created", "Restarting"], (C.RUNNING, TRUE), ["Created=True", "Running=True"]),
    (
        "succeeded-flips-running-to-false",
        ["Created", "Running"],
        (C.SUCCEEDED, TRUE),
        ["Created=True", "Running=False", "Succeeded=True"],
    ),
    (
        "failed-flips-running-to-false",
        ["Created", "Running"],
        (C.FAILED, TRUE),
        ["Created=True", "Running=False", "Failed=True"],
    ),
    (
        "failed-keeps-restarting",
        ["Created", "Restarting"],
        (C.FAILED, TRUE),
        ["Created=True", "Restarting=True", "Failed=True"],
    ),
    ("failed-is-terminal-for-running", ["Created", "Failed"], (C.RUNNING, TRUE), ["Created=True", "Failed=True"]),
    ("failed-is-terminal-for-succeeded", ["Created", "Failed"], (C.SUCCEEDED, TRUE), ["Created=True", "Failed=True"]),
    (
        "failed-is-terminal-for-restarting",
        ["Created", "Running=False", "Failed"],
        (C.RESTARTING, TRUE),
        ["Created=True", "Running=False", "Failed=True"],
    ),
    (
        "failed-false-is-not-terminal",
        ["Created", "Failed=False"],
        (C.RUNNING, TRUE),
        ["Created=True", "Failed=False", "Running=True"],
    ),
    ("suspended-false", ["Created", "Suspended"], (C.SUSPENDED, FALSE), ["Created=True", "Suspended=False"]),
]


@pytest.mark.parametrize(("before", "change", "after"), [t[1:] for t in TRANSITIONS], ids=[t[0] for t in TRANSITIONS])
def test_transitions(before: list[str], change: tuple[ConditionType, str], after: list[str]) -> None:
    assert shape(apply(status(*before), *change)) == after


def test_failed_is_terminal_returns_the_status_unchanged() -> None:
    before = status("Created", "Running=False", "Failed")

    for ctype in ConditionType:
        assert apply(before, ctype) == before
        assert apply(before, ctype, value=FALSE) == before


def test_same_type_status_and_reason_is_a_no_op_and_keeps_the_message() -> None:
    before = status("Created", "Running")

    after = apply(before, C.RUNNING)

    assert after == before
    running = find(after, C.RUNNING)
    assert running is not None
    assert running.message == "old Running message"
    assert running.last_update_time == EARLIER


def test_a_no_op_does_not_move_the_condition_to_the_end() -> None:
    before = status("Created", "Running=False", "Succeeded")

    assert shape(apply(before, C.CREATED)) == ["Created=True", "Running=False", "Succeeded=True"]


def test_new_reason_with_same_status_keeps_the_transition_time() -> None:
    before = status("Created", "Running")

    after = apply(before, C.RUNNING, reason="PyTorchJobResumed")

    running = after.conditions[-1]
    assert (running.type, running.status, running.reason) == (C.RUNNING, TRUE, "PyTorchJobResumed")
    assert running.message == "new Running message"
    assert running.last_transition_time == EARLIER
    assert running.last_update_time == NOW


@pytest.mark.parametrize(
    ("before", "value"),
    [(["Created", "Suspended=False"], TRUE), (["Created", "Suspended"], FALSE), (["Created"], TRUE)],
    ids=["false-to-true", "true-to-false", "new-condition"],
)
def test_status_change_sets_the_transition_time(before: list[str], value: str) -> None:
    after = apply(status(*before), C.SUSPENDED, value=value)

    suspended = after.conditions[-1]
    assert (suspended.type, suspended.status) == (C.SUSPENDED, value)
    assert suspended.last_transition_time == NOW
    assert suspended.last_update_time == NOW


@pytest.mark.parametrize("finishing", [C.SUCCEEDED, C.FAILED], ids=["Succeeded", "Failed"])
def test_running_flipped_to_false_keeps_its_reason_and_message(finishing: ConditionType) -> None:
    after = apply(status("Created", "Running"), finishing)

    running = find(after, C.RUNNING)
    assert running is not None
    assert (running.status, running.reason, running.message) == (FALSE, "PyTorchJobRunning", "old Running message")
    assert after.conditions[-1].type == finishing
    assert after.conditions[-1].last_transition_time == NOW


def test_set_condition_never_mutates_its_input() -> None:
    before = status("Created", "Running")
    snapshot = before.model_dump()

    apply(before, C.SUCCEEDED)
    apply(before, C.RESTARTING)
    apply(before, C.RUNNING, reason="Other")

    assert before.model_dump() == snapshot


FINISHED = [
    ("no-conditions", [], False),
    ("running", ["Created", "Running"], False),
    ("succeeded", ["Created", "Running=False", "Succeeded"], True),
    ("failed", ["Created", "Failed"], True),
    ("succeeded-false", ["Created", "Succeeded=False"], False),
    ("failed-false", ["Created", "Failed=False"], False),
]


@pytest.mark.parametrize(("conds", "finished"), [f[1:] for f in FINISHED], ids=[f[0] for f in FINISHED])
def test_is_finished(conds: list[str], finished: bool) -> None:
    assert is_finished(status(*conds)) is finished


def test_is_true_and_find() -> None:
    s = status("Created", "Running=False")

    assert is_true(s, C.CREATED)
    assert not is_true(s, C.RUNNING)
    assert not is_true(s, C.SUCCEEDED)
    assert find(s, C.SUCCEEDED) is None
