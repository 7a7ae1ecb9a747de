"""Fan-out of store changes to watch streams, with Kubernetes filter-transition semantics.

Each watch gets its own queue. A change is delivered as the watcher would see it through its
selectors: an object that starts matching arrives as ADDED, one that stops matching as DELETED.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from trainyard.cluster.store import Change, Obj

Filter = Callable[[Obj], bool]


@dataclass(frozen=True)
class Event:
    rv: int
    type: str
    obj: Obj


@dataclass(eq=False)
class Subscription:
    resource: str
    namespace: str | None
    accepts: Filter
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)

    def translate(self, change: Change) -> Event | None:
        if change.resource != self.resource or (self.namespace is not None and change.namespace != self.namespace):
            return None
        now = change.type != "DELETED" and self.accepts(change.obj)
        before = change.old is not None and self.accepts(change.old)
        if change.type == "DELETED":
            return Event(change.rv, "DELETED", change.obj) if before else None
        if change.type == "ADDED":
            return Event(change.rv, "ADDED", change.obj) if now else None
        if now and before:
            return Event(change.rv, "MODIFIED", change.obj)
        if now:
            return Event(change.rv, "ADDED", change.obj)
        if before:
            return Event(change.rv, "DELETED", change.obj)
        return None


class Hub:
    def __init__(self) -> None:
        self._subs: set[Subscription] = set()

    def subscribe(self, resource: str, namespace: str | None, accepts: Filter) -> Subscription:
        sub = Subscription(resource, namespace, accepts)
        self._subs.add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)

    def publish(self, change: Change) -> None:
        for sub in list(self._subs):
            event = sub.translate(change)
            if event is not None:
                sub.queue.put_nowait(event)

    @property
    def watchers(self) -> int:
        return len(self._subs)
