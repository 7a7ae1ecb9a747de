"""Writes pod statuses for the node agent the way the kubelet's status manager does: newest wins.

A status waiting to be written is replaced by a newer one for the same pod, so a container that
exits before its ``Running`` status went out costs one write, not two; writes for one pod go out
in order, and at most ``concurrency`` are in flight (a burst of pods must not pile hundreds of
requests into the client's connection pool). Each ``put`` returns a future that resolves once
that status, or a newer one, is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
Write = Callable[[str, str, Obj], Awaitable[None]]


class StatusWriter:
    def __init__(self, write: Write, concurrency: int) -> None:
        self._write = write
        self._slots = asyncio.Semaphore(concurrency)
        self._pending: dict[Key, tuple[Obj, list[asyncio.Future[None]]]] = {}
        self._busy: set[Key] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def put(self, namespace: str, name: str, status: Obj) -> asyncio.Future[None]:
        key = (namespace, name)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        _, waiting = self._pending.get(key, (status, []))
        self._pending[key] = (status, [*waiting, done])
        if key not in self._busy:
            self._busy.add(key)
            task = asyncio.create_task(self._drain(key))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return done

    async def _drain(self, key: Key) -> None:
        try:
            while key in self._pending:
                async with self._slots:
                    # Taken only once a slot is free: whatever arrived meanwhile replaced older statuses.
                    status, waiting = self._pending.pop(key)
                    try:
                        await self._write(key[0], key[1], status)
                    except Exception as exc:
                        for future in waiting:
                            if not future.done():
                                future.set_exception(exc)
                    else:
                        for future in waiting:
                            if not future.done():
                                future.set_result(None)
        finally:
            self._busy.discard(key)


def log_failure(future: asyncio.Future[None]) -> None:
    """Done-callback for a status nobody waits for: its failure is logged, never lost silently."""
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("could not write a pod status: %s", exc)
