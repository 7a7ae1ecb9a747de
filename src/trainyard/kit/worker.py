"""A controller's workers: keys from the queue through a pass, and one taxonomy of what went wrong.

A pass (``reconcile(key)``) returns None when it is done, or the seconds after which the key must
be looked at again even if nothing changes (deadlines, TTL). What it raises is sorted once, here:

* **conflict** (409: the object or a child changed since the cache the pass read): the cache is
  behind a write that its watch is bringing; the key is retried at once, then backs off.
* **waiting** (``Waiting``): the pass cannot go on yet for a reason its object's user was told
  (host ports exhausted); retried after the delay it names, not counted as a failure.
* **permanent** (``Permanent``): retrying cannot help until the object changes (it does not
  match its schema); ``on_permanent`` tells its user (an event and a condition) and the key is
  left until its next change enqueues it.
* **transient** (anything else: the API server unreachable, a refusal that may pass): backoff.

Every outcome is reported to ``observe`` (the operator's reconcile metrics), with the pass's
duration as measured by ``clock``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from enum import StrEnum
from typing import TypeVar

from lightkube.core.exceptions import ApiError

from trainyard.client.resources import is_status
from trainyard.kit.queue import WorkQueue

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


class Waiting(Exception):
    """A pass that cannot go on yet for a reason its object's user was told: retried after ``after``."""

    def __init__(self, message: str, after: float) -> None:
        super().__init__(message)
        self.after = after


class Permanent(Exception):
    """A pass that cannot succeed until its object changes; ``reason`` names why, for the event."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class NotLeading(RuntimeError):
    """Raised instead of writing when leader election says this replica may have lost the lease."""


class Failure(StrEnum):
    CONFLICT = "conflict"
    WAITING = "waiting"
    PERMANENT = "permanent"
    TRANSIENT = "transient"


def classify(exc: Exception) -> Failure:
    if isinstance(exc, ApiError) and is_status(exc, 409):
        return Failure.CONFLICT
    if isinstance(exc, Waiting):
        return Failure.WAITING
    if isinstance(exc, Permanent):
        return Failure.PERMANENT
    return Failure.TRANSIENT


Observe = Callable[[str, float, K, BaseException | None], None]
"""``(result, seconds, key, error)``: result ``success``, ``requeue_after`` or ``error``."""


async def work(
    queue: WorkQueue[K],
    reconcile: Callable[[K], Awaitable[float | None]],
    *,
    name: str,
    observe: Observe[K] | None = None,
    on_permanent: Callable[[K, Permanent], Awaitable[None]] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """One worker, forever: each key from ``queue`` through ``reconcile``, its outcome sorted as above."""
    while True:
        key = await queue.get()
        started = clock()
        try:
            requeue = await reconcile(key)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            result = await _failed(queue, key, exc, name, on_permanent)
            if observe is not None:
                observe(result, clock() - started, key, exc if result == "error" else None)
        else:
            queue.forget(key)
            if requeue is not None:
                queue.add_after(key, requeue)
            if observe is not None:
                observe("success" if requeue is None else "requeue_after", clock() - started, key, None)
        finally:
            queue.done(key)


async def _failed(
    queue: WorkQueue[K],
    key: K,
    exc: Exception,
    name: str,
    on_permanent: Callable[[K, Permanent], Awaitable[None]] | None,
) -> str:
    """Sort a failed pass and queue its key accordingly; the result it is counted as."""
    failure = classify(exc)
    if isinstance(exc, Waiting):
        log.debug("%s: %s waits: %s", name, _shown(key), exc)
        queue.forget(key)
        queue.add_after(key, exc.after)
        return "requeue_after"
    if isinstance(exc, Permanent):
        log.warning("%s: %s cannot be reconciled until it changes: %s", name, _shown(key), exc)
        queue.forget(key)
        if on_permanent is not None:
            try:
                await on_permanent(key, exc)
            except Exception as told:  # telling failed: the next change of the object tries again
                log.warning("%s: could not tell %s why: %s", name, _shown(key), told)
        return "error"
    conflict = failure is Failure.CONFLICT
    delay = queue.add_rate_limited(key, at_once=conflict)
    log.log(
        logging.DEBUG if conflict else logging.WARNING,  # a cache behind a write: routine, soon retried
        "%s: reconcile %s failed (%s); retrying in %.2fs",
        name,
        _shown(key),
        exc,
        delay,
        exc_info=not isinstance(exc, ApiError | NotLeading),
    )
    return "error"


def _shown(key: Hashable) -> str:
    """``namespace/name`` of a tuple key, as logs and kubectl name objects."""
    return "/".join(str(part) for part in key) if isinstance(key, tuple) else str(key)
