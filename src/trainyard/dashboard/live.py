"""The dashboard's live streams: the jobs list and a job's page, pushed as server-sent events.

Every change the informers see reaches each open stream as a mark on that stream (the latest
row per job for a list; "changed" for a page, plus new metric points; a job's changes and points
mark the page of the job controlling it too, a search's of its trials), and each stream's writer
sends what accumulated at most every ``COALESCE`` seconds: a burst of a thousand job changes is
one write per stream of the latest rows, never a thousand; a page is rebuilt once per burst.
A row is computed once per change, whatever the number of streams. A silent stream gets a
comment every ``HEARTBEAT`` seconds, so a closed tab is noticed and its stream dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

from trainyard.dashboard import views
from trainyard.dashboard.responses import event, open_stream
from trainyard.dashboard.views import Json
from trainyard.dashboard.watching import Change, Watched

PageReader = Callable[[], Awaitable[Json | None]]
"""Reads a job's page now (None once the job is gone)."""

COALESCE = 0.1
HEARTBEAT = 15.0


@dataclass(eq=False)
class _Stream:
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    rows: dict[str, tuple[str, Json]] = field(default_factory=dict)
    points: list[Json] = field(default_factory=list)
    changed: bool = False
    gone: bool = False


class Live:
    def __init__(self, watched: Watched, *, coalesce: float = COALESCE, heartbeat: float = HEARTBEAT) -> None:
        self.watched = watched
        self.coalesce = coalesce
        self.heartbeat = heartbeat
        self._lists: set[_Stream] = set()
        self._pages: dict[str, set[_Stream]] = {}
        watched.subscribers.append(self._changed)

    # -- what the informers and the recorder tell ---------------------------------------------------

    def _changed(self, change: Change) -> None:
        if change.what == "job" and self._lists:
            row = views.row(change.obj)
            for stream in self._lists:
                stream.rows[row["uid"]] = (change.type, row)
                stream.wake.set()
        for stream in self._pages.get(change.job_uid or "", ()):
            stream.changed = True
            stream.gone = stream.gone or (change.what == "job" and change.type == "DELETED")
            stream.wake.set()
        if change.what == "job" and change.job_uid:
            self._owner_changed(change.job_uid)

    def _owner_changed(self, uid: str) -> None:
        """The page of the job controlling the job of ``uid`` (a search's, of its trial) shows it too."""
        for stream in self._pages.get(self.watched.owner_job(uid) or "", ()):
            stream.changed = True
            stream.wake.set()

    def point(self, uid: str, point: Json) -> None:
        """A new metric point the recorder stored for the job of ``uid`` (its owner's page is rebuilt:
        a search's page draws its trials' curves)."""
        for stream in self._pages.get(uid, ()):
            stream.points.append(point)
            stream.wake.set()
        self._owner_changed(uid)

    # -- the streams -------------------------------------------------------------------------------

    async def jobs(self, request: web.Request) -> web.StreamResponse:
        """``snapshot`` of every job's row, then ``change`` events."""
        stream = _Stream()
        self._lists.add(stream)
        try:
            response = await open_stream(request)
            with contextlib.suppress(ConnectionResetError):  # the tab was closed
                rows = [views.row(job) for job in self.watched.all_jobs()]
                await response.write(event("snapshot", {"items": rows}))
                while await self._next(stream, response):
                    changes, stream.rows = stream.rows, {}
                    chunk = b"".join(event("change", {"type": t, "job": row}) for t, row in changes.values())
                    await response.write(chunk)
        finally:
            self._lists.discard(stream)
        return response

    async def page(self, request: web.Request, uid: str, detail: PageReader) -> web.StreamResponse:
        """``detail`` (the whole page) now and after each burst of changes, ``point`` for each new
        metric point, ``deleted`` once the job is gone."""
        stream = _Stream()
        self._pages.setdefault(uid, set()).add(stream)
        try:
            response = await open_stream(request)
            with contextlib.suppress(ConnectionResetError):  # the tab was closed
                first = await detail()
                if first is not None:
                    await response.write(event("detail", first))
                while await self._next(stream, response):
                    await response.write(await self._page_chunk(stream, uid, detail))
                    if stream.gone:
                        break
        finally:
            pages = self._pages.get(uid)
            if pages is not None:
                pages.discard(stream)
                if not pages:
                    del self._pages[uid]
        return response

    @staticmethod
    async def _page_chunk(stream: _Stream, uid: str, detail: PageReader) -> bytes:
        chunks = [event("point", p) for p in stream.points]
        stream.points = []
        if stream.changed:
            stream.changed = False
            page = await detail()
            if page is not None:
                chunks.append(event("detail", page))
        if stream.gone:
            chunks.append(event("deleted", {"uid": uid}))
        return b"".join(chunks)

    async def _next(self, stream: _Stream, response: web.StreamResponse) -> bool:
        """Wait for something to send (heartbeats meanwhile); False once the client has gone."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stream.wake.wait(), self.heartbeat)
                break
            try:
                await response.write(b": keep-alive\n\n")
            except (ConnectionResetError, RuntimeError):
                return False
        await asyncio.sleep(self.coalesce)
        stream.wake.clear()
        return True
