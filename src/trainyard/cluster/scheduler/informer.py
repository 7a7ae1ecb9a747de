"""A reflector, as client-go's: list, then watch from the list's resourceVersion, relist when it expires.

Each change reaches ``handle(type, object)`` exactly as a watch would deliver it; a relist after
the watch's resourceVersion expired (410) reports the objects that vanished meanwhile as
``DELETED``, so a consumer's cache never keeps a ghost. ``synced`` is set once the first list has
been delivered. The scheduler keeps its caches with these; the objects are plain dicts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import OnErrorAction, OnErrorResult

from trainyard.client import to_dict

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Handler = Callable[[str, Obj], None]
RELIST_DELAY = 1.0
MAX_RELIST_DELAY = 30.0  # a resource that cannot be listed (its CRD gone) is retried this often at most


def _key(obj: Obj) -> tuple[str, str]:
    m = obj.get("metadata") or {}
    return m.get("namespace") or "", m.get("name") or ""


class Informer:
    def __init__(self, client: AsyncClient, res: Any, handle: Handler, *, namespaced: bool = True) -> None:
        self.client = client
        self.res = res
        self.handle = handle
        self.namespaced = namespaced
        self.synced = asyncio.Event()
        self._known: dict[tuple[str, str], Obj] = {}

    def _deliver(self, kind: str, obj: Obj) -> None:
        key = _key(obj)
        if kind == "DELETED":
            self._known.pop(key, None)
        else:
            self._known[key] = obj
        try:
            self.handle(kind, obj)
        except Exception:
            log.exception("handling %s %s/%s failed", kind, *key)

    async def _list(self) -> str:
        res: Any = self.res
        listing = self.client.list(res, namespace=ALL_NS) if self.namespaced else self.client.list(res)
        seen: dict[tuple[str, str], Obj] = {}
        async for item in listing:
            obj = to_dict(item)
            seen[_key(obj)] = obj
        for key in set(self._known) - set(seen):
            self._deliver("DELETED", self._known[key])
        for key, obj in seen.items():
            self._deliver("MODIFIED" if key in self._known else "ADDED", obj)
        self.synced.set()
        return str(listing.resourceVersion)

    async def run(self) -> None:
        expired = False

        def on_error(exc: Exception, count: int) -> OnErrorResult:
            nonlocal expired
            if isinstance(exc, ApiError) and getattr(exc.status, "code", None) == 410:
                expired = True
                return OnErrorResult(OnErrorAction.STOP)
            log.warning("watch on %s interrupted (%s); resuming", getattr(self.res, "__name__", self.res), exc)
            return OnErrorResult(OnErrorAction.RETRY, sleep=min(0.2 * 2 ** min(count, 5), 5.0))

        failures = 0
        while True:
            try:
                version = await self._list()
                failures = 0
                expired = False
                res: Any = self.res
                if self.namespaced:
                    watch = self.client.watch(res, namespace=ALL_NS, resource_version=version, on_error=on_error)
                else:
                    watch = self.client.watch(res, resource_version=version, on_error=on_error)
                async for kind, item in watch:
                    if kind in ("ADDED", "MODIFIED", "DELETED"):
                        self._deliver(kind, to_dict(item))
                if not expired:
                    continue
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                log.warning("list/watch of %s failed (%s); listing again", getattr(self.res, "__name__", self.res), exc)
            await asyncio.sleep(min(RELIST_DELAY * 2 ** min(failures, 5), MAX_RELIST_DELAY))
