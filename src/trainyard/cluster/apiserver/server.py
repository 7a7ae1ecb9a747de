"""The HTTP face of the embedded control plane: the Kubernetes REST API over ``Objects``.

This module parses URLs, query parameters and bodies, negotiates Tables, streams watches and
logs, and renders every failure as a ``Status``. What an operation means lives in ``objects``.
"""

from __future__ import annotations

import asyncio
import logging
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from trainyard.api.meta import parse_time
from trainyard.cluster import logs
from trainyard.cluster.apiserver import connect, discovery, errors, tables
from trainyard.cluster.apiserver.objects import Objects, check_fields, matches, patch_failure
from trainyard.cluster.apiserver.registry import ResourceType
from trainyard.cluster.apiserver.requests import bodies, paging
from trainyard.cluster.apiserver.requests.jsonpath import get_path, set_path
from trainyard.cluster.apiserver.requests.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from trainyard.cluster.apiserver.writes import admission, patching
from trainyard.cluster.paths import Layout
from trainyard.cluster.storage import codec
from trainyard.cluster.storage.store import Expired, Obj
from trainyard.cluster.storage.watch import ChunkedSink, Event, Hub

log = logging.getLogger(__name__)

JSON = "application/json"
_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
# Without timeoutSeconds a real server keeps a watch open 30-60 minutes.
DEFAULT_WATCH_SECONDS = 1800
BOOKMARK_SECONDS = 60.0
MAX_SINCE_SECONDS = 100 * 365 * 86400


def _bool(value: str | None) -> bool:
    return value in _TRUE


@dataclass(frozen=True)
class Target:
    rt: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


class ApiServer:
    def __init__(
        self,
        objects: Objects,
        hub: Hub,
        layout: Layout,
        *,
        address: Callable[[], str],
        bookmark_seconds: float = BOOKMARK_SECONDS,
    ) -> None:
        self.objects = objects
        self.hub = hub
        self.layout = layout
        self.address = address
        self.bookmark_seconds = bookmark_seconds

    @property
    def registry(self) -> Any:
        return self.objects.registry

    def now(self) -> datetime:
        return self.objects.clock()

    def app(self) -> web.Application:
        # Bodies are read by ``bodies.read``, which answers 413 with a Status at bodies.MAX_BYTES;
        # aiohttp's own limit (a plain-text 413) must never be the one that fires.
        app = web.Application(client_max_size=2 * bodies.MAX_BYTES)
        # Every path, including ones with an encoded newline (``.`` would not match it), is ours to answer.
        app.router.add_route("*", r"/{tail:[\s\S]*}", self.handle)
        return app

    # -- dispatch ------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except errors.ApiError as exc:
            return _json(exc.status(), exc.code)
        except SelectorError as exc:
            return _json(errors.bad_request(str(exc)).status(), 400)
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return _json(errors.ApiError(500, "InternalError", f"Internal error occurred: {exc}").status(), 500)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        parts = [p for p in path.split("/") if p]
        if request.method not in ("GET", "HEAD") and _read_only(parts):
            raise errors.method_not_allowed()
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok", content_type="text/plain")
        if path == "/version":
            return _json(discovery.KUBE_VERSION)
        if parts[:2] == ["openapi", "v3"]:
            return self._openapi(parts[2:])
        if parts == ["openapi", "v2"]:
            return _openapi_v2(request)
        if parts and parts[0] == "api":
            if len(parts) == 1:
                return _json(discovery.api_versions(self.address()))
            group, version, rest = "", parts[1], parts[2:]
        elif parts and parts[0] == "apis":
            if len(parts) == 1:
                return _json(discovery.api_group_list(self.registry))
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise errors.unknown_path()
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.unknown_path()
        if not rest:
            doc = discovery.resource_list(self.registry, group, version)
            if doc is None:
                raise errors.unknown_path()
            return _json(doc)
        return await self._resource(request, self._target(group, version, rest))

    def _openapi(self, rest: list[str]) -> web.Response:
        if not rest:
            return _json(discovery.openapi_root(self.registry))
        if rest[0] == "api" and len(rest) == 2:
            doc = discovery.openapi_gv(self.registry, "", rest[1])
        elif rest[0] == "apis" and len(rest) == 3:
            doc = discovery.openapi_gv(self.registry, rest[1], rest[2])
        else:
            doc = None
        if doc is None:
            raise errors.unknown_path()
        return _json(doc)

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        lookup = self.registry.lookup
        if rest[0] == "namespaces" and len(rest) >= 3:
            rt = lookup(group, version, rest[2])
            if rt is not None and rt.namespaced:
                if len(rest) > 5 and rest[4] != "proxy":
                    raise errors.unknown_path()
                return Target(rt, rest[1], _at(rest, 3), _at(rest, 4))
        rt = lookup(group, version, rest[0])
        if rt is None or (len(rest) > 3 and rest[2] != "proxy"):
            raise errors.unknown_path()
        if rt.namespaced:
            # A namespaced resource without /namespaces/{ns}: only cluster-wide list and watch exist.
            if len(rest) > 1:
                raise errors.unknown_path()
            return Target(rt, None, None, None)
        return Target(rt, None, _at(rest, 1), _at(rest, 2))

    async def _resource(self, request: web.Request, target: Target) -> web.StreamResponse:
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        method, query = request.method, request.query
        dry_run = query.get("dryRun") == "All"
        if sub is not None and name is not None and connect.served(rt.key, sub):
            return self._connect(request, rt, ns or "", name, sub)
        if sub is not None and sub not in rt.subresources:
            raise errors.unknown_path()
        if name is None:
            if method == "GET":
                if _bool(query.get("watch")):
                    return await self._watch(request, rt, ns)
                return self._list(request, rt, ns)
            if method == "POST" and (ns is not None or not rt.namespaced):
                body = await _body(request, rt)
                directive = admission.field_validation(query.get("fieldValidation"), "CreateOptions")
                warnings: list[str] = []
                created = self.objects.create(
                    rt, ns or "", body, dry_run=dry_run, field_validation=directive, warnings=warnings,
                    manager=_manager(request),
                )
                return _warn(self._object(request, rt, created, 201), warnings)
            if method == "DELETE" and (ns is not None or not rt.namespaced):
                return await self._delete_collection(request, rt, ns)
            raise errors.method_not_allowed()
        namespace = ns or ""
        if sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return await self._log(request, namespace, name)
        if sub == "binding":
            if method != "POST":
                raise errors.method_not_allowed()
            return _json(self.objects.bind(namespace, name, await _body(request, None)), 201)
        if sub == "eviction":
            if method != "POST":
                raise errors.method_not_allowed()
            return await self._evict(request, rt, namespace, name, dry_run)
        if sub == "scale":
            return await self._scale(request, rt, namespace, name)
        if method == "GET":
            return self._object(request, rt, self.objects.get(rt, namespace, name))
        if method == "PUT":
            body = await _body(request, rt if sub is None else None)
            directive = admission.field_validation(query.get("fieldValidation"), "UpdateOptions")
            warnings = []
            updated = self.objects.update(
                rt, namespace, name, body, subresource=sub, dry_run=dry_run, field_validation=directive,
                warnings=warnings,
                manager=_manager(request),
            )
            return _warn(self._object(request, rt, updated), warnings)
        if method == "PATCH":
            return await self._patch(request, rt, namespace, name, sub, dry_run)
        if method == "DELETE":
            opts = await _delete_options(request)
            deleted = self.objects.delete(
                rt,
                namespace,
                name,
                propagation=opts.get("propagationPolicy"),
                grace_seconds=opts.get("gracePeriodSeconds"),
                preconditions=opts.get("preconditions"),
                dry_run=opts["dryRun"] == ["All"],  # the query dryRun is folded in already
            )
            return self._object(request, rt, deleted)
        raise errors.method_not_allowed()

    # -- verbs ---------------------------------------------------------------------------------

    def _selectors(self, request: web.Request, rt: ResourceType) -> tuple[LabelSelector | None, FieldSelector | None]:
        labels = parse_label_selector(request.query["labelSelector"]) if request.query.get("labelSelector") else None
        fields = None
        if request.query.get("fieldSelector"):
            fields = parse_field_selector(request.query["fieldSelector"])
            check_fields(rt, fields)
        return labels, fields

    def _list(self, request: web.Request, rt: ResourceType, namespace: str | None) -> web.Response:
        labels, fields = self._selectors(request, rt)
        page = self.objects.list_page_encoded(rt, namespace, labels, fields, paging.list_options(request.query))
        list_meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
        if page.continue_token:
            list_meta["continue"] = page.continue_token
        if page.remaining is not None:
            list_meta["remainingItemCount"] = page.remaining
        if not _wants_table(request):
            return _encoded_list(rt, page.items, list_meta)
        include = request.query.get("includeObject", "Metadata")
        fast = tables.table_encoded(rt, page.items, now=self.now(), list_meta=list_meta, include_object=include)
        if fast is not None:
            return web.Response(body=fast, content_type=JSON)
        table = tables.table(
            rt,
            codec.loads_many(page.items),
            now=self.now(),
            resource_version=str(page.revision),
            include_object=include,
        )
        table["metadata"] = list_meta
        return _json(table)

    def _object(self, request: web.Request, rt: ResourceType, obj: Obj, code: int = 200) -> web.Response:
        if _wants_table(request):
            rv = obj.get("metadata", {}).get("resourceVersion", "")
            return _json(
                tables.table(
                    rt,
                    [obj],
                    now=self.now(),
                    resource_version=rv,
                    include_object=request.query.get("includeObject", "Metadata"),
                ),
                code,
            )
        return _json(obj, code)

    async def _patch(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str,
        name: str,
        sub: str | None,
        dry_run: bool,
    ) -> web.Response:
        ctype = request.content_type
        raw = await bodies.read(request)
        if ctype == "application/apply-patch+yaml":
            return self._apply(request, rt, namespace, name, sub, raw, dry_run)
        body = bodies.decode(raw or b"null", "application/json", what="the patch")
        directive = admission.field_validation(request.query.get("fieldValidation"), "PatchOptions")
        warnings: list[str] = []
        patched = self.objects.patch(
            rt, namespace, name, ctype, body, subresource=sub, dry_run=dry_run, field_validation=directive,
            warnings=warnings,
            manager=_manager(request),
        )
        return _warn(self._object(request, rt, patched), warnings)

    def _apply(
        self,
        request: web.Request,
        rt: ResourceType,
        namespace: str,
        name: str,
        sub: str | None,
        raw: bytes,
        dry_run: bool,
    ) -> web.Response:
        """Server-side apply: field ownership, removal of unapplied fields and conflicts live in ``fieldmanager``."""
        manager = request.query.get("fieldManager")
        if not manager:
            raise errors.bad_request("PATCH, fieldManager is required for apply requests")
        body = bodies.decode(raw, "application/apply-patch+yaml", what="the applied configuration")
        if not isinstance(body, dict):
            raise errors.bad_request("the applied configuration must be an object")
        if body.get("metadata") is None:
            body["metadata"] = {}  # no opinion on metadata, as a typed decoder reads null
        if not isinstance(body["metadata"], dict):
            raise errors.bad_request("metadata of the applied configuration must be an object")
        warnings: list[str] = []
        obj, created = self.objects.apply(
            rt,
            namespace,
            name,
            body,
            manager=manager,
            force=_bool(request.query.get("force")),
            subresource=sub,
            dry_run=dry_run,
            field_validation=admission.field_validation(request.query.get("fieldValidation"), "PatchOptions"),
            warnings=warnings,
        )
        return _warn(self._object(request, rt, obj, 201 if created else 200), warnings)

    async def _delete_collection(
        self, request: web.Request, rt: ResourceType, namespace: str | None
    ) -> web.Response:
        labels, fields = self._selectors(request, rt)
        opts = await _delete_options(request)
        items, revision = self.objects.list(rt, namespace, labels, fields)
        for item in items:
            m = item["metadata"]
            try:
                self.objects.delete(
                    rt,
                    m.get("namespace", ""),
                    m["name"],
                    propagation=opts.get("propagationPolicy"),
                    grace_seconds=opts.get("gracePeriodSeconds"),
                    dry_run=opts["dryRun"] == ["All"],
                )
            except errors.ApiError as exc:
                if exc.code != 404:
                    raise
        return _json(
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.group_version,
                "metadata": {"resourceVersion": str(revision)},
                "items": items,
            }
        )

    async def _scale(self, request: web.Request, rt: ResourceType, namespace: str, name: str) -> web.Response:
        paths = rt.scale or {}
        obj = self.objects.get(rt, namespace, name)

        def scale_of(o: Obj) -> Obj:
            return {
                "kind": "Scale",
                "apiVersion": "autoscaling/v1",
                "metadata": {
                    k: o["metadata"][k]
                    for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                    if k in o["metadata"]
                },
                "spec": {"replicas": get_path(o, paths["specReplicasPath"]) or 0},
                "status": {
                    "replicas": get_path(o, paths.get("statusReplicasPath", ".status.replicas")) or 0,
                    "selector": get_path(o, paths.get("labelSelectorPath", ".status.selector")) or "",
                },
            }

        if request.method == "GET":
            return _json(scale_of(obj))
        current = scale_of(obj)
        wanted: Any
        if request.method == "PUT":
            wanted = await _body(request, ("autoscaling/v1", "Scale"))
        elif request.method == "PATCH":
            body = bodies.decode(await bodies.read(request) or b"null", "application/json", what="the patch")
            try:
                if request.content_type == "application/json-patch+json":
                    wanted = patching.json_patch(current, body)
                else:
                    wanted = patching.merge_patch(current, body)
            except patching.PatchError as exc:
                raise patch_failure(exc) from exc
        else:
            raise errors.method_not_allowed()
        spec = wanted.get("spec") if isinstance(wanted, dict) else None
        replicas = spec.get("replicas") if isinstance(spec, dict) else None
        if type(replicas) is not int or replicas < 0:
            raise errors.invalid(
                rt,
                name,
                [
                    (
                        "FieldValueInvalid",
                        "spec.replicas",
                        f"Invalid value: {replicas}: must be a non-negative integer",
                    )
                ],
            )
        updated = set_path({k: v for k, v in obj.items()}, paths["specReplicasPath"], replicas)
        result = self.objects.update(rt, namespace, name, updated, dry_run=request.query.get("dryRun") == "All")
        return _json(scale_of(result))

    def _connect(self, request: web.Request, rt: ResourceType, namespace: str, name: str, sub: str) -> web.Response:
        """exec, attach, portforward and proxy: a 404 for a missing object, as a real server, else a refusal."""
        if sub in connect.STREAMING and request.method not in ("GET", "POST"):
            raise errors.method_not_allowed()
        self.objects.get(rt, namespace, connect.object_name(sub, name))
        raise connect.refusal(rt.key, rt.plural, sub, request.headers)

    async def _evict(
        self, request: web.Request, rt: ResourceType, namespace: str, name: str, dry_run: bool
    ) -> web.Response:
        """``pods/eviction``: no PodDisruptionBudgets are served, so every eviction is allowed."""
        body = await _body(request, ("policy/v1", "Eviction"))
        if body.get("kind", "Eviction") != "Eviction":
            raise errors.bad_request(f"the body of a pods/eviction request must be an Eviction, not {body['kind']}")
        if (body.get("metadata") or {}).get("name", name) != name:
            raise errors.bad_request("name in URL does not match name in Eviction object")
        opts = body.get("deleteOptions") or {}
        pre = opts.get("preconditions") or {} if isinstance(opts, dict) else None
        if not isinstance(pre, dict):
            raise errors.bad_request("deleteOptions and its preconditions must be objects")
        m = self.objects.get(rt, namespace, name)["metadata"]
        for key in ("uid", "resourceVersion"):
            if pre.get(key) and pre[key] != m.get(key):
                why = f"Precondition failed: {key}: {pre[key]}, {key} in object meta: {m.get(key)}"
                raise errors.conflict(rt, name, why)
        opts = _checked_delete_options(opts)
        self.objects.delete(
            rt,
            namespace,
            name,
            propagation=opts.get("propagationPolicy"),
            grace_seconds=opts.get("gracePeriodSeconds"),
            dry_run=dry_run or "All" in opts.get("dryRun", ()),
        )
        return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)

    # -- streams -------------------------------------------------------------------------------

    async def _watch(self, request: web.Request, rt: ResourceType, namespace: str | None) -> web.StreamResponse:
        labels, fields = self._selectors(request, rt)
        as_table = _wants_table(request)
        bookmarks = _bool(request.query.get("allowWatchBookmarks"))
        timeout = _int(request.query, "timeoutSeconds")
        timeout = DEFAULT_WATCH_SECONDS if timeout is None else timeout
        deadline = asyncio.get_running_loop().time() + timeout
        store_ns = namespace if rt.namespaced else None
        selected = None if labels is None and fields is None else lambda o: matches(rt, o, labels, fields)
        sub = self.hub.subscribe(rt.key, store_ns, selected)
        response = web.StreamResponse(headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        direct: ChunkedSink | None = None
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
            await response.write(line(kind, obj))

        def live_line(ev: Event) -> bytes | None:
            nonlocal last
            if ev.rv <= last:
                return None
            last = ev.rv
            return event_line(ev)

        def bookmark() -> Obj:
            rv = str(self.objects.store.revision)
            return {"kind": rt.kind, "apiVersion": rt.group_version, "metadata": {"resourceVersion": rv}}

        try:
            rv_param = request.query.get("resourceVersion") or "0"
            initial_events = _bool(request.query.get("sendInitialEvents"))
            if rv_param == "0" or initial_events:
                if as_table:
                    items, last = self.objects.list(rt, store_ns, labels, fields)
                    for item in items:
                        await send("ADDED", item)
                else:
                    encoded, last = self.objects.list_encoded(rt, store_ns, labels, fields)
                    await _write_lines(response, [codec.watch_line("ADDED", item) for item in encoded])
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
                    return response
                last = start
                lines = []
                for change in backlog:
                    event = sub.translate(change)
                    if event is not None:
                        lines.append(event_line(event))
                    last = change.rv
                await _write_lines(response, lines)
            loop = asyncio.get_running_loop()
            if not as_table and request.transport is not None:
                # Plain watchers take changes straight from the hub (see watch.ChunkedSink).
                direct = ChunkedSink(request.transport, live_line, self.hub.flusher)
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
                    await response.write(b"".join(lines))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.hub.unsubscribe(sub)
            if direct is not None:
                direct.flush()  # before the response's last chunk
        return response

    async def _log(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        rt = self.registry.lookup("", "v1", "pods")
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
        previous = _bool(q.get("previous"))
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
        timestamps = _bool(q.get("timestamps"))
        text, offset = logs.read(
            path,
            tail_lines=tail,
            since=since,
            timestamps=timestamps,
            limit_bytes=limit,
        )
        if not _bool(q.get("follow")) or previous:
            return web.Response(body=text, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(text)
        sent = len(text)

        def finished() -> bool:
            current = self.objects.store.get(rt.key, namespace, name)
            return current is None or current["metadata"]["uid"] != uid or _container_done(current, container)

        try:
            async for chunk in logs.follow(path, offset, timestamps=timestamps, finished=finished):
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


def _manager(request: web.Request) -> str:
    """The field manager of a write: ``?fieldManager=``, else the client's User-Agent product, as upstream."""
    manager = request.query.get("fieldManager")
    if manager:
        if len(manager) > 128:
            raise errors.bad_request("fieldManager: Too long: may not be more than 128 bytes")
        return manager
    agent = request.headers.get("User-Agent", "")
    return agent.split("/", 1)[0].strip() or "unknown"


def _read_only(parts: list[str]) -> bool:
    """Health, version, discovery and OpenAPI documents: only GET reads them."""
    if parts[:1] in (["healthz"], ["readyz"], ["livez"], ["version"], ["openapi"]):
        return True
    return (parts[:1] == ["api"] and len(parts) <= 2) or (parts[:1] == ["apis"] and len(parts) <= 3)


def _int(query: Mapping[str, str], name: str, *, minimum: int | None = None) -> int | None:
    """An int64 query parameter as Go's ParseInt reads it; 400 when it is not one."""
    raw = query.get(name)
    if not raw:
        return None
    if not re.fullmatch(r"[+-]?[0-9]{1,19}", raw) or not -(2**63) <= int(raw) < 2**63:
        raise errors.bad_request(f"invalid value for query parameter {name}: {raw!r} is not a 64-bit integer")
    value = int(raw)
    if minimum is not None and value < minimum:
        raise errors.bad_request(f"invalid value for query parameter {name}: {value} must be at least {minimum}")
    return value


def _at(parts: list[str], index: int) -> str | None:
    return parts[index] if len(parts) > index else None


def _wants_table(request: web.Request) -> bool:
    accept = request.headers.get("Accept", "")
    return "as=Table" in accept.split(",")[0] or accept.startswith("application/json;as=Table")


def _warn(response: web.Response, warnings: list[str]) -> web.Response:
    """Warning headers as kube-apiserver sends them; kubectl prints each as ``Warning: ...``."""
    for text in dict.fromkeys(warnings):
        # kube-apiserver drops a warning it cannot put in a header (control characters), as here.
        if any(unicodedata.category(c) == "Cc" for c in text):
            continue
        quoted = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{quoted}"')
    return response


def _openapi_v2(request: web.Request) -> web.Response:
    """An OpenAPI v2 document with no definitions, in the encoding kubectl asks for.

    kubectl validates a ``kind: List`` against v2 schemas only; a document without definitions
    makes it skip client-side checks for the items, which the server then validates itself.
    """
    doc = discovery.openapi_v2()
    if "protobuf" in request.headers.get("Accept", ""):
        return web.Response(body=discovery.openapi_v2_protobuf(doc), content_type=discovery.OPENAPI_V2_PROTOBUF_REPLY)
    return _json(doc)


def _json(body: Any, code: int = 200) -> web.Response:
    return web.Response(body=codec.dumps(body), status=code, content_type=JSON)


def _encoded_list(rt: ResourceType, items: list[bytes], list_meta: dict[str, Any]) -> web.Response:
    """A ``<Kind>List`` around items that are already encoded, without decoding them again."""
    head = codec.dumps({"kind": f"{rt.kind}List", "apiVersion": rt.group_version, "metadata": list_meta})[:-1]
    body = b"".join((head, b',"items":[', b",".join(items), b"]}"))
    return web.Response(body=body, content_type=JSON)


async def _write_lines(response: web.StreamResponse, lines: list[bytes], chunk: int = 256) -> None:
    # A few large writes instead of one per event; bounded so a huge backlog still streams.
    for start in range(0, len(lines), chunk):
        await response.write(b"".join(lines[start : start + chunk]))


async def _body(request: web.Request, endpoint: ResourceType | tuple[str, str] | None) -> dict[str, Any]:
    """The one object of a create or update body; ``endpoint`` says what a protobuf body may be."""
    if isinstance(endpoint, ResourceType):
        endpoint = (endpoint.group_version, endpoint.kind)
    return bodies.decode_object(await bodies.read(request), request.content_type, endpoint)


async def _delete_options(request: web.Request) -> dict[str, Any]:
    opts: dict[str, Any] = {}
    raw = await bodies.read(request)
    if raw:
        parsed = bodies.decode(raw, "application/json", what="the DeleteOptions body")
        if isinstance(parsed, dict):
            opts.update(parsed)
    q = request.query
    if q.get("propagationPolicy"):
        opts["propagationPolicy"] = q["propagationPolicy"]
    if q.get("gracePeriodSeconds"):
        opts["gracePeriodSeconds"] = _int(q, "gracePeriodSeconds")
    if opts.get("orphanDependents") is True and "propagationPolicy" not in opts:
        opts["propagationPolicy"] = "Orphan"
    # kubectl --dry-run=server sends dryRun in the body, the Python clients as a query parameter.
    if q.get("dryRun"):
        opts["dryRun"] = q.getall("dryRun")
    opts = _checked_delete_options(opts)
    opts["dryRun"] = opts.get("dryRun") or []
    if opts["dryRun"] not in ([], ["All"]):
        raise errors.bad_request(f'dryRun: Unsupported value: {opts["dryRun"]!r}: supported values: "All"')
    return opts


def _checked_delete_options(opts: dict[str, Any]) -> dict[str, Any]:
    """DeleteOptions whose fields have the types the apiserver decodes them into; 400 otherwise."""
    # null reads as absent, as in a typed decoder
    grace, policy, dry_run = opts.get("gracePeriodSeconds"), opts.get("propagationPolicy"), opts.get("dryRun")
    if grace is not None and type(grace) is not int:
        raise errors.bad_request(f"gracePeriodSeconds must be an integer, not {grace!r}")
    if policy and policy not in ("Orphan", "Background", "Foreground"):
        raise errors.bad_request(f"propagationPolicy must be one of Orphan, Background or Foreground, not {policy!r}")
    if dry_run is not None and (not isinstance(dry_run, list) or not all(isinstance(d, str) for d in dry_run)):
        raise errors.bad_request(f"dryRun must be a list of strings, not {dry_run!r}")
    return {k: v for k, v in opts.items() if v is not None}
