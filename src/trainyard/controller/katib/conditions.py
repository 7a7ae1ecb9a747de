"""Katib's conditions: each type at most once, the one that changed moved to the end of the list.

Katib's printer columns show ``status.conditions[-1:].type`` as an object's TYPE, so the condition
set last is last. A condition whose status and reason stay is left alone (its ``lastUpdateTime``
too); under a new reason with the same status it keeps its ``lastTransitionTime``. Conditions are
plain dicts in Katib's shape (``type, status, reason, message, lastUpdateTime,
lastTransitionTime``); the list given is never mutated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Condition = dict[str, Any]


def find(conditions: Sequence[Mapping[str, Any]], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == type_), None)


def is_true(status: Mapping[str, Any], type_: str) -> bool:
    found = find(status.get("conditions") or [], type_)
    return found is not None and found.get("status") == "True"


def set_condition(
    conditions: Sequence[Mapping[str, Any]], type_: str, status: str, reason: str, message: str, now: str
) -> list[Condition]:
    current = find(conditions, type_)
    if current is not None and current.get("status") == status and current.get("reason") == reason:
        return [dict(c) for c in conditions]
    since = current.get("lastTransitionTime") if current is not None and current.get("status") == status else now
    new = {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": since,
    }
    return [*(dict(c) for c in conditions if c.get("type") != type_), new]


def mark(status: dict[str, Any], type_: str, reason: str, message: str, now: str, *, ends: Sequence[str] = ()) -> None:
    """Set ``type_`` True in ``status``; each of ``ends`` that is True turns False first, under its
    own reason and message, as Katib's ``Mark...Succeeded`` ends ``Running``."""
    conditions: list[Condition] = list(status.get("conditions") or [])
    for ended in ends:
        old = find(conditions, ended)
        if old is not None and old.get("status") == "True" and ended != type_:
            conditions = set_condition(
                conditions, ended, "False", str(old.get("reason") or ""), str(old.get("message") or ""), now
            )
    status["conditions"] = set_condition(conditions, type_, "True", reason, message, now)
