"""Reads of the API: a get, a whole list, and the pages of a chunked one, as kube-apiserver serves them.

Objects are stored version-free and encoded; a read stamps the served ``apiVersion`` and ``kind``
on the way out and, for lists served as JSON, splices them into the stored bytes instead of
decoding and re-encoding every item. Which objects a list selects is ``requests.fields``' concern;
what continue tokens and ``resourceVersion``/``resourceVersionMatch`` mean, ``requests.paging``'.
Writes (``objects.Objects``) stand on these reads.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Generic, TypeVar

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.requests import paging
from trainyard.cluster.server.apiserver.requests.fields import matches, selection
from trainyard.cluster.server.apiserver.requests.selectors import FieldSelector, LabelSelector
from trainyard.cluster.server.storage import codec
from trainyard.cluster.server.storage.store import Expired, Store

Item = TypeVar("Item")


@dataclass(frozen=True)
class Page(Generic[Item]):
    """One chunk of a list: its items, the revision it was read at and how to get the rest.

    ``Page[Obj]`` holds decoded objects; ``Page[bytes]`` the items as served JSON.
    """

    items: list[Item]
    revision: int
    continue_token: str = ""
    remaining: int | None = None


class Reads:
    """The read half of the API's object semantics, over one store."""

    store: Store

    def get(self, rt: ResourceType, namespace: str, name: str) -> Obj:
        obj = self.store.get(rt.key, namespace if rt.namespaced else "", name)
        if obj is None:
            raise errors.not_found(rt, name)
        return self.present(rt, obj)

    def list(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> tuple[list[Obj], int]:
        items, revision = self.store.list(rt.key, namespace if rt.namespaced else None)
        return [self.present(rt, o) for o in items if matches(rt, o, labels, fields)], revision

    def list_page(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        opts: paging.ListOptions,
    ) -> Page[Obj]:
        """One chunk of a list, read at the revision the options (or the continue token) name."""
        page = self.list_page_encoded(rt, namespace, labels, fields, opts)
        return Page(codec.loads_many(page.items), page.revision, page.continue_token, page.remaining)

    def list_page_encoded(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        opts: paging.ListOptions,
    ) -> Page[bytes]:
        """``list_page`` with the items as served JSON: stored bytes spliced, never re-encoded."""
        store_ns = namespace if rt.namespaced else None
        across = rt.namespaced and namespace is None
        limit, revision, start, token_start = opts.limit, None, None, ""
        if opts.continue_token:
            token = paging.decode(opts.continue_token)
            token_start = token.start
            start = paging.split_start(token.start, namespace or "", across_namespaces=across)
            revision = None if token.revision == paging.NEWEST else token.revision
        elif opts.resource_version == "0":
            limit = 0  # upstream serves resourceVersion=0 from its watch cache, ignoring limit
        elif opts.resource_version:
            wanted = paging.parse_revision(opts.resource_version)
            if opts.match == "Exact" or (limit and not opts.match):  # a limit without a match is legacy "exact"
                revision = wanted
            elif wanted > self.store.revision:
                raise paging.too_large(wanted, self.store.revision)
        try:
            rows, at = self.store.snapshot(rt.key, store_ns, revision=revision, start=start)
        except Expired as exc:
            if opts.continue_token:
                raise paging.expired_continue(token_start) from exc
            raise errors.ApiError(410, "Expired", paging.EXPIRED_LIST) from exc
        except ValueError as exc:
            if opts.continue_token:
                raise errors.bad_request("invalid continue token: continue key is not valid") from exc
            raise paging.too_large(revision or 0, self.store.revision) from exc
        accepts = selection(rt, labels, fields)
        head = codec.type_head(rt.group_version, rt.kind)
        items: list[bytes] = []
        for ns, name, body in rows:
            if accepts is not None and not accepts(body):
                continue
            items.append(codec.splice(head, body))
            if limit and len(items) == limit:
                rest = rows.count_after(ns, name)
                if rest:
                    token_out = paging.encode(at, paging.start_key(ns, name, across_namespaces=across))
                    return Page(items, at, token_out, None if accepts is not None else rest)
                break
        return Page(items, at)

    def present(self, rt: ResourceType, obj: Obj) -> Obj:
        """Objects are stored version-free; stamp the served apiVersion and kind on the way out."""
        return {"apiVersion": rt.group_version, "kind": rt.kind, **obj}

    def list_encoded(
        self,
        rt: ResourceType,
        namespace: str | None,
        labels: LabelSelector | None = None,
        fields: FieldSelector | None = None,
    ) -> tuple[builtins.list[bytes], int]:
        """``list`` with each item already encoded as served: stored bytes spliced, not re-encoded."""
        bodies, revision = self.store.list_raw(rt.key, namespace if rt.namespaced else None)
        accepts = selection(rt, labels, fields)
        if accepts is not None:
            bodies = [b for b in bodies if accepts(b)]
        head = codec.type_head(rt.group_version, rt.kind)
        return [codec.splice(head, b) for b in bodies], revision
