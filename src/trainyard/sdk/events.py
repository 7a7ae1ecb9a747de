"""A job's events as the Kubeflow SDK shows them: per object, oldest first, one line each."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any


def by_object(events: Iterable[Mapping[str, Any]], wanted: set[tuple[str, str]], *, since: str) -> dict[str, list[str]]:
    """``{"pytorchjob/NAME": ["TIME message", ...]}`` for events about the ``(kind, name)``s wanted.

    Events recorded before ``since`` (the job's creation) belong to an older object of the same name.
    """
    out: dict[str, list[str]] = {}
    for ev in sorted(events, key=_event_time):
        inv = ev.get("involvedObject") or {}
        if (inv.get("kind"), inv.get("name")) not in wanted:
            continue
        if ((ev.get("metadata") or {}).get("creationTimestamp") or "") < since:
            continue
        key = f"{str(inv['kind']).lower()}/{inv['name']}"
        out.setdefault(key, []).append(f"{_short_time(_event_time(ev))} {ev.get('message', '')}")
    return out


def _event_time(event: Mapping[str, Any]) -> str:
    return str(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )


def _short_time(stamp: str) -> str:
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return stamp
