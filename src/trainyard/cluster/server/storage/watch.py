"""Fan-out of store changes to watch streams, with Kubernetes filter-transition semantics.

Each watch gets its own queue. A change is delivered as the watcher would see it through its
selectors: an object that starts matching arrives as ADDED, one that stops matching as DELETED.
Events keep a reference to their change, whose encoded watch line is shared by every watcher
that sees it the same way, so a change is serialized once however many watch it.

Once a watch has sent its initial events it can trade its queue for a ``ChunkedSink``: the hub
then hands it events directly and the sink writes them to the connection once per event-loop
pass, with no task switch per event; a write burst reaches each watcher as one send. A reader in
this process that asked for objects gets an ``ObjectSink`` instead: each event as its own decoded
copy, with no line to encode, frame, split and parse again on the other side.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from trainyard.api.meta import Obj
from trainyard.cluster.server.storage.store import Change

Filter = Callable[[Obj], bool]
# An event as a reader in this process takes it, and the size it counts for (``ObjectSink``).
Decoded = tuple[tuple[str, Obj], int]
# A watcher whose connection has not taken this much is too slow; it is cut off, as the real
# server does, and resumes from its last resourceVersion.
SLOW_WATCHER_BYTES = 16 * 1024 * 1024


class Transport(Protocol):
    def write(self, data: bytes) -> None: ...

    def is_closing(self) -> bool: ...

    def get_write_buffer_size(self) -> int: ...

    def abort(self) -> None: ...


class ObjectTransport(Transport, Protocol):
    """A transport to a reader in this process that also takes events as objects, in order with
    what ``write`` sends (``loopback.Pipe``), when ``carries_objects`` says its reader asked."""

    carries_objects: bool
    lean: bool  # the objects without ``metadata.managedFields`` (``Change.lean``)

    def put(self, item: tuple[str, Obj], size: int) -> None: ...


class Event(NamedTuple):  # a tuple: one is made per watcher per change
    rv: int
    type: str
    obj: Obj
    change: Change | None = None

    def line(self, api_version: str, kind: str) -> bytes | None:
        """This event as one encoded watch line, or None when it has no stored encoding."""
        return self.change.line(self.type, api_version, kind) if self.change is not None else None


@dataclass(eq=False)
class Subscription:
    resource: str
    namespace: str | None
    accepts: Filter | None  # None: every object (no selectors)
    queue: asyncio.Queue[Event] = field(default_factory=asyncio.Queue)
    sink: Callable[[Event], None] | None = None

    def deliver(self, event: Event) -> None:
        if self.sink is not None:
            self.sink(event)
        else:
            self.queue.put_nowait(event)

    def attach(self, sink: Callable[[Event], None]) -> None:
        """From now on hand events to ``sink`` directly; what is queued goes first, in order."""
        while not self.queue.empty():
            sink(self.queue.get_nowait())
        self.sink = sink

    def translate(self, change: Change) -> Event | None:
        if change.resource != self.resource or (self.namespace is not None and change.namespace != self.namespace):
            return None
        if self.accepts is None:
            return Event(change.rv, change.type, change.obj, change)
        if change.type == "DELETED":  # the object as it went: what the watcher last saw of it
            return Event(change.rv, "DELETED", change.obj, change) if self.accepts(change.obj) else None
        now = self.accepts(change.obj)
        if change.type == "ADDED":
            return Event(change.rv, "ADDED", change.obj, change) if now else None
        before = change.old is not None and self.accepts(change.old)
        if now and before:
            return Event(change.rv, "MODIFIED", change.obj, change)
        if now:
            return Event(change.rv, "ADDED", change.obj, change)
        if before:
            return Event(change.rv, "DELETED", change.obj, change)
        return None

    async def next_batch(self, timeout: float) -> list[Event]:
        """Every queued event, waiting up to ``timeout`` seconds for the first; [] on timeout.

        A watcher that fell behind gets its backlog in one piece, to send with one write.
        """
        if self.queue.empty():
            try:
                async with asyncio.timeout(timeout):
                    first = await self.queue.get()
            except TimeoutError:
                return []
            batch = [first]
        else:
            batch = []
        while not self.queue.empty():
            batch.append(self.queue.get_nowait())
        return batch


class Hub:
    def __init__(self) -> None:
        # By resource, so a change costs nothing to the watchers of other resources.
        self._subs: dict[str, set[Subscription]] = {}
        self.flusher = Flusher()

    def subscribe(self, resource: str, namespace: str | None, accepts: Filter | None) -> Subscription:
        sub = Subscription(resource, namespace, accepts)
        self._subs.setdefault(resource, set()).add(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.get(sub.resource, set()).discard(sub)

    def publish(self, change: Change) -> None:
        subs = self._subs.get(change.resource)
        if not subs:
            return
        for sub in list(subs):
            event = sub.translate(change)
            if event is not None:
                sub.deliver(event)

    @property
    def watchers(self) -> int:
        return sum(len(subs) for subs in self._subs.values())


class Flusher:
    """Flushes every sink written to during one event-loop pass, from one scheduled callback."""

    def __init__(self) -> None:
        self._dirty: list[ChunkedSink] = []

    def mark(self, sink: ChunkedSink) -> None:
        if not self._dirty:
            asyncio.get_running_loop().call_soon(self._flush)
        self._dirty.append(sink)

    def _flush(self) -> None:
        dirty, self._dirty = self._dirty, []
        for sink in dirty:
            sink.flush()


class ChunkedSink:
    """Writes watch lines to a response's transport, batched per event-loop pass.

    ``encode`` turns an event into its line (or None to skip it). Everything written to the
    stream while the sink is attached must go through it (``raw``), to keep lines in order.
    ``chunked``: each batch is framed as an HTTP/1.1 chunk; a transport in this process (the
    loopback's) takes the lines as they are.
    """

    def __init__(
        self, transport: Transport, encode: Callable[[Event], bytes | None], flusher: Flusher, *, chunked: bool = True
    ) -> None:
        self._transport = transport
        self._encode = encode
        self._flusher = flusher
        self._chunked = chunked
        self._pending: list[bytes] = []

    def __call__(self, event: Event) -> None:
        line = self._encode(event)
        if line is not None:
            self.raw(line)

    def raw(self, line: bytes) -> None:
        if not self._pending:
            self._flusher.mark(self)
        self._pending.append(line)

    def flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        transport = self._transport
        if _taking(transport):
            transport.write(b"%x\r\n" % len(data) + data + b"\r\n" if self._chunked else data)


class ObjectSink:
    """Hands watch events to a reader in this process as ``(type, object)``: ``decode`` gives the
    change's one decoding (or None to skip it), shared by every reader of it, none of which changes it.

    Same contract as ``ChunkedSink``: ``raw`` lines (bookmarks) keep their place among the events,
    and a reader that has not taken ``SLOW_WATCHER_BYTES`` (the events' stored sizes) is cut off.
    """

    def __init__(self, transport: ObjectTransport, decode: Callable[[Event], Decoded | None]) -> None:
        self._transport = transport
        self._decode = decode

    def __call__(self, event: Event) -> None:
        if _taking(self._transport):
            made = self._decode(event)
            if made is not None:
                self._transport.put(*made)

    def raw(self, line: bytes) -> None:
        if not self._transport.is_closing():
            self._transport.write(line)

    def flush(self) -> None:
        """Nothing waits: every event went to the reader as it came."""


def _taking(transport: Transport) -> bool:
    """Whether ``transport`` takes more; one whose reader fell ``SLOW_WATCHER_BYTES`` behind is cut off."""
    if transport.is_closing():
        return False
    if transport.get_write_buffer_size() > SLOW_WATCHER_BYTES:
        transport.abort()
        return False
    return True
