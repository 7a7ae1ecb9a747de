"""Informers, as client-go's: a reflector that lists then watches, a cache of what it saw, indexes.

``Informer`` lists a resource (optionally one namespace, optionally label-selected), then watches
from the list's resourceVersion, and relists when the watch's version expired (410), reporting the
objects that vanished meanwhile as ``DELETED`` so the cache never keeps a ghost. Every change is
applied to the cache and its indexes first, then handed to each handler as ``(type, object)``
exactly as a watch delivers it. ``synced`` is set once the first list has been delivered.

Readers between events read the cache: ``get`` by namespace and name, ``by_index`` through an
indexer (a function from an object to the values it is filed under, e.g. its controller owner).
A controller that has just written an object puts the server's answer back with ``mutated`` (as
client-go's mutation cache does): the next pass then reads at least what it wrote, never the older
copy the watch has not replaced yet. A watch event older than what the cache holds is ignored.

The scheduler, the embedded Job and JobSet controllers and the operator all read through these;
``Caches`` starts a controller's informers and waits for their first lists (the status write of a
pass that read from a cache is ``kit.applier``'s); ``SharedInformers`` gives the controllers of
one manager one informer per resource, as controller-runtime's shared cache does.
Objects are plain dicts and are shared: readers must not mutate them. They are cached without
``metadata.managedFields`` (controller-runtime's ``TransformStripManagedFields``): no controller
reads them, they are often a third of a pod, and a replace that omits them keeps the server's.
A watch served in this process brings them without (``client.lean_twin``): not even decoded.
``parsed`` gives a reader an object as a model, made once per cached version and as shared (so
as read-only) as the dict it was made from.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.core.resource import api_info
from lightkube.types import OnErrorAction, OnErrorResult

from trainyard.api.meta import Obj
from trainyard.client.resources import lean_twin, to_dict

log = logging.getLogger(__name__)

Key = tuple[str, str]
Handler = Callable[[str, Obj], None]
Indexer = Callable[[Obj], Iterable[str]]
M = TypeVar("M")
RELIST_DELAY = 1.0
MAX_RELIST_DELAY = 30.0  # a resource that cannot be listed (its CRD gone) is retried this often at most
TOMBSTONES = 10_000  # deletions remembered, so that a late answer to our own write cannot revive a ghost
# Objects whose models ``parsed`` keeps, the most recently read: the passes of the jobs being
# worked on now; keeping every cached object's (a 1,000-job sweep) took 60 MB more at peak.
PARSED = 512


def key_of(obj: Obj) -> Key:
    m = obj.get("metadata") or {}
    return m.get("namespace") or "", m.get("name") or ""


def newer(candidate: Obj, than: Obj, *, strictly: bool = False) -> bool:
    """Whether ``candidate`` is a later version than ``than`` (or cannot be ordered against it).

    resourceVersions are opaque to clients in general; kube-apiserver's (etcd revisions) and the
    embedded server's are integers, which is what client-go's mutation cache relies on too.
    """
    a = (candidate.get("metadata") or {}).get("resourceVersion") or ""
    b = (than.get("metadata") or {}).get("resourceVersion") or ""
    if a.isdigit() and b.isdigit():
        return int(a) > int(b) if strictly else int(a) >= int(b)
    return not strictly


def _version(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


def stripped(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` (a copy of the top two levels, when it had them)."""
    m = obj.get("metadata")
    if not m or "managedFields" not in m:
        return obj
    return {**obj, "metadata": {k: v for k, v in m.items() if k != "managedFields"}}


OWNER_INDEX = "controller"
"""The index every controller files children under: ``controller_of``."""


def controller_of(obj: Obj) -> Iterable[str]:
    """Indexer: ``kind/namespace/name`` of the object's controller owner, if it has one."""
    m = obj.get("metadata") or {}
    for ref in m.get("ownerReferences") or []:
        if ref.get("controller"):
            yield f"{ref.get('kind')}/{m.get('namespace') or ''}/{ref.get('name')}"


def label_index(*keys: str) -> Indexer:
    """Indexer: the namespace and the values of ``keys`` (an object lacking any is not filed)."""

    def index(obj: Obj) -> Iterable[str]:
        m = obj.get("metadata") or {}
        found = m.get("labels") or {}
        if all(k in found for k in keys):
            yield "/".join((m.get("namespace") or "", *(found[k] for k in keys)))

    return index


class Informer:
    def __init__(
        self,
        client: AsyncClient,
        res: Any,
        handle: Handler | None = None,
        *,
        namespaced: bool = True,
        namespace: str | None = None,
        labels: dict[str, Any] | None = None,
        fields: dict[str, Any] | None = None,
        indexers: dict[str, Indexer] | None = None,
        parsed: int | None = None,
    ) -> None:
        self.client = client
        self.res = res
        self.parsed_max = PARSED if parsed is None else parsed  # objects whose models ``parsed`` keeps
        self._wire = lean_twin(res)  # listed and watched as plain dicts, which the cache keeps, stripped
        self.handlers: list[Handler] = [handle] if handle is not None else []
        self.namespaced = namespaced
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.synced = asyncio.Event()
        self._known: dict[Key, Obj] = {}
        self._deleted: OrderedDict[Key, Obj] = OrderedDict()
        self._indexers = dict(indexers or {})
        self._index: dict[str, dict[str, set[Key]]] = {name: {} for name in self._indexers}
        self._task: asyncio.Task[None] | None = None
        # Each cached object's models by parser, with the dict each was made from: a version is
        # parsed once, however many passes read it (a job's pass reads its job and every child).
        self._parsed: OrderedDict[Key, dict[Callable[[Obj], Any], tuple[Obj, Any]]] = OrderedDict()

    def start(self, name: str) -> asyncio.Task[None]:
        """The reflector, running in a task of its own: started once however many controllers ask
        (``SharedInformers``), again only after it ended."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self.run(), name=name)
        return self._task

    def add_indexers(self, indexers: Mapping[str, Indexer]) -> None:
        """File the cache under more indexes too (a controller joining a shared informer); one name, one function."""
        for name, indexer in indexers.items():
            known = self._indexers.get(name)
            if known is indexer:
                continue
            if known is not None:
                raise ValueError(f"index {name!r} of {getattr(self.res, '__name__', self.res)} is defined twice")
            self._indexers[name] = indexer
            values: dict[str, set[Key]] = {}
            for key, obj in self._known.items():
                for value in indexer(obj):
                    values.setdefault(value, set()).add(key)
            self._index[name] = values

    # -- reading the cache ---------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        return self._known.get((namespace, name))

    def by_index(self, index: str, value: str) -> list[Obj]:
        """The cached objects ``index`` files under ``value``, in (namespace, name) order."""
        return [self._known[k] for k in sorted(self._index[index].get(value, ()))]

    def items(self) -> list[Obj]:
        return list(self._known.values())

    def parsed(self, parse: Callable[[Obj], M], obj: Obj) -> M:
        """``parse(obj)``, made once for each version the cache holds (``obj`` as ``get`` or
        ``by_index`` gave it) and shared by every reader after: none may change it."""
        key = key_of(obj)
        if self._known.get(key) is not obj:
            return parse(obj)  # not (or no longer) what the cache holds: nothing to share
        models = self._parsed.get(key)
        if models is None:
            models = self._parsed[key] = {}
            if len(self._parsed) > self.parsed_max:
                self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(key)
        made = models.get(parse)
        if made is None or made[0] is not obj:
            made = models[parse] = (obj, parse(obj))
        result: M = made[1]
        return result

    def __len__(self) -> int:
        return len(self._known)

    # -- writing it ------------------------------------------------------------------------------------

    def mutated(self, obj: Obj) -> None:
        """Our own write's answer: cached unless the watch already brought a newer version."""
        obj = stripped(obj)
        key = key_of(obj)
        current = self._known.get(key)
        if current is not None:
            if newer(obj, current):
                self._store(key, obj)
            return
        gone = self._deleted.get(key)
        if gone is None or newer(obj, gone, strictly=True):
            self._store(key, obj)

    def removed(self, obj: Obj, *, tell: bool = True) -> None:
        """Our own delete's answer: the object as it went, or still there while it terminates.

        Terminating, it is cached as ``mutated``; gone, it leaves the cache now (unless a newer
        incarnation is cached), so that the next pass does not delete it again before the watch
        tells; the watch's DELETED still reaches the handlers, unless ``tell`` is False: then the
        DELETED of exactly this deletion (its resourceVersion) is taken in silence, as the watch's
        echo of our own write is (``mutated``); any later change of the name still reaches them.
        """
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            self.mutated(obj)
            return
        if obj.get("kind") == "Status" or not obj.get("metadata"):
            return  # an answer without the object: the watch will tell
        key = key_of(obj)
        if self._forget(key, obj) and not tell:
            self._deleted[key]["untold"] = True

    def _forget(self, key: Key, obj: Obj) -> bool:
        """Take ``obj``, which went, out of the cache and remember it went; False (nothing done) when
        the cache holds a newer incarnation, created since."""
        current = self._known.get(key)
        if current is not None and newer(current, obj, strictly=True):
            return False
        self._store(key, None)
        # Only its version is ever compared (``newer``): a tombstone need not hold the object.
        self._deleted[key] = {"metadata": {"resourceVersion": (obj.get("metadata") or {}).get("resourceVersion")}}
        self._deleted.move_to_end(key)
        if len(self._deleted) > TOMBSTONES:
            self._deleted.popitem(last=False)
        return True

    def _store(self, key: Key, obj: Obj | None) -> None:
        old = self._known.pop(key, None) if obj is None else self._known.get(key)
        self._parsed.pop(key, None)
        if obj is not None:
            self._known[key] = obj
        for name, indexer in self._indexers.items():
            values = self._index[name]
            for value in indexer(old) if old is not None else ():
                filed = values.get(value)
                if filed is not None:
                    filed.discard(key)
                    if not filed:
                        del values[value]
            for value in indexer(obj) if obj is not None else ():
                values.setdefault(value, set()).add(key)

    def _deliver(self, kind: str, obj: Obj) -> None:
        obj = stripped(obj)
        key = key_of(obj)
        if kind == "DELETED":
            gone = self._deleted.get(key) if key not in self._known else None
            if gone is not None and gone.pop("untold", False) and _version(obj) == _version(gone):
                return  # the echo of our own deletion, which asked for silence (``removed``)
            if not self._forget(key, obj):
                return  # an older incarnation went; the one we hold was created since (``mutated``)
        else:
            current = self._known.get(key)
            if current is not None and not newer(obj, current):
                return  # an event older than what we wrote ourselves (``mutated``)
            self._store(key, obj)
        for handle in self.handlers:
            try:
                handle(kind, obj)
            except Exception:
                log.exception("handling %s %s/%s failed", kind, *key)

    # -- the reflector ---------------------------------------------------------------------------------

    def _scope(self) -> dict[str, Any]:
        scope: dict[str, Any] = {}
        if self.namespaced:
            scope["namespace"] = self.namespace if self.namespace is not None else ALL_NS
        if self.labels is not None:
            scope["labels"] = self.labels
        if self.fields is not None:
            scope["fields"] = self.fields
        return scope

    async def _list(self) -> str:
        listing = self.client.list(self._wire, **self._scope())
        seen: dict[Key, Obj] = {}
        async for item in listing:
            obj = to_dict(item)
            seen[key_of(obj)] = obj
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
                watch = self.client.watch(self._wire, resource_version=version, on_error=on_error, **self._scope())
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


class SharedInformers:
    """The informers of one manager's controllers, one per resource and namespace, as controller-runtime's
    shared cache: each change is listed, decoded and cached once, then handed to every controller
    that asked (each filters what it owns in its handler). Seven job kinds each watching every
    PodGroup decoded each change seven times, and held seven copies of each."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._informers: dict[tuple[str, str, str, str | None], Informer] = {}

    def informer(
        self,
        res: Any,
        handle: Handler,
        *,
        namespace: str | None = None,
        indexers: Mapping[str, Indexer] | None = None,
        parsed: int = 0,
    ) -> Informer:
        """The informer of ``res`` in ``namespace`` (None: all), with ``handle`` among its handlers;
        ``parsed``: how many objects' models it should keep at least (``Informer.parsed``)."""
        api = api_info(res)
        key = (api.resource.group, api.resource.version, api.plural, namespace)
        informer = self._informers.get(key)
        if informer is None:
            informer = self._informers[key] = Informer(self.client, res, namespace=namespace)
        informer.parsed_max = max(informer.parsed_max, parsed)
        informer.add_indexers(indexers or {})
        informer.handlers.append(handle)
        return informer


class Caches:
    """The informers a controller runs: each started once, waited for until its first list."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.tasks: dict[str, asyncio.Task[None]] = {}

    async def sync(self, informers: Mapping[str, Informer]) -> None:
        """Start those not running yet; return once each has listed. An informer never ends: one that
        does raises why; one that cannot list (its CRD not served) is named every 30 s meanwhile."""
        for name, informer in informers.items():
            if name not in self.tasks:
                self.tasks[name] = informer.start(f"{self.who} informer {name}")
        try:
            for name, informer in informers.items():
                await self._synced(name, informer)
        except BaseException:
            for task in self.tasks.values():
                task.cancel()
            raise

    async def _synced(self, name: str, informer: Informer) -> None:
        synced = asyncio.create_task(informer.synced.wait())
        try:
            while not synced.done():
                done, _ = await asyncio.wait(
                    [synced, *self.tasks.values()], timeout=30, return_when=asyncio.FIRST_COMPLETED
                )
                for task in done - {synced}:
                    task.result()
                    raise RuntimeError(f"{task.get_name()} ended")
                if not done:
                    log.info("%s: waiting for the %s cache to sync", self.who, name)
        finally:
            synced.cancel()

    async def run(self) -> None:
        await asyncio.gather(*self.tasks.values())
