"""The one applier of plans: how every controller writes what its pure half decided.

Each verb is idempotent against a cache that may lag, and puts the server's answer back into the
cache it was read from (``Informer.mutated`` / ``removed``), so the next pass reads at least what
this one wrote:

* ``create``: "already exists" is success (names are deterministic, or the cache is behind);
* ``replace``: as read, so a newer version gets a conflict and the pass runs again on it;
* ``delete``: with the uid the pass saw as precondition, so a newer object of the same name is
  never deleted; "not found" is success;
* ``write_status``: a merge patch of ``status`` guarded by the resourceVersion the pass computed
  it from (a status from an older copy must not land: 409, and the pass runs again); fields
  another writer owns are never sent (``owned_elsewhere``), so two writers of one status cannot
  put back each other's older values;
* ``emit``: events, posted after the status write, so ``describe`` never tells of a verdict the
  status does not show.

``fence`` stops a replica that may have lost leadership before its first write.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.types import PatchType

from trainyard.api.meta import Obj, format_time
from trainyard.client.events import record_events
from trainyard.client.resources import build, is_status, to_dict
from trainyard.client.transport import delete
from trainyard.kit.informer import Informer
from trainyard.kit.plans import Event
from trainyard.kit.worker import NotLeading


class Applier:
    def __init__(
        self,
        client: AsyncClient,
        *,
        component: str,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        may_write: Callable[[], bool] = lambda: True,
        owned_elsewhere: Collection[str] = (),
    ) -> None:
        self.client = client
        self.component = component
        self.clock = clock
        self.may_write = may_write
        self.owned_elsewhere = frozenset(owned_elsewhere)
        """Top-level status fields another writer owns (the status server's progress): never written here."""

    def fence(self, what: str) -> None:
        """Raise ``NotLeading`` unless this replica may write (leader election's fence)."""
        if not self.may_write():
            raise NotLeading(f"not {what}: this replica no longer leads")

    async def get(self, res: Any, name: str, *, namespace: str | None) -> Obj | None:
        """Read one object from the server (past every cache); None when it is not there."""
        try:
            return to_dict(await self.client.get(res, name, namespace=namespace))
        except ApiError as exc:
            if is_status(exc, 404):
                return None
            raise

    async def create(self, res: Any, body: Obj, cache: Informer | None = None) -> Obj | None:
        """Create; the server's answer, or None when it was already there (success too)."""
        try:
            created = to_dict(await self.client.create(build(res, body)))
        except ApiError as exc:
            if is_status(exc, 409):
                return None
            raise
        if cache is not None:
            cache.mutated(created)
        return created

    async def replace(self, res: Any, body: Obj, cache: Informer | None = None) -> Obj:
        replaced = to_dict(await self.client.replace(build(res, body)))
        if cache is not None:
            cache.mutated(replaced)
        return replaced

    async def write(self, res: Any, body: Obj, cache: Informer | None = None) -> Obj | None:
        """Create a child that carries no resourceVersion, else replace it as read."""
        if (body.get("metadata") or {}).get("resourceVersion"):
            return await self.replace(res, body, cache)
        return await self.create(res, body, cache)

    async def patch(
        self,
        res: Any,
        name: str,
        patch: Any,
        *,
        namespace: str | None,
        cache: Informer | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Obj | None:
        """Patch; the answer, or None when the object is gone (a patch of nothing is nothing to do)."""
        try:
            patched = to_dict(await self.client.patch(res, name, patch, namespace=namespace, patch_type=patch_type))
        except ApiError as exc:
            if is_status(exc, 404):
                return None
            raise
        if cache is not None:
            cache.mutated(patched)
        return patched

    async def delete(
        self,
        res: Any,
        name: str,
        *,
        namespace: str,
        uid: str | None = None,
        cache: Informer | None = None,
        tell: bool = True,
        propagation: str | None = None,
    ) -> Obj | None:
        """Delete (only the incarnation ``uid``, when given); the answer, or None when already gone.

        ``tell`` False: the watch's DELETED of exactly this deletion enqueues no pass
        (``Informer.removed``); ``propagation``: ``Foreground``, ``Background`` or ``Orphan``.
        """
        deleted = await delete(self.client, res, name, namespace=namespace, uid=uid, propagation=propagation)
        if deleted is not None and cache is not None:
            cache.removed(deleted, tell=tell)
        return deleted

    async def write_status(self, res: Any, obj: Obj, status: Obj, cache: Informer, *, whole: bool = False) -> Obj:
        """Merge-patch ``obj``'s status, guarded by the resourceVersion it was computed from; the
        answer goes back into ``cache``. A status from an older copy gets 409 (a conflict, retried).

        ``whole``: ``status`` is the entire new status (what it lacks is removed), not only the
        fields this writer sets.
        """
        m = obj["metadata"]
        sent = {k: v for k, v in status.items() if k not in self.owned_elsewhere}
        if whole:
            kept = {k: v for k, v in (obj.get("status") or {}).items() if k not in self.owned_elsewhere}
            sent = merge_patch(kept, sent)
        body = {"metadata": {"resourceVersion": m["resourceVersion"]}, "status": sent}
        patched = to_dict(
            await self.client.patch(
                res.Status, m["name"], body, namespace=m.get("namespace"), patch_type=PatchType.MERGE
            )
        )
        cache.mutated(patched)
        return patched

    async def emit(self, involved: Obj, events: Sequence[Event]) -> None:
        """Post ``events`` about ``involved`` (an object reference, ``client.reference``), in order."""
        if events:
            triples = [(e.type.value, e.reason, e.message) for e in events]
            now = format_time(self.clock())
            await record_events(self.client, involved, triples, component=self.component, now=now)


def owned_by(obj: Obj, owner: Obj, api_version: str, kind: str) -> Obj:
    """``obj`` in ``owner``'s namespace, controlled by it (the ownerReference the garbage collector follows)."""
    m = owner["metadata"]
    ref = {
        "apiVersion": api_version,
        "kind": kind,
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {**obj, "metadata": {**obj["metadata"], "namespace": m["namespace"], "ownerReferences": [ref]}}


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``: what ``new`` has, and a null
    for each key it dropped (a value that is no object replaces whatever was there)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: Obj = {k: None for k in old if k not in new}
    return patch | {k: merge_patch(old.get(k), v) for k, v in new.items()}
