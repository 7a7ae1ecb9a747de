"""What the dashboard watches: every job kind of every family, their pods, the objects between, events.

One informer per resource (``kit.informer``): the jobs of each kind the families serve, pods,
events, and the objects a job's pods may hang from (batch Jobs, JobSets: a TrainJob's pods are its
JobSet's Jobs'; a search's trial objects, Katib's Trials, which own the trials' jobs). Every object
is filed under the uid of its controller owner and every event under the uid it is about, so a job's
pods and events are found through those indexes, walking down the ownership tree, never by a scan.
Subscribers get each change with the uid of the job it concerns (its root owner), resolved when it
happens.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from lightkube import ALL_NS, AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.api import families
from trainyard.api.meta import Obj
from trainyard.client.resources import plain_resource
from trainyard.dashboard import views
from trainyard.kit.informer import Caches, Informer

log = logging.getLogger(__name__)

OWNER_UID = "owner-uid"
ABOUT_UID = "about-uid"

INTERMEDIATES = (("batch", "v1", "Job", "jobs"), ("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets"))
"""The owned objects a job's pods may hang from (kube's batch Job, JobSet's JobSet)."""


def owned_kinds() -> tuple[tuple[str, str, str, str], ...]:
    """(group, version, kind, plural) of every owned object watched: ``INTERMEDIATES`` and the
    trials of each search family that are objects of their own (``JobView.search``), which its
    trials' jobs hang from in turn."""
    trials = {
        (t.group, t.version, t.kind, t.plural)
        for f in families.FAMILIES.values()
        if f.view.search is not None and (t := f.view.search.trial_kind) is not None
    }
    return (*INTERMEDIATES, *sorted(trials))


def owner_uid(obj: Obj) -> Iterable[str]:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") and ref.get("uid"):
            yield str(ref["uid"])


def about_uid(event: Obj) -> Iterable[str]:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    if involved.get("uid"):
        yield str(involved["uid"])


@dataclass(frozen=True)
class Change:
    """One change the dashboard saw: ``what`` is ``job``, ``pod``, ``event`` or ``owned``."""

    what: str
    type: str
    obj: Obj
    job_uid: str | None
    """The uid of the job it concerns (the job's own for ``job``); None when it concerns no job."""


Subscriber = Callable[[Change], None]


class Watched:
    """The informers, their indexes, and who the changes go to."""

    def __init__(self, client: AsyncClient, *, pods: Informer | None = None) -> None:
        """``pods``: an informer of every pod that the process runs already (the embedded plane's
        scheduler's), shared rather than a second watch and copy of each pod; it is not started here."""
        self.client = client
        self.subscribers: list[Subscriber] = []
        self.jobs: dict[str, Informer] = {}
        for entry in views.job_kinds():
            res = plain_resource(entry.group, entry.version, entry.kind, entry.plural)
            self.jobs[entry.plural] = Informer(client, res, self._handler("job"))
        self.unserved: list[str] = []
        """The resources the server does not serve (a cluster without some family's CRDs), not watched."""
        self._shared = pods
        if pods is None:
            pods = Informer(client, plain_resource("", "v1", "Pod", "pods"))
        pods.add_indexers({OWNER_UID: owner_uid})
        pods.handlers.append(self._handler("pod"))
        self.pods = pods
        self.events = Informer(
            client,
            plain_resource("", "v1", "Event", "events"),
            self._handler("event"),
            indexers={ABOUT_UID: about_uid},
        )
        self.owned = {
            names[3]: Informer(client, plain_resource(*names), self._handler("owned"), indexers={OWNER_UID: owner_uid})
            for names in owned_kinds()
        }
        """The owned objects watched, by plural."""
        # uid -> (what, namespace, name) of every job, pod and owned object cached, for walking up.
        self._uids: dict[str, tuple[str, str, str]] = {}
        self._parent: dict[str, str] = {}
        self._caches = Caches("dashboard")

    # -- reading -----------------------------------------------------------------------------------

    def all_jobs(self) -> list[Obj]:
        return [job for informer in self.jobs.values() for job in informer.items()]

    def job(self, namespace: str, plural: str, name: str) -> Obj | None:
        informer = self.jobs.get(plural)
        return informer.get(namespace, name) if informer is not None else None

    def job_by_uid(self, uid: str) -> Obj | None:
        found = self._uids.get(uid)
        if found is None or found[0] != "job":
            return None
        _, namespace, name = found
        for informer in self.jobs.values():
            job = informer.get(namespace, name)
            if job is not None and job["metadata"].get("uid") == uid:
                return job
        return None

    def job_named(self, namespace: str, kind: str, name: str) -> Obj | None:
        found = views.family_kind(kind)
        return self.job(namespace, found[1].plural, name) if found is not None else None

    def owned_by(self, uid: str, plural: str) -> list[Obj]:
        """The objects of the owned resource ``plural`` that the object of ``uid`` controls."""
        informer = self.owned.get(plural)
        return informer.by_index(OWNER_UID, uid) if informer is not None else []

    def owner_job(self, uid: str) -> str | None:
        """The uid of the job controlling the job of ``uid`` (a search's trial), or None."""
        parent = self._parent.get(uid)
        return parent if parent is not None and (self._uids.get(parent) or ("",))[0] == "job" else None

    def descendants(self, uid: str) -> tuple[list[Obj], list[Obj]]:
        """The pods under the object of ``uid`` and the owned objects between, down the owner tree."""
        pods: list[Obj] = []
        between: list[Obj] = []
        frontier = [uid]
        while frontier:
            parent = frontier.pop()
            pods.extend(self.pods.by_index(OWNER_UID, parent))
            for informer in self.owned.values():
                children = informer.by_index(OWNER_UID, parent)
                between.extend(children)
                frontier.extend(c["metadata"]["uid"] for c in children if c["metadata"].get("uid"))
        return pods, between

    def pods_of(self, uid: str) -> list[Obj]:
        return sorted(self.descendants(uid)[0], key=lambda p: str(p["metadata"].get("name")))

    def events_of(self, uid: str) -> list[Obj]:
        """Events about the job, its pods and the objects between."""
        pods, between = self.descendants(uid)
        uids = [uid, *(o["metadata"].get("uid") for o in (*pods, *between))]
        return [e for u in uids if u for e in self.events.by_index(ABOUT_UID, u)]

    def root_of(self, uid: str | None) -> str | None:
        """The uid of the job at the top of ``uid``'s owners, or None if it hangs from no job."""
        seen = 0
        while uid is not None and seen < 8:
            found = self._uids.get(uid)
            if found is None:
                return None
            if found[0] == "job":
                return uid
            uid = self._parent.get(uid)
            seen += 1
        return None

    async def _served(self, informer: Informer) -> bool:
        """Whether the server serves the informer's resource (a 404 on listing one: its CRD is absent)."""
        try:
            async for _ in self.client.list(informer.res, namespace=ALL_NS, chunk_size=1):
                break
        except ApiError as exc:
            if exc.status.code == 404:
                return False
            raise
        return True

    # -- running -----------------------------------------------------------------------------------

    async def run(self, synced: asyncio.Event | None = None) -> None:
        """List then watch what the server serves, until cancelled; ``synced`` is set once all have listed."""
        informers = {**{f"jobs {p}": i for p, i in self.jobs.items()}, "events": self.events}
        if self._shared is None:
            informers["pods"] = self.pods
        informers.update({f"owned {p}": i for p, i in self.owned.items()})
        for name, informer in list(informers.items()):
            if not await self._served(informer):
                self.unserved.append(name)
                del informers[name]
        if self.unserved:
            log.info("the dashboard does not watch what this cluster does not serve: %s", ", ".join(self.unserved))
        self.jobs = {p: i for p, i in self.jobs.items() if f"jobs {p}" in informers}
        self.owned = {p: i for p, i in self.owned.items() if f"owned {p}" in informers}
        await self._caches.sync(informers)
        if self._shared is not None:
            await self._shared.synced.wait()
        if synced is not None:
            synced.set()
        await self._caches.run()

    def _handler(self, what: str) -> Callable[[str, Obj], None]:
        def handle(type_: str, obj: Obj) -> None:
            meta = obj.get("metadata") or {}
            uid = str(meta.get("uid") or "")
            if what != "event" and uid:
                if type_ == "DELETED":
                    self._uids.pop(uid, None)
                else:
                    self._uids[uid] = (what, str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                    parent = next(iter(owner_uid(obj)), None)
                    if parent is not None:
                        self._parent[uid] = parent
            if what == "job":
                job_uid: str | None = uid
            elif what == "event":
                job_uid = self.root_of(next(iter(about_uid(obj)), None))
            else:
                job_uid = self.root_of(next(iter(owner_uid(obj)), None))
            if type_ == "DELETED":
                self._parent.pop(uid, None)
            change = Change(what, type_, obj, job_uid)
            for subscriber in list(self.subscribers):
                try:
                    subscriber(change)
                except Exception:
                    log.exception("a dashboard subscriber failed on %s %s", type_, meta.get("name"))

        return handle
