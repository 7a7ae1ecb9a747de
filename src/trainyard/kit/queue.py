"""The work queue every controller's workers take keys from, as client-go's rate-limited delaying queue.

Keys are de-duplicated, and one key is never worked on by two workers at once: a key added while
it is being worked on is queued again when that work is done. ``add_after`` delays a key; a key
already waiting keeps the sooner of its two times (client-go's meaning: the earlier reason to look
again must not be lost to a later one, and a pass that runs early only recomputes). Failures back
off per key, exponentially from ``base_delay`` up to ``max_delay``, until ``forget`` says the key
succeeded. Delays run on the event loop's own clock (``call_later``), which tests that fake time
replace along with the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

BASE_DELAY = 0.05
"""The first retry of a failed key (then doubled per consecutive failure)."""
MAX_DELAY = 60.0
"""The longest a failing key waits between tries."""


class WorkQueue(Generic[K]):
    def __init__(self, *, base_delay: float = BASE_DELAY, max_delay: float = MAX_DELAY) -> None:
        self._queue: asyncio.Queue[K] = asyncio.Queue()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self.base_delay = base_delay
        self.max_delay = max_delay

    def add(self, key: K) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key not in self._processing:
            self._queue.put_nowait(key)

    def add_after(self, key: K, delay: float) -> None:
        """``key`` in ``delay`` seconds, or sooner if it is already waiting to come sooner."""
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        timer = self._timers.get(key)
        if timer is not None:
            if timer.when() <= loop.time() + delay:
                return
            timer.cancel()
        self._timers[key] = loop.call_later(delay, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K, *, at_once: bool = False) -> float:
        """Retry ``key`` after its backoff (``at_once``: the first consecutive retry without delay); the delay."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = 0.0 if at_once and failures == 0 else min(self.base_delay * 2**failures, self.max_delay)
        self.add_after(key, delay)
        return delay

    def failures(self, key: K) -> int:
        """Consecutive failures of ``key`` since it last succeeded."""
        return self._failures.get(key, 0)

    def forget(self, key: K) -> None:
        self._failures.pop(key, None)

    async def get(self) -> K:
        key = await self._queue.get()
        self._dirty.discard(key)
        self._processing.add(key)
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.put_nowait(key)

    def waiting(self) -> int:
        """Keys delayed (by ``add_after`` or backoff), not yet queued."""
        return len(self._timers)

    def close(self) -> None:
        """Cancel every delayed key (the controller stops)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def __len__(self) -> int:
        return self._queue.qsize()
