"""core/v1 Events as our components write them: the body, the reference to the object it is
about, and posting one or several through the client (a failure to record one is only logged).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.core_v1 import Event

from trainyard.client.resources import build

log = logging.getLogger(__name__)


def event_body(
    involved: dict[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    now: str,
    host: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event about ``involved``; ``kubectl describe`` shows ``component`` (and ``host``) as From."""
    return {
        "apiVersion": "v1",
        "kind": "Event",
        # About a cluster-scoped object (a Node), in ``default``, as kube's recorders file them.
        "metadata": {"generateName": f"{involved['name']}.", "namespace": involved.get("namespace") or "default"},
        "involvedObject": involved,
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": component, **({"host": host} if host else {})},
        "reportingComponent": component,
        # kubectl prints reportingInstance where the source has no host ("From: a, a" if it repeats).
        **({"reportingInstance": host} if host else {}),
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


def reference(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """The object reference an Event about ``obj`` names (``involvedObject``), as controllers write it."""
    m = obj["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": m["name"],
        "namespace": m["namespace"],
        "uid": m["uid"],
        "resourceVersion": m.get("resourceVersion", ""),
    }


async def record_events(
    client: AsyncClient,
    involved: dict[str, Any],
    events: Sequence[tuple[str, str, str]],
    *,
    component: str,
    now: str,
) -> None:
    """Post one Event per ``(type, reason, message)`` about ``involved`` (``reference``), in order."""
    for type_, reason, message in events:
        await record_event(client, involved, type_=type_, reason=reason, message=message, component=component, now=now)


async def record_event(
    client: AsyncClient,
    involved: dict[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    now: str,
    host: str | None = None,
) -> None:
    """Post a core/v1 Event about ``involved`` (an object reference); failures are only logged."""
    event = event_body(involved, type_=type_, reason=reason, message=message, component=component, now=now, host=host)
    try:
        await client.create(build(Event, event))
    except ApiError as exc:
        log.warning("could not record event %s on %s/%s: %s", reason, involved["namespace"], involved["name"], exc)
