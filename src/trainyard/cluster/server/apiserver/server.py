"""The HTTP face of the embedded control plane: the Kubernetes REST API over ``Objects``.

This module routes URLs to discovery documents, verbs and subresources, reads query parameters
and bodies (through ``requests``), negotiates Tables, and renders every failure as a
``Status``. What an operation means lives in ``objects``; the responses that stay open
(watches, followed logs) in ``streams``.
"""

from __future__ import annotations

import asyncio
import logging
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from aiohttp import web

from trainyard.api.meta import Obj
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.apiserver import (
    aggregation,
    connect,
    discovery,
    errors,
    precedence,
    subresources,
    tables,
    tokens,
)
from trainyard.cluster.server.apiserver.objects import Objects
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.remotecommand import serving
from trainyard.cluster.server.apiserver.requests import bodies, paging
from trainyard.cluster.server.apiserver.requests.deleting import delete_options
from trainyard.cluster.server.apiserver.requests.fields import check_fields
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest, Outgoing
from trainyard.cluster.server.apiserver.requests.query import JSON, flag, wants_table
from trainyard.cluster.server.apiserver.requests.selectors import (
    FieldSelector,
    LabelSelector,
    SelectorError,
    parse_field_selector,
    parse_label_selector,
)
from trainyard.cluster.server.apiserver.requests.writing import WriteOptions, write_options
from trainyard.cluster.server.apiserver.streams import BOOKMARK_SECONDS, HttpOut, Streams
from trainyard.cluster.server.apiserver.tunnels import portforward, proxying
from trainyard.cluster.server.storage import codec
from trainyard.cluster.server.storage.store import StorageFull
from trainyard.cluster.server.storage.watch import Hub

log = logging.getLogger(__name__)
COLLECTION_SLICE = 32
"""Deletions a ``deletecollection`` makes before the loop serves other requests."""


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
        self.address = address
        self.layout = layout
        self._issuer: tokens.TokenIssuer | None = None
        self.streams = Streams(objects, hub, layout, bookmark_seconds=bookmark_seconds)
        self.precedence = precedence.Precedence()
        # Groups another component serves through this server (kube-aggregator's APIServices).
        self.aggregated: dict[str, aggregation.AggregatedApi] = {}

    @property
    def issuer(self) -> tokens.TokenIssuer:
        """Service-account tokens' signer, its key read (or made) on first use."""
        if self._issuer is None:
            self._issuer = tokens.TokenIssuer(tokens.signing_key(self.layout))
        return self._issuer

    @property
    def registry(self) -> Any:
        return self.objects.registry

    def now(self) -> datetime:
        return self.objects.clock()

    def app(self, mounts: Mapping[str, web.Application] | None = None) -> web.Application:
        """The API's application, with ``mounts`` (prefix: application) served before the API's paths."""
        # Bodies are read by ``bodies.read``, which answers 413 with a Status at bodies.MAX_BYTES;
        # aiohttp's own limit (a plain-text 413) must never be the one that fires.
        app = web.Application(
            client_max_size=2 * bodies.MAX_BYTES, middlewares=[precedence.middleware(self.precedence)]
        )
        for prefix, mounted in (mounts or {}).items():
            app.add_subapp(prefix, mounted)
        # Every path, including ones with an encoded newline (``.`` would not match it), is ours to answer.
        app.router.add_route("*", r"/{tail:[\s\S]*}", self.handle)
        return app

    # -- dispatch ------------------------------------------------------------------------------

    async def handle(self, request: ApiRequest) -> web.StreamResponse:
        try:
            return await self._dispatch(request)
        except errors.ApiError as exc:
            return _json(exc.status(), exc.code)
        except SelectorError as exc:
            return _json(errors.bad_request(str(exc)).status(), 400)
        except StorageFull as exc:
            failure = errors.storage_full(exc.path, exc.detail, exc.free, exc.total)
            log.warning("%s %s: %s", request.method, request.path, failure.message)
            return _json(failure.status(), failure.code)
        except (asyncio.CancelledError, ConnectionResetError):
            raise
        except Exception as exc:
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return _json(errors.ApiError(500, "InternalError", f"Internal error occurred: {exc}").status(), 500)

    async def _dispatch(self, request: ApiRequest) -> web.StreamResponse:
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
                return _json(discovery.api_group_list(self.registry, self.aggregated.values()))
            if parts[1] in self.aggregated:
                return await self._aggregated(request, self.aggregated[parts[1]], parts[2:])
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise errors.unknown_path()
                return _json(doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise errors.unknown_path()
        if (group, version, rest) == ("authentication.k8s.io", "v1", ["tokenreviews"]):
            if request.method != "POST":
                raise errors.method_not_allowed()
            return _json(tokens.review(self.objects, self.issuer, await _body(request, None), self.now()), 201)
        if not rest:
            doc = discovery.resource_list(self.registry, group, version)
            if doc is None:
                raise errors.unknown_path()
            return _json(doc)
        return await self._resource(request, self._target(group, version, rest))

    async def _aggregated(self, request: ApiRequest, api: aggregation.AggregatedApi, rest: list[str]) -> web.Response:
        if not rest:
            return _json(discovery.aggregated_group(api))
        if rest[0] != api.version:
            raise errors.unknown_path()
        if request.method not in ("GET", "HEAD"):
            raise errors.method_not_allowed()
        if len(rest) == 1:
            return _json(discovery.aggregated_resources(api))
        namespace, path = aggregation.split(rest[1:])
        query = request.query
        metric_labels = parse_label_selector(query.get("metricSelector", ""))
        asked = aggregation.MetricsQuery(
            namespace, path, parse_label_selector(query.get("labelSelector", "")), metric_labels, query
        )
        try:
            return _json(await api.get(asked))
        except LookupError as exc:
            raise errors.ApiError(404, "NotFound", str(exc.args[0] if exc.args else exc), {}) from exc
        except ValueError as exc:
            raise errors.bad_request(str(exc)) from exc

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

    async def _resource(self, request: ApiRequest, target: Target) -> web.StreamResponse:
        rt, ns, name, sub = target.rt, target.namespace, target.name, target.subresource
        method, query = request.method, request.query
        dry_run = query.get("dryRun") == "All"
        if sub is not None and name is not None and connect.served(rt.key, sub):
            return await self._connect(request, rt, ns or "", name, sub)
        if sub is not None and sub not in rt.subresources:
            raise errors.unknown_path()
        if name is None:
            if method == "GET":
                if flag(query.get("watch")):
                    out = _outgoing(request)
                    return await self.streams.watch(request, out, rt, ns, *self._selectors(request, rt))
                return self._list(request, rt, ns)
            if method == "POST" and (ns is not None or not rt.namespaced):
                body = await _body(request, rt)
                options = write_options(request, "CreateOptions")
                created = self.objects.create(rt, ns or "", body, options=options)
                return _warn(self._object(request, rt, created, 201), options)
            if method == "DELETE" and (ns is not None or not rt.namespaced):
                return await self._delete_collection(request, rt, ns)
            raise errors.method_not_allowed()
        namespace = ns or ""
        if sub == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            return await self.streams.log(request, rt, namespace, name)
        if sub == "binding":
            if method != "POST":
                raise errors.method_not_allowed()
            return _json(self.objects.bind(namespace, name, await _body(request, None)), 201)
        if sub == "eviction":
            if method != "POST":
                raise errors.method_not_allowed()
            return _json(await subresources.evict(self.objects, request, rt, namespace, name, dry_run), 201)
        if sub == "scale":
            return _json(await subresources.scale(self.objects, request, rt, namespace, name))
        if sub == "token":
            if method != "POST":
                raise errors.method_not_allowed()
            # `kubectl create token` sends its TokenRequest as protobuf only
            body = await _body(request, ("authentication.k8s.io/v1", "TokenRequest"))
            return _json(tokens.request(self.objects, self.issuer, namespace, name, body, self.now()), 201)
        if method == "GET":
            return self._object(request, rt, self.objects.get(rt, namespace, name))
        if method == "PUT":
            body = await _body(request, rt if sub is None else None)
            options = write_options(request, "UpdateOptions")
            updated = self.objects.update(rt, namespace, name, body, options=options, subresource=sub)
            return _warn(self._object(request, rt, updated), options)
        if method == "PATCH":
            return await self._patch(request, rt, namespace, name, sub)
        if method == "DELETE":
            opts = await delete_options(request)
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

    def _selectors(self, request: ApiRequest, rt: ResourceType) -> tuple[LabelSelector | None, FieldSelector | None]:
        labels = parse_label_selector(request.query["labelSelector"]) if request.query.get("labelSelector") else None
        fields = None
        if request.query.get("fieldSelector"):
            fields = parse_field_selector(request.query["fieldSelector"])
            check_fields(rt, fields)
        return labels, fields

    def _list(self, request: ApiRequest, rt: ResourceType, namespace: str | None) -> web.Response:
        labels, fields = self._selectors(request, rt)
        page = self.objects.list_page_encoded(rt, namespace, labels, fields, paging.list_options(request.query))
        list_meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
        if page.continue_token:
            list_meta["continue"] = page.continue_token
        if page.remaining is not None:
            list_meta["remainingItemCount"] = page.remaining
        if not wants_table(request):
            return _encoded_list(rt, page.items, list_meta)
        include = request.query.get("includeObject", "Metadata")
        table = tables.table_encoded(rt, page.items, now=self.now(), list_meta=list_meta, include_object=include)
        return web.Response(body=table, content_type=JSON)

    def _object(self, request: ApiRequest, rt: ResourceType, obj: Obj, code: int = 200) -> web.Response:
        if wants_table(request):
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
        request: ApiRequest,
        rt: ResourceType,
        namespace: str,
        name: str,
        sub: str | None,
    ) -> web.Response:
        ctype = request.content_type
        raw = await bodies.read(request)
        if ctype == "application/apply-patch+yaml":
            return self._apply(request, rt, namespace, name, sub, raw)
        body = bodies.decode(raw or b"null", "application/json", what="the patch")
        options = write_options(request, "PatchOptions")
        patched = self.objects.patch(rt, namespace, name, ctype, body, options=options, subresource=sub)
        return _warn(self._object(request, rt, patched), options)

    def _apply(
        self,
        request: ApiRequest,
        rt: ResourceType,
        namespace: str,
        name: str,
        sub: str | None,
        raw: bytes,
    ) -> web.Response:
        """Server-side apply: field ownership, removal of unapplied fields and conflicts live in ``fieldmanager``."""
        if not request.query.get("fieldManager"):
            raise errors.bad_request("PATCH, fieldManager is required for apply requests")
        body = bodies.decode(raw, "application/apply-patch+yaml", what="the applied configuration")
        if not isinstance(body, dict):
            raise errors.bad_request("the applied configuration must be an object")
        if body.get("metadata") is None:
            body["metadata"] = {}  # no opinion on metadata, as a typed decoder reads null
        if not isinstance(body["metadata"], dict):
            raise errors.bad_request("metadata of the applied configuration must be an object")
        options = write_options(request, "PatchOptions", applying=True)
        obj, created = self.objects.apply(rt, namespace, name, body, options=options, subresource=sub)
        return _warn(self._object(request, rt, obj, 201 if created else 200), options)

    async def _delete_collection(self, request: ApiRequest, rt: ResourceType, namespace: str | None) -> web.Response:
        labels, fields = self._selectors(request, rt)
        opts = await delete_options(request)
        items, revision = self.objects.list(rt, namespace, labels, fields)
        for i, item in enumerate(items):
            if i and i % COLLECTION_SLICE == 0:
                # Other requests are served between slices (one gone meanwhile answers 404, ignored).
                await asyncio.sleep(0)
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

    async def _connect(
        self, request: ApiRequest, rt: ResourceType, namespace: str, name: str, sub: str
    ) -> web.StreamResponse:
        """exec, attach, portforward and proxy: a 404 for a missing object, as a real server; exec and
        attach (``remotecommand``), port-forward and the pod and service proxies (``tunnels``) are served,
        the rest refused."""
        if sub in connect.STREAMING and request.method not in ("GET", "POST"):
            raise errors.method_not_allowed()
        obj = self.objects.get(rt, namespace, connect.object_name(sub, name))
        if rt.key == "core/pods" and sub in serving.SERVED and connect.is_upgrade(request.headers):
            current = lambda: self.objects.store.get(rt.key, namespace, name)  # noqa: E731
            served = await serving.serve(_connection(request), obj, sub, self.layout, current)
            if served is not None:
                return served
        if rt.key == "core/pods" and sub == "portforward" and connect.is_upgrade(request.headers):
            return await portforward.serve(_connection(request), portforward.target(obj))
        if sub == "proxy" and rt.key in ("core/pods", "core/services"):
            return await proxying.serve(_connection(request), self._backend(rt, obj, name))
        raise connect.refusal(rt.key, rt.plural, sub, request.headers)

    def _backend(self, rt: ResourceType, obj: Obj, segment: str) -> proxying.Backend:
        """Where a pod or service proxy request goes; a service's pods are read here, ready or not."""
        if rt.key == "core/pods":
            return proxying.pod_backend(obj, segment)
        pods, _ = self.objects.list(self.registry.lookup("", "v1", "pods"), obj["metadata"]["namespace"])
        return proxying.service_backend(obj, pods, segment)


def _connection(request: ApiRequest) -> web.Request:
    """The HTTP request an exec, attach, port-forward or proxy takes over; a request from this
    process (``loopback``) has none."""
    if not isinstance(request, web.Request):
        raise errors.ApiError(500, "InternalError", "streams are served over HTTP only, not in-process")
    return request


def _outgoing(request: ApiRequest) -> Outgoing:
    """Where a watch writes: its HTTP response, or the reader in this process a loopback request brings."""
    if isinstance(request, web.Request):
        return HttpOut(request)
    out: Outgoing | None = getattr(request, "outgoing", None)
    if out is None:
        raise errors.ApiError(500, "InternalError", "this in-process request has no reader for a watch")
    return out


def _read_only(parts: list[str]) -> bool:
    """Health, version, discovery and OpenAPI documents: only GET reads them."""
    if parts[:1] in (["healthz"], ["readyz"], ["livez"], ["version"], ["openapi"]):
        return True
    return (parts[:1] == ["api"] and len(parts) <= 2) or (parts[:1] == ["apis"] and len(parts) <= 3)


def _at(parts: list[str], index: int) -> str | None:
    return parts[index] if len(parts) > index else None


def _warn(response: web.Response, options: WriteOptions) -> web.Response:
    """The write's warnings as Warning headers, as kube-apiserver sends them; kubectl prints each as
    ``Warning: ...``."""
    for text in dict.fromkeys(options.warnings or ()):
        # kube-apiserver drops a warning it cannot put in a header (control characters), as here.
        if any(unicodedata.category(c) == "Cc" for c in text):
            continue
        quoted = text.replace("\\", "\\\\").replace('"', '\\"')
        response.headers.add("Warning", f'299 - "{quoted}"')
    return response


def _openapi_v2(request: ApiRequest) -> web.Response:
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


async def _body(request: ApiRequest, endpoint: ResourceType | tuple[str, str] | None) -> dict[str, Any]:
    """The one object of a create or update body; ``endpoint`` says what a protobuf body may be."""
    if isinstance(endpoint, ResourceType):
        endpoint = (endpoint.group_version, endpoint.kind)
    return bodies.decode_object(await bodies.read(request), request.content_type, endpoint)
