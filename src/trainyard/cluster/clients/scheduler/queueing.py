"""The scheduler's queue of pending pods, as kube-scheduler's: active, backing off, unschedulable.

A new or changed pod is *active*: the next pass tries it. A pod that did not fit becomes
*unschedulable*, with a back-off that doubles with each failed attempt (``INITIAL_BACKOFF`` to
``MAX_BACKOFF``, kube-scheduler's defaults). It is tried again only after a change that could
make room (``move_all``: a pod finished, a node or a PodGroup changed; ``move``: a pod placed
or relabelled, for pods waiting on pod affinity or spread) — at once if its back-off
has passed, else when it does (*backing off*) — or after ``FLUSH_SECONDS`` regardless. So a
crowd of pods that cannot fit costs one attempt each per back-off, however busy the cluster.
When no pod is active, the scheduler takes backing-off pods early, a few at a time (``pop_backing``,
kube-scheduler 1.33's SchedulerPopFromBackoffQ), so room is never left idle for a back-off.
Pure: the caller passes the time (its event loop's clock).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

INITIAL_BACKOFF = 1.0
MAX_BACKOFF = 10.0
FLUSH_SECONDS = 300.0  # podMaxInUnschedulablePodsDuration


class PodQueue:
    def __init__(self, *, initial: float = INITIAL_BACKOFF, maximum: float = MAX_BACKOFF) -> None:
        self.initial = initial
        self.maximum = maximum
        self.active: set[str] = set()
        self.unschedulable: dict[str, tuple[float, float]] = {}  # uid -> (back-off end, since)
        self.backing: dict[str, float] = {}  # uid -> back-off end
        self._heap: list[tuple[float, str]] = []
        self.attempts: dict[str, int] = {}

    def __contains__(self, uid: str) -> bool:
        return uid in self.active or uid in self.unschedulable or uid in self.backing

    def add(self, uid: str) -> None:
        """A new pod, or one that changed in a way that may change its verdict: try it next."""
        self.unschedulable.pop(uid, None)
        self.backing.pop(uid, None)
        self.active.add(uid)

    def remove(self, uid: str) -> None:
        """The pod is bound, gone, or no longer this scheduler's."""
        self.active.discard(uid)
        self.unschedulable.pop(uid, None)
        self.backing.pop(uid, None)
        self.attempts.pop(uid, None)

    def failed(self, uid: str, now: float) -> float:
        """The pod did not fit; returns when its back-off ends."""
        self.active.discard(uid)
        self.backing.pop(uid, None)
        attempts = self.attempts.get(uid, 0) + 1
        self.attempts[uid] = attempts
        until = now + min(self.initial * 2.0 ** (attempts - 1), self.maximum)
        self.unschedulable[uid] = (until, now)
        return until

    def retry(self, uid: str) -> None:
        """Try an unschedulable pod again at once (its verdict could not be written)."""
        if uid in self.unschedulable or uid in self.backing:
            self.add(uid)

    def move_all(self, now: float) -> None:
        """Something changed that could make room: unschedulable pods become active or back off."""
        self.move(list(self.unschedulable), now)

    def move(self, uids: Iterable[str], now: float) -> None:
        """``move_all`` for some pods only (those a change could help, as a queueing hint says)."""
        for uid in uids:
            entry = self.unschedulable.pop(uid, None)
            if entry is None:
                continue
            until = entry[0]
            if until <= now:
                self.active.add(uid)
            else:
                self.backing[uid] = until
                heapq.heappush(self._heap, (until, uid))

    def expire(self, now: float) -> None:
        """Back-offs that ended make their pods active; pods unschedulable too long are flushed."""
        while self._heap and self._heap[0][0] <= now:
            until, uid = heapq.heappop(self._heap)
            if self.backing.get(uid) == until:
                del self.backing[uid]
                self.active.add(uid)
        stale = [uid for uid, (_, since) in self.unschedulable.items() if now - since >= FLUSH_SECONDS]
        for uid in stale:
            del self.unschedulable[uid]
            self.active.add(uid)

    def next_wakeup(self) -> float | None:
        """When ``expire`` next has something to do (a back-off ending or a flush), if ever."""
        while self._heap and self.backing.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)
        times = [self._heap[0][0]] if self._heap else []
        if self.unschedulable:
            times.append(min(since for _, since in self.unschedulable.values()) + FLUSH_SECONDS)
        return min(times) if times else None

    def pop_backing(self, count: int) -> list[str]:
        """Up to ``count`` backing-off pods, those whose back-off ends first, made active now."""
        out: list[str] = []
        while self._heap and len(out) < count:
            until, uid = heapq.heappop(self._heap)
            if self.backing.get(uid) == until:
                del self.backing[uid]
                out.append(uid)
        return out

    def take(self) -> set[str]:
        """The active pods, for one pass; the queue's active set starts empty again."""
        out, self.active = self.active, set()
        return out
