"""What the scheduler says: unschedulable verdicts on pods, and the Events it records.

A pod the scheduler cannot place gets ``PodScheduled=False``/``Unschedulable`` (written when the
message changes) and a ``FailedScheduling`` Warning, repeated, counted, no more often than every
``EVENT_REPEAT_SECONDS`` for the same message. Verdicts are written oldest first, at most
``REPORT_RATE`` a second beyond a burst, so a flood of pending pods costs the plane little and a pod
placed before its turn is never reported. Other Events (``Scheduled``, PodGroup warnings) go out
behind the writes that matter, from a bounded queue that drops rather than waits, as client-go's
event broadcaster does. Which pods are still unplaced is the scheduler's to say (``unplaced``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.meta import Obj
from trainyard.client.events import event_body
from trainyard.client.resources import is_status, plain_resource
from trainyard.cluster.clients.scheduler.snapshot import PodInfo

log = logging.getLogger(__name__)

POD = plain_resource("", "v1", "Pod", "pods")
EVENT = plain_resource("", "v1", "Event", "events")

EVENT_REPEAT_SECONDS = 60.0  # the same FailedScheduling message, counted again no sooner than this
# Events (Scheduled, PodGroup warnings) go out behind the writes that matter, from a bounded queue.
EVENT_WRITERS = 2
EVENT_QUEUE = 1000  # client-go's event broadcaster queue length
REPORT_RATE = 10.0  # unschedulable verdicts written per second, beyond a burst of
REPORT_BURST = 20
RETRY_SECONDS = 0.5  # before judging again a pod whose status write met a newer version


def pod_ref(pod: PodInfo) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.name, "namespace": pod.namespace, "uid": pod.uid}


@dataclasses.dataclass
class Reported:
    """What was last said about an unschedulable pod: the message, when, and the event counting it."""

    message: str
    at: float
    written: str | None = None  # the message in the pod's PodScheduled condition
    event: str | None = None
    count: int = 0


class Reports:
    """The scheduler's voice: verdicts rate-limited and counted, events queued (see the module)."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        now: Callable[[], str],
        versions: dict[str, str],
        unplaced: Callable[[str], bool],
        retry: Callable[[str], None],
    ) -> None:
        self.client = client
        self.now = now
        self.versions = versions  # uid -> resourceVersion, the scheduler's: the precondition of writes
        self.unplaced = unplaced
        self.retry = retry
        self.reported: dict[str, Reported] = {}
        self._reports: OrderedDict[str, PodInfo] = OrderedDict()
        self._report_ready = asyncio.Event()
        self._outbox: asyncio.Queue[Obj] = asyncio.Queue(maxsize=EVENT_QUEUE)

    def workers(self) -> list[Coroutine[Any, Any, None]]:
        """The writers to run while the scheduler does: one of verdicts, ``EVENT_WRITERS`` of events."""
        return [self._reporter(), *(self._send_events() for _ in range(EVENT_WRITERS))]

    def said(self, uid: str) -> bool:
        """Whether the pod was reported unschedulable and has not been placed since."""
        return uid in self.reported

    def placed(self, uid: str) -> None:
        self.reported.pop(uid, None)

    def forget(self, uid: str) -> None:
        """The pod is gone: nothing more to say about it."""
        self.reported.pop(uid, None)
        self._reports.pop(uid, None)

    def report(self, pod: PodInfo, message: str) -> None:
        now = time.monotonic()
        before = self.reported.get(pod.uid)
        if before is not None and before.message == message and now - before.at < EVENT_REPEAT_SECONDS:
            return
        if before is None or before.message != message:
            before = self.reported[pod.uid] = Reported(message, now, written=before.written if before else None)
        before.at = now
        self._reports[pod.uid] = pod
        self._report_ready.set()

    async def _reporter(self) -> None:
        """Write verdicts oldest first, at most ``REPORT_RATE`` a second beyond a burst of ``REPORT_BURST``.

        Under a flood of unschedulable pods (kube-scheduler's client is rate-limited too) the
        reports lag, and a pod placed before its turn is never reported at all.
        """
        tokens, last = float(REPORT_BURST), time.monotonic()
        while True:
            if not self._reports:
                self._report_ready.clear()
                await self._report_ready.wait()
                continue
            uid, pod = self._reports.popitem(last=False)
            if not self.unplaced(uid):
                continue
            now = time.monotonic()
            tokens = min(float(REPORT_BURST), tokens + (now - last) * REPORT_RATE)
            last = now
            if tokens < 1:
                await asyncio.sleep((1 - tokens) / REPORT_RATE)
                tokens, last = 1.0, time.monotonic()
            tokens -= 1
            record = self.reported.get(uid)
            if not self.unplaced(uid) or record is None:
                continue  # placed (or gone) while this report waited its turn
            try:
                await self._write_unschedulable(pod, record)
            except Exception as exc:
                log.warning("could not report %s/%s unschedulable: %s", pod.namespace, pod.name, exc)

    async def _write_unschedulable(self, pod: PodInfo, record: Reported) -> None:
        if record.written != record.message:
            patch = {
                "metadata": {"resourceVersion": self.versions.get(pod.uid, "")},
                "status": {
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "False",
                            "reason": "Unschedulable",
                            "message": record.message,
                            "lastProbeTime": None,
                            "lastTransitionTime": self.now(),
                        }
                    ]
                },
            }
            try:
                await self.client.patch(
                    POD.Status, pod.name, patch, namespace=pod.namespace, patch_type=PatchType.STRATEGIC
                )
            except ApiError as exc:
                if is_status(exc, 409) or is_status(exc, 404):
                    # The pod changed since this verdict (or this cache lags): judge it again.
                    self.reported.pop(pod.uid, None)
                    asyncio.get_running_loop().call_later(RETRY_SECONDS, self.retry, pod.uid)
                    return
                raise
            record.written = record.message
        await self._count_event(pod, record)

    async def _count_event(self, pod: PodInfo, record: Reported) -> None:
        """A ``FailedScheduling`` event, or one more count on the one already recorded for this message."""
        now = self.now()
        if record.event is not None:
            record.count += 1
            try:
                await self.client.patch(
                    EVENT,
                    record.event,
                    {"count": record.count, "lastTimestamp": now},
                    namespace=pod.namespace,
                    patch_type=PatchType.MERGE,
                )
                return
            except ApiError as exc:
                if not is_status(exc, 404):
                    raise
        record.event = f"{pod.name}.{time.time_ns():x}"
        record.count = 1
        body = event_body(
            pod_ref(pod),
            type_="Warning",
            reason="FailedScheduling",
            message=record.message,
            component=pod.scheduler,
            now=now,
        )
        body["metadata"]["name"] = record.event
        if not await self._post(body):
            record.event = None

    def emit(self, body: Obj) -> None:
        """Queue an event; like client-go's broadcaster, a full queue drops it rather than wait."""
        try:
            self._outbox.put_nowait(body)
        except asyncio.QueueFull:
            ref = body["involvedObject"]
            log.warning("event queue full; dropped %s on %s/%s", body["reason"], ref["namespace"], ref["name"])

    async def _send_events(self) -> None:
        while True:
            body = await self._outbox.get()
            try:
                await self._post(body)
            except Exception as exc:  # events are best effort; the sender must outlive a bad one
                log.warning("could not record %s: %s", body.get("reason"), exc)

    async def _post(self, body: Obj) -> bool:
        try:
            await self.client.create(EVENT.from_dict(body))
        except ApiError as exc:
            ref = body["involvedObject"]
            log.warning("could not record %s on %s/%s: %s", body["reason"], ref["namespace"], ref["name"], exc)
            return False
        return True
