"""The responses that stay open: watches, and the logs of a pod followed as they grow.

A watch starts from the list it asks for (``resourceVersion=0``, ``sendInitialEvents``) or from
the store's change log at a revision (410 ``Expired`` once the revision is gone), then follows
``storage.watch``'s hub until ``timeoutSeconds`` (30 minutes by default), with bookmarks when the
client allows them. Plain watchers share each change's one encoding, written straight from the
hub; a watcher that asked for Tables gets its rows printed per event. A watch writes through an
``Outgoing``: its HTTP response (``HttpOut``), or the reader in this process (``loopback``). A log
reads the container's CRI file (``trainyard.cluster.logs``) with kubectl's options checked as
``ValidatePodLogOptions`` does, and with ``follow`` keeps writing until the container ends or the
pod goes.

Callers: ``server``, which routes to ``Streams.watch`` and ``Streams.log``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, cast

from aiohttp import web

from trainyard.api.meta import Obj, parse_time
from trainyard.cluster import logs
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import errors, tables
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.requests import query
from trainyard.cluster.server.apiserver.requests.fields import matches
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest, Outgoing
from trainyard.cluster.server.apiserver.requests.selectors import FieldSelector, LabelSelector
from trainyard.cluster.server.storage import codec
from trainyard.cluster.server.storage.store import Expired
from trainyard.cluster.server.storage.watch import (
    ChunkedSink,
    Decoded,
    Event,
    Hub,
    ObjectSink,
    ObjectTransport,
    Transport,
)

# Without timeoutSeconds a real server keeps a watch open 30-60 minutes.
DEFAULT_WATCH_SECONDS = 1800
BOOKMARK_SECONDS = 60.0
MAX_SINCE_SECONDS = 100 * 365 * 86400


class Streams:
    def __init__(
        self, objects: Objects, hub: Hub, layout: Layout, *, bookmark_seconds: float = BOOKMARK_SECONDS
    ) -> None:
        self.objects = objects
        self.hub = hub
        self.layout = layout
        self.bookmark_seconds = bookmark_seconds

    def now(self) -> datetime:
        return self.objects.clock()

    async def watch(
        self,
        request: ApiRequest,
        out: Outgoing,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
    ) -> web.StreamResponse:
        as_table = query.wants_table(request)
        bookmarks = query.flag(request.query.get("allowWatchBookmarks"))
        timeout = query.int64(request.query, "timeoutSeconds")
        timeout = DEFAULT_WATCH_SECONDS if timeout is None else timeout
        deadline = asyncio.get_running_loop().time() + timeout
        store_ns = namespace if rt.namespaced else None
        selected = None if labels is None and fields is None else lambda o: matches(rt, o, labels, fields)
        sub = self.hub.subscribe(rt.key, store_ns, selected)
        await out.start({"Content-Type": query.JSON, "Cache-Control": "no-cache"})
        direct: ChunkedSink | ObjectSink | None = None
        last = 0  # the newest revision this watcher has been sent

        def line(kind: str, obj: Obj) -> bytes:
            if as_table and kind in ("ADDED", "MODIFIED", "DELETED"):
                obj = tables.table(
                    rt,
                    [obj],
                    now=self.now(),
                    resource_version=obj["metadata"].get("resourceVersion", ""),
                    include_object=request.query.get("includeObject", "Metadata"),
                )
            return codec.dumps({"type": kind, "object": obj}) + b"\n"

        def event_line(ev: Event) -> bytes:
            # Plain watchers share the change's one encoding; Tables are per watcher (ages, columns).
            shared = None if as_table else ev.line(rt.group_version, rt.kind)
            return shared if shared is not None else line(ev.type, self.objects.present(rt, ev.obj))

        async def send(kind: str, obj: Obj) -> None:
            await out.write(line(kind, obj))

        def live_line(ev: Event) -> bytes | None:
            nonlocal last
            if ev.rv <= last:
                return None
            last = ev.rv
            return event_line(ev)

        lean = bool(getattr(out.transport, "lean", False))

        def live_object(ev: Event) -> Decoded | None:
            nonlocal last
            if ev.rv <= last:
                return None
            last = ev.rv
            if ev.change is None:
                data = codec.dumps(ev.obj)
                return (ev.type, {"apiVersion": rt.group_version, "kind": rt.kind, **codec.loads(data)}), len(data)
            return (ev.type, ev.change.decoded(rt.group_version, rt.kind, lean=lean)), len(ev.change.stored(lean=lean))

        def bookmark() -> Obj:
            rv = str(self.objects.store.revision)
            return {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": {"resourceVersion": rv}}

        try:
            rv_param = request.query.get("resourceVersion") or "0"
            initial_events = query.flag(request.query.get("sendInitialEvents"))
            if rv_param == "0" or initial_events:
                if as_table:
                    items, last = self.objects.list(rt, store_ns, labels, fields)
                    for item in items:
                        await send("ADDED", item)
                else:
                    encoded, last = self.objects.list_encoded(rt, store_ns, labels, fields)
                    await _write_lines(out, [codec.watch_line("ADDED", item) for item in encoded])
                if initial_events and bookmarks:
                    # Streaming lists (client-go's WatchList, kubectl >= 1.35) wait for this marker.
                    end = {"resourceVersion": str(last), "annotations": {"k8s.io/initial-events-end": "true"}}
                    await send("BOOKMARK", {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": end})
            else:
                try:
                    start = int(rv_param)
                    if start > self.objects.store.revision:
                        raise Expired(start, self.objects.store.revision)
                    backlog = self.objects.store.changes_since(start, rt.key)
                except (Expired, ValueError) as exc:
                    status = errors.ApiError(
                        410,
                        "Expired",
                        str(exc) if isinstance(exc, Expired) else f"invalid resourceVersion {rv_param!r}",
                    )
                    await send("ERROR", status.status())
                    return out.answer()
                last = start
                lines = []
                for change in backlog:
                    event = sub.translate(change)
                    if event is not None:
                        lines.append(event_line(event))
                    last = change.rv
                await _write_lines(out, lines)
            loop = asyncio.get_running_loop()
            if not as_table and out.transport is not None:
                # Plain watchers take changes straight from the hub (see watch.ChunkedSink); a
                # reader in this process that asked for objects takes them decoded (ObjectSink).
                if getattr(out.transport, "carries_objects", False):
                    direct = ObjectSink(cast(ObjectTransport, out.transport), live_object)
                else:
                    direct = ChunkedSink(out.transport, live_line, self.hub.flusher, chunked=out.chunked)
                sub.attach(direct)
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                if direct is not None:
                    await asyncio.sleep(min(remaining, self.bookmark_seconds))
                    if bookmarks and loop.time() < deadline:
                        direct.raw(line("BOOKMARK", bookmark()))
                    continue
                batch = await sub.next_batch(min(remaining, self.bookmark_seconds))
                if not batch:
                    if bookmarks and sub.queue.empty():
                        await send("BOOKMARK", bookmark())
                    continue
                lines = []
                for ev in batch:
                    if ev.rv <= last:
                        continue
                    last = ev.rv
                    lines.append(event_line(ev))
                if lines:
                    await out.write(b"".join(lines))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.hub.unsubscribe(sub)
            if direct is not None:
                direct.flush()  # before the response's last chunk
        return out.answer()

    async def log(self, request: ApiRequest, rt: ResourceType, namespace: str, name: str) -> web.StreamResponse:
        """``pods/log``: ``rt`` is the pods resource, the only one with the subresource. A log read
        whole is one answer, which the plane's own clients get in-process (``loopback``); a followed
        one writes to its HTTP connection as it goes."""
        q = request.query
        tail, limit, since_seconds = _log_options(q, name)
        pod = self.objects.get(rt, namespace, name)
        names = [c["name"] for c in pod.get("spec", {}).get("containers", [])]
        names += [c["name"] for c in pod.get("spec", {}).get("initContainers") or []]
        container = q.get("container")
        if not container:
            if len(pod["spec"]["containers"]) != 1:
                raise errors.bad_request(f"a container name must be specified for pod {name}, choose one of: {names}")
            container = names[0]
        if container not in names:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        uid = pod["metadata"]["uid"]
        previous = query.flag(q.get("previous"))
        path = self.layout.container_log(namespace, name, uid, container, previous=previous)
        if not path.exists():
            if previous:
                raise errors.bad_request(f'previous terminated container "{container}" in pod "{name}" not found')
            raise errors.bad_request(
                f'container "{container}" in pod "{name}" is waiting to start: {_waiting_reason(pod, container)}'
            )
        since = None
        if since_seconds is not None:
            # Anything older than the plane's logs means "everything"; a huge value must not overflow.
            since = self.now() - timedelta(seconds=min(since_seconds, MAX_SINCE_SECONDS))
        elif q.get("sinceTime"):
            try:
                since = parse_time(q["sinceTime"])
            except ValueError as exc:
                raise errors.bad_request(f'invalid sinceTime "{q["sinceTime"]}": not an RFC3339 time') from exc
        timestamps = query.flag(q.get("timestamps"))
        # A thread: the current file alone may be containerLogMaxSize (10Mi by default) of records.
        text, position = await asyncio.to_thread(
            logs.read, path, tail_lines=tail, since=since, timestamps=timestamps, limit_bytes=limit
        )
        if not query.flag(q.get("follow")) or previous:
            return web.Response(body=text, content_type="text/plain")
        if not isinstance(request, web.Request):
            raise errors.ApiError(500, "InternalError", "a followed log is served over HTTP only, not in-process")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(text)
        sent = len(text)

        def finished() -> bool:
            current = self.objects.store.get(rt.key, namespace, name)
            return current is None or current["metadata"]["uid"] != uid or _container_done(current, container)

        try:
            async for chunk in logs.follow(path, position, timestamps=timestamps, finished=finished):
                if limit is not None:
                    chunk = chunk[: max(limit - sent, 0)]
                if chunk:
                    await response.write(chunk)
                    sent += len(chunk)
                if limit is not None and sent >= limit:
                    break
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return response


def _log_options(q: Any, name: str) -> tuple[int | None, int | None, int | None]:
    """tailLines, limitBytes and sinceSeconds, checked as ``ValidatePodLogOptions`` does."""
    values: dict[str, int | None] = {}
    causes = []
    for key, minimum, rule in (
        ("tailLines", 0, "must be greater than or equal to 0"),
        ("limitBytes", 1, "must be greater than 0"),
        ("sinceSeconds", 1, "must be greater than 0"),
    ):
        raw = q.get(key)
        if raw is None or raw == "":
            values[key] = None
            continue
        try:
            value = int(raw)
        except ValueError:
            raise errors.bad_request(f'invalid {key} "{raw}": not an integer') from None
        values[key] = value
        if value < minimum:
            causes.append({"reason": "FieldValueInvalid", "field": key, "message": f"Invalid value: {raw}: {rule}"})
    if values["sinceSeconds"] is not None and q.get("sinceTime"):
        causes.append(
            {
                "reason": "FieldValueForbidden",
                "field": "",
                "message": "Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
            }
        )
    if causes:
        summary = ", ".join(f"{c['field']}: {c['message']}" if c["field"] else c["message"] for c in causes)
        raise errors.ApiError(
            422,
            "Invalid",
            f'PodLogOptions "{name}" is invalid: {summary}',
            {"name": name, "kind": "PodLogOptions", "causes": causes},
        )
    return values["tailLines"], values["limitBytes"], values["sinceSeconds"]


def _waiting_reason(pod: Obj, container: str) -> str:
    status = pod.get("status") or {}
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container:
            return str(((cs.get("state") or {}).get("waiting") or {}).get("reason") or "ContainerCreating")
    return "ContainerCreating"


def _container_done(pod: Obj, container: str) -> bool:
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    for cs in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or []):
        if cs.get("name") == container and (cs.get("state") or {}).get("terminated"):
            return True
    return False


async def _write_lines(out: Outgoing, lines: list[bytes], chunk: int = 256) -> None:
    # A few large writes instead of one per event; bounded so a huge backlog still streams.
    for start in range(0, len(lines), chunk):
        await out.write(b"".join(lines[start : start + chunk]))


class HttpOut:
    """A watch's answer over HTTP: a chunked response, and its connection's transport for the hub."""

    chunked = True

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self._response: web.StreamResponse | None = None

    @property
    def transport(self) -> Transport | None:
        return self._request.transport

    async def start(self, headers: Mapping[str, str]) -> None:
        self._response = web.StreamResponse(headers=dict(headers))
        self._response.enable_chunked_encoding()
        await self._response.prepare(self._request)

    async def write(self, data: bytes) -> None:
        assert self._response is not None, "start() first"
        await self._response.write(data)

    def answer(self) -> web.StreamResponse:
        assert self._response is not None, "start() first"
        return self._response
