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
``PodStatuses`` is what the agent reports through: a run's status rendered and put in its writer,
which patches it through the client (a pod gone meanwhile is no error) and puts the answer back in
the node's pod cache; none goes out after a pod's terminal status.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.meta import Obj
from trainyard.client.resources import is_status, to_dict
from trainyard.cluster import qos
from trainyard.cluster.clients.node.caches import POD, BoundPods
from trainyard.cluster.clients.node.conditions import TERMINAL, pod_conditions
from trainyard.cluster.clients.node.runs import PodRun

log = logging.getLogger(__name__)

Key = tuple[str, str]
Write = Callable[[str, str, Obj], Awaitable[None]]


def pod_status(
    run: PodRun,
    pod: Obj,
    phase: str,
    *,
    address: str,
    now: str,
    reason: str | None,
    message: str | None,
    disruption: Obj | None = None,
) -> Obj:
    statuses = [cr.status() for cr in run.containers]
    init_statuses = [cr.status() for cr in run.init_containers]
    status: Obj = {
        "phase": phase,
        "hostIP": address,
        "podIP": address,
        "podIPs": [{"ip": address}],
        "startTime": (pod.get("status") or {}).get("startTime") or now,
        "conditions": pod_conditions(phase, init_statuses, statuses) + ([disruption] if disruption else []),
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


class PodStatuses:
    def __init__(
        self, client: AsyncClient, bound: BoundPods, *, address: str, now: Callable[[], str], concurrency: int
    ) -> None:
        self.client = client
        self.bound = bound
        self.address = address
        self.now = now
        self._writer = StatusWriter(self._patch, concurrency, retryable=server_failed)

    async def report(
        self,
        run: PodRun,
        pod: Obj,
        phase: str,
        *,
        reason: str | None = None,
        message: str | None = None,
        wait: bool = True,
        hold: float = 0.0,
        disruption: Obj | None = None,
    ) -> None:
        """Write the pod's status (newest wins); with ``wait``, return once it is written.

        None goes out after the terminal one (probe results report too).
        """
        async with run.reporting:
            if run.final:
                return
            run.final = phase in TERMINAL
            status = pod_status(
                run,
                pod,
                phase,
                address=self.address,
                now=self.now(),
                reason=reason,
                message=message,
                disruption=disruption,
            )
            written = self._writer.put(run.namespace, run.name, status, hold=hold)
        if wait:
            await written
        else:
            written.add_done_callback(log_failure)

    async def _patch(self, namespace: str, name: str, status: Obj) -> None:
        try:
            # A plain-dict resource: the answer (the whole pod) is not decoded into typed models.
            answer = await self.client.patch(
                POD.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
            )
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
        else:
            self.bound.mutated(to_dict(answer))  # GPU admission reads phases from the cache
