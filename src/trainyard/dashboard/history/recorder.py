"""The recorder: what the dashboard watches (``watching.Watched``), written into the history store.

Every change of a job is its latest object (and, when its report is new, a metric point, which
``on_point``'s callbacks get as soon as it is written: the live charts read them); a deleted job
keeps its final object; every pod and event of a job is kept as last seen. A container's log is
read through the API (``pods/log``, the last ``log_bytes`` kept) when the container terminates,
when its pod starts terminating (still readable then), and when the job finishes or goes; a few
reads at a time, and a read that fails is logged and skipped.

Writes are queued by the subscriber (which runs in the informers' event loop and must not wait)
and written by one task, a burst at a time: it waits ``BATCH_WINDOW`` after the first write of a
burst, then writes all that came, ``MAX_BATCH`` writes a transaction, in a thread, so neither a
thousand jobs created at once nor the disk's flushes hold the loop up (``bench/history.py``
measures both). Every ``prune_every`` the history is pruned. Once the watches have listed every
job, a job the store has as live that the cluster no longer holds (deleted while no recorder ran)
is recorded as deleted then.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.api.meta import Obj, format_time
from trainyard.dashboard import views
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.watching import Change, Watched

log = logging.getLogger(__name__)

Json = dict[str, Any]
PointListener = Callable[[str, Json], None]

BATCH_WINDOW = 0.05
"""Seconds the writer waits after a burst's first write for the rest of it (a report reaches a chart
within this and one transaction)."""
MAX_BATCH = 200
"""Writes in one transaction at most: a reader of the store waits for one transaction at most (at
5,000 to 10,000 writes a second, 20 to 40 ms)."""
LINES_PER_TURN = 2000
"""Lines of a log read between two turns given to the event loop."""
LOG_READERS = 4
"""Logs read at once: each read holds up to a container's current log file in memory."""
DONE_PHASES = ("Succeeded", "Failed")
OBJECT_EVERY = timedelta(seconds=30)
"""How stale a running job's object in the history may get between its reports (each is a point)."""


@dataclass(frozen=True)
class _Write:
    """One store write the writer task makes: ``what`` names the store method."""

    what: str
    job_uid: str
    obj: Obj
    when: str = ""
    pod: str = ""
    container: str = ""
    data: bytes = b""


class Recorder:
    """Fills ``store`` from ``watched``'s changes; ``run`` writes (the informers are ``watched.run``'s)."""

    def __init__(
        self,
        client: AsyncClient,
        watched: Watched,
        store: HistoryStore,
        *,
        clock: Callable[[], datetime],
        log_bytes: int = 1 << 20,
        prune_every: timedelta = timedelta(minutes=10),
    ) -> None:
        self.client = client
        self.watched = watched
        self.store = store
        self.clock = clock
        self.log_bytes = log_bytes
        self.prune_every = prune_every
        self.on_point: list[PointListener] = []
        self._queue: list[_Write] = []
        self._wake = asyncio.Event()
        self._readers = asyncio.Semaphore(LOG_READERS)
        self._reads: set[asyncio.Task[None]] = set()
        # Log reads already made or under way, by pod uid: (container, why); each trigger reads once.
        self._read_for: dict[str, set[tuple[str, str]]] = {}
        # Reads of each container by (pod uid, container): how many started, the latest kept.
        self._started: dict[tuple[str, str], int] = {}
        self._kept: dict[tuple[str, str], int] = {}
        # Pods by uid -> their job's uid: a pod changing after its job went is no longer under it in
        # the watch's indexes, and its last states still belong to the job's history.
        self._pod_job: dict[str, str] = {}
        self._finished: set[str] = set()  # the jobs whose finish has been seen (their logs read)
        self._object_at: dict[str, datetime] = {}  # when each job's whole object was last written
        watched.subscribers.append(self._on_change)

    # -- from the watches ------------------------------------------------------------------------

    def _on_change(self, change: Change) -> None:
        if change.what == "job":
            self._job_changed(change)
        elif change.what == "pod":
            self._pod_changed(change)
        elif (
            change.what == "event" and change.job_uid and (change.type == "DELETED" or change.job_uid in self._finished)
        ):
            # A running job's events are taken from the cache when it ends (``_snapshot``); one that
            # expires before (kube's TTL is an hour) is kept as it goes, and an ended job's as they come.
            self._put(_Write("event", change.job_uid, change.obj))

    def _keeps_event(self, change: Change) -> bool:
        """A running job's events are taken from the cache when it ends (``_snapshot``); one that
        expires before (kube's TTL is an hour) is kept as it goes, and an ended job's as they come."""
        return bool(change.job_uid) and (change.type == "DELETED" or change.job_uid in self._finished)

    def _job_changed(self, change: Change) -> None:
        job, uid = change.obj, change.job_uid or ""
        if not uid:
            return
        if change.type == "DELETED":
            self._snapshot(uid, listed=False)
            self._put(_Write("deleted", uid, job, when=format_time(self.clock())))
            self._finished.discard(uid)
            self._object_at.pop(uid, None)
            return
        now = self.clock()
        deleting = bool((job.get("metadata") or {}).get("deletionTimestamp"))
        ending = uid not in self._finished and (deleting or views.finished_at(job) is not None)
        # A running job changes with every report: each is a point, and its whole object is written
        # when first seen, as it ends, and at most every OBJECT_EVERY meanwhile (what a crash loses).
        last = self._object_at.get(uid)
        whole = last is None or ending or uid in self._finished or now - last >= OBJECT_EVERY
        if whole:
            self._object_at[uid] = now
        self._put(_Write("job" if whole else "report", uid, job, when=format_time(now)))
        if ending:
            self._finished.add(uid)
            self._snapshot(uid, listed=change.type == "ADDED")

    def _snapshot(self, uid: str, *, listed: bool) -> None:
        """The job's pods and events as the caches hold them now, and its pods' logs: at its finish
        and its deletion, whatever changes of theirs were missed. ``listed``: the job was found
        finished when the watches started, so a log the history has already is not read again."""
        for pod in self.watched.pods_of(uid):
            self._pod_job[str(pod["metadata"].get("uid") or "")] = uid
            self._put(_Write("pod", uid, pod))
            self._read_logs(uid, pod, "job-ended", listed=listed)
        for event in self.watched.events_of(uid):
            self._put(_Write("event", uid, event))

    def _pod_changed(self, change: Change) -> None:
        pod = change.obj
        meta = pod.get("metadata") or {}
        pod_uid = str(meta.get("uid") or "")
        uid = change.job_uid or self._pod_job.get(pod_uid)
        if uid is None:
            return
        if change.type == "DELETED":
            self._pod_job.pop(pod_uid, None)
            self._read_for.pop(pod_uid, None)
            for spec in (pod.get("spec") or {}).get("containers") or []:
                self._started.pop((pod_uid, str(spec.get("name") or "")), None)
                self._kept.pop((pod_uid, str(spec.get("name") or "")), None)
        else:
            self._pod_job[pod_uid] = uid
        status = pod.get("status") or {}
        # A running job's pods are read from the cache when it ends (``_snapshot``); before, a pod is
        # kept as it ends or goes (a gang restart replaces them), so its last state is in the history.
        final = change.type == "DELETED" or meta.get("deletionTimestamp") or status.get("phase") in DONE_PHASES
        if final or uid in self._finished:
            self._put(_Write("pod", uid, pod))
        if change.type == "DELETED":
            return  # its logs went with it; what could be read was read while it terminated
        listed = change.type == "ADDED"  # found as it is when the watches started (or created)
        if meta.get("deletionTimestamp"):
            self._read_logs(uid, pod, "deleting", listed=listed)  # still readable while it terminates
        elif status.get("phase") in DONE_PHASES:
            self._read_logs(uid, pod, "done", listed=listed)
        else:
            self._read_logs(uid, pod, None, listed=listed)

    def _read_logs(self, uid: str, pod: Obj, why: str | None, *, listed: bool) -> None:
        """Read the pod's containers' logs: a terminated container's once per termination, whatever asks
        (its log is whole then); a running one's once for each ``why`` (its pod ends or goes, its job
        ends), None: not at all."""
        meta = pod.get("metadata") or {}
        states = {c.get("name"): c for c in (pod.get("status") or {}).get("containerStatuses") or []}
        read = self._read_for.setdefault(str(meta.get("uid") or ""), set())
        for spec in (pod.get("spec") or {}).get("containers") or []:
            container = str(spec.get("name") or "")
            state = states.get(container) or {}
            ended = (state.get("state") or {}).get("terminated")
            trigger = f"terminated {state.get('restartCount', 0)} {ended.get('finishedAt')}" if ended else why
            if trigger is None or (container, trigger) in read:
                continue
            read.add((container, trigger))
            key = (str(meta.get("uid") or ""), container)
            self._started[key] = number = self._started.get(key, 0) + 1
            task = asyncio.get_running_loop().create_task(
                self._read_log(uid, key, str(meta.get("namespace") or ""), str(meta.get("name") or ""), number, listed),
                name=f"history log {meta.get('name')}/{container}",
            )
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)

    async def _read_log(
        self, uid: str, key: tuple[str, str], namespace: str, pod: str, number: int, listed: bool
    ) -> None:
        container = key[1]
        async with self._readers:
            # A restarted dashboard lists every finished job again: the logs it kept stay as they are.
            if listed and await asyncio.to_thread(self.store.has_log, uid, pod, container):
                return
            try:
                data = await self._fetch_log(namespace, pod, container)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # The pod gone already, or its container never started (404, 400): nothing to keep.
                routine = isinstance(exc, ApiError) and getattr(exc.status, "code", None) in (400, 404)
                level = logging.INFO if routine else logging.WARNING
                log.log(level, "history: no log kept of %s/%s container %s: %s", namespace, pod, container, exc)
                return
        # Reads run side by side: one that started earlier saw less of the log and must not
        # replace what a later one kept.
        if data and self._kept.get(key, 0) < number:
            self._kept[key] = number
            self._put(_Write("log", uid, {}, pod=pod, container=container, data=data))

    async def _fetch_log(self, namespace: str, pod: str, container: str) -> bytes:
        """The end of the container's log as ``kubectl logs`` gives it, the last ``log_bytes`` kept as it
        streams in (``limitBytes`` would keep its start)."""
        kept = bytearray()
        count = 0
        async for line in self.client.log(pod, namespace=namespace, container=container):
            kept += line.encode()
            if len(kept) > 2 * self.log_bytes:
                del kept[: len(kept) - self.log_bytes]
            count += 1
            if count % LINES_PER_TURN == 0:
                # The plane's own reads come in-process, whole: the lines are there without a wait, so
                # the loop would not turn until the last one (a 10 MiB log is 150,000 lines).
                await asyncio.sleep(0)
        return bytes(kept)

    def _put(self, write: _Write) -> None:
        self._queue.append(write)
        self._wake.set()

    # -- the writer ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Write what the watches bring until cancelled (the log reads under way are cancelled too)."""
        loop = asyncio.get_running_loop()
        helpers = [
            loop.create_task(self._sweep_when_listed(), name="history sweep"),
            loop.create_task(self._pruning(), name="history pruning"),
        ]
        try:
            # No wait_for around the wake-up: Python 3.11's can swallow a cancel that lands as
            # the wait ends, and the recorder would then never stop.
            while True:
                await self._wake.wait()
                await asyncio.sleep(BATCH_WINDOW)
                await self.flush()
        finally:
            for task in [*helpers, *self._reads]:
                task.cancel()
            # What the last burst left is written before the recorder stops (a thread would outlive it).
            if self._queue:
                writes, self._queue = self._queue, []
                try:
                    self._write(writes)
                except Exception:
                    log.exception("history: %d writes lost at shutdown", len(writes))

    async def _pruning(self) -> None:
        while True:
            try:
                pruned = await asyncio.to_thread(self.store.prune, self.clock())
            except Exception:
                log.exception("history: pruning failed; trying again in %s", self.prune_every)
            else:
                if pruned:
                    log.info("history: pruned %d jobs", pruned)
            await asyncio.sleep(self.prune_every.total_seconds())

    async def flush(self) -> None:
        """Write everything queued now, ``MAX_BATCH`` writes a transaction, telling ``on_point`` of the
        new points after each."""
        self._wake.clear()
        while self._queue:
            # A bounded transaction at a time: under a burst the first points reach the charts
            # while the rest is written, and the thread never holds the lock for long.
            writes, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            await self._flush(writes)

    async def _flush(self, writes: list[_Write]) -> None:
        try:
            points = await asyncio.to_thread(self._write, writes)
        except Exception:
            # A disk full or a file gone: the history misses this burst; the dashboard goes on.
            log.exception("history: %d writes lost", len(writes))
            return
        for uid, point in points:
            for listener in list(self.on_point):
                try:
                    listener(uid, point)
                except Exception:
                    log.exception("a history point listener failed")

    def _write(self, writes: list[_Write]) -> list[tuple[str, Json]]:
        store, points = self.store, []
        with store.batch():
            for w in writes:
                point = None
                if w.what == "job":
                    point = store.record_job(w.obj, w.when)
                elif w.what == "report":
                    point = store.record_report(w.obj, w.when)
                elif w.what == "deleted":
                    point = store.mark_deleted(w.obj, w.when)
                elif w.what == "pod":
                    store.record_pod(w.job_uid, w.obj)
                elif w.what == "event":
                    store.record_event(w.job_uid, w.obj)
                elif w.what == "log":
                    store.record_log(w.job_uid, w.pod, w.container, w.data)
                if point is not None:
                    points.append((w.job_uid, point))
        return points

    async def _sweep_when_listed(self) -> None:
        """Once every job kind is listed: the jobs deleted while no recorder watched are deleted now."""
        await asyncio.gather(*(informer.synced.wait() for informer in self.watched.jobs.values()))
        live = await asyncio.to_thread(self.store.live_uids)
        when = format_time(self.clock())
        for uid in live:
            if self.watched.job_by_uid(uid) is None:
                job = await asyncio.to_thread(self.store.job, uid)
                if job is not None:
                    self._put(_Write("deleted", uid, job, when=when))
