"""Pod statuses as the node agent writes them, the way the kubelet's status manager does: newest wins.

``pod_status`` renders a run's status (phase, conditions, container statuses). ``StatusWriter``
writes them: a status waiting to be written is replaced by a newer one for the same pod, so a
container that exits before its ``Running`` status went out costs one write, not two; writes for
one pod go out in order, and at most ``concurrency`` are in flight (a burst of pods must not pile
hundreds of requests into the client's connection pool). A status put with ``hold`` waits that
long for a newer one unless a status without ``hold`` comes first: the agent holds a pod's first
``Running`` briefly, so a container that is done at once (``true``) goes from Pending to Succeeded
in one write, as a kubelet, which notices starts on its next relist, reports it. Each ``put``
returns a future that resolves once that status, or a newer one, is written. A write the server
failed to store (``retryable``, such as ``server_failed``: a full disk answers 507) is made again
``retry_after`` seconds later, with the newest status by then: as the kubelet's status manager
writes a status again on its next sync, none is lost, and the pod's status recovers with the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from lightkube.core.exceptions import ApiError

from trainyard.cluster import qos
from trainyard.cluster.node.conditions import pod_conditions
from trainyard.cluster.node.runs import PodRun

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Key = tuple[str, str]
Write = Callable[[str, str, Obj], Awaitable[None]]


def pod_status(
    run: PodRun, pod: Obj, phase: str, *, address: str, now: str, reason: str | None, message: str | None
) -> Obj:
    statuses = [cr.status() for cr in run.containers]
    init_statuses = [cr.status() for cr in run.init_containers]
    status: Obj = {
        "phase": phase,
        "hostIP": address,
        "podIP": address,
        "podIPs": [{"ip": address}],
        "startTime": (pod.get("status") or {}).get("startTime") or now,
        "conditions": pod_conditions(phase, init_statuses, statuses),
        "containerStatuses": statuses,
        "qosClass": qos.qos_class(pod.get("spec") or {}),
    }
    if run.init_containers:
        status["initContainerStatuses"] = init_statuses
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    return status


def server_failed(exc: Exception) -> bool:
    """Whether the API server answered a write with a 5xx (it could not store it): worth making again."""
    return isinstance(exc, ApiError) and (getattr(exc.status, "code", None) or 0) >= 500


class StatusWriter:
    def __init__(
        self,
        write: Write,
        concurrency: int,
        *,
        retryable: Callable[[Exception], bool] = lambda exc: False,
        retry_after: float = 2.0,
    ) -> None:
        self._write = write
        self._retryable = retryable
        self._retry_after = retry_after
        self._slots = asyncio.Semaphore(concurrency)
        self._pending: dict[Key, tuple[Obj, list[asyncio.Future[None]]]] = {}
        self._busy: set[Key] = set()
        self._held: dict[Key, asyncio.Event] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def put(self, namespace: str, name: str, status: Obj, *, hold: float = 0.0) -> asyncio.Future[None]:
        key = (namespace, name)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        _, waiting = self._pending.get(key, (status, []))
        self._pending[key] = (status, [*waiting, done])
        if hold <= 0 and (held := self._held.pop(key, None)) is not None:
            held.set()  # the held status goes out now, as this newer one
        if key not in self._busy:
            self._busy.add(key)
            if hold > 0:
                self._held[key] = asyncio.Event()
            task = asyncio.create_task(self._drain(key, hold))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return done

    async def _drain(self, key: Key, hold: float) -> None:
        try:
            if (held := self._held.get(key)) is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(held.wait(), hold)
                self._held.pop(key, None)
            while key in self._pending:
                again = False
                async with self._slots:
                    # Taken only once a slot is free: whatever arrived meanwhile replaced older statuses.
                    status, waiting = self._pending.pop(key)
                    try:
                        await self._write(key[0], key[1], status)
                    except Exception as exc:
                        if self._retryable(exc):
                            log.warning("pod %s/%s: status not written (%s), retrying", *key, exc)
                            newer, also = self._pending.get(key, (status, []))
                            self._pending[key] = (newer, [*waiting, *also])
                            again = True
                        else:
                            for future in waiting:
                                if not future.done():
                                    future.set_exception(exc)
                    else:
                        for future in waiting:
                            if not future.done():
                                future.set_result(None)
                if again:  # outside the slot: other pods' statuses go on meanwhile
                    await asyncio.sleep(self._retry_after)
        finally:
            self._busy.discard(key)


def log_failure(future: asyncio.Future[None]) -> None:
    """Done-callback for a status nobody waits for: its failure is logged, never lost silently."""
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("could not write a pod status: %s", exc)
