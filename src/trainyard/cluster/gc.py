"""The garbage collector: ownerReference cascades, deletion propagation and namespace teardown.

It runs beside the API server and acts only through ``Objects``, like kube-controller-manager's
garbage collector acts only through the API. Work is queued from store changes and drained by a
task, so a delete returns before its dependents are collected (Background propagation).
"""

from __future__ import annotations

import asyncio
import copy
import logging

from trainyard.cluster.apiserver import errors
from trainyard.cluster.apiserver.objects import Objects
from trainyard.cluster.apiserver.registry import ResourceType
from trainyard.cluster.storage.store import Change, Obj

log = logging.getLogger(__name__)


class GarbageCollector:
    def __init__(self, objects: Objects) -> None:
        self.objects = objects
        self._wake = asyncio.Event()
        objects.store.subscribe(self._on_change)

    def _on_change(self, change: Change) -> None:
        m = change.obj.get("metadata", {})
        if change.type == "DELETED" or m.get("deletionTimestamp"):
            self._wake.set()

    async def run(self) -> None:
        self._wake.set()
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                self.sweep()
            except Exception:
                log.exception("garbage collection pass failed; retrying on the next change")
            await asyncio.sleep(0)

    def _types(self) -> dict[str, ResourceType]:
        return {rt.key: rt for rt in self.objects.registry}

    def sweep(self) -> None:
        """One level-triggered pass over every object: collect what has lost all its owners."""
        types = self._types()
        objects = list(self.objects.store.all_objects())
        live = {o["metadata"]["uid"]: o for _, o in objects}
        dependents: dict[str, list[tuple[ResourceType, Obj]]] = {}
        for key, obj in objects:
            for ref in obj["metadata"].get("ownerReferences") or []:
                if key in types:
                    dependents.setdefault(ref["uid"], []).append((types[key], obj))
        for key, obj in objects:
            rt = types.get(key)
            if rt is None:
                continue
            refs = obj["metadata"].get("ownerReferences") or []
            if refs and all(r["uid"] not in live for r in refs):
                self._delete(rt, obj)
            self._finalize_owner(rt, obj, dependents.get(obj["metadata"]["uid"], []))
            if rt.key == "core/namespaces" and obj["metadata"].get("deletionTimestamp"):
                self._teardown_namespace(obj, objects, types)

    def _delete(self, rt: ResourceType, obj: Obj) -> None:
        m = obj["metadata"]
        if m.get("deletionTimestamp"):
            return
        try:
            self.objects.delete(rt, m.get("namespace", ""), m["name"], propagation="Background")
        except errors.ApiError as exc:
            if exc.code != 404:
                raise

    def _finalize_owner(self, rt: ResourceType, owner: Obj, deps: list[tuple[ResourceType, Obj]]) -> None:
        m = owner["metadata"]
        if not m.get("deletionTimestamp"):
            return
        finalizers = list(m.get("finalizers") or [])
        if "orphan" in finalizers:
            for dep_rt, dep in deps:
                self._strip_owner(dep_rt, dep, m["uid"])
            finalizers.remove("orphan")
        elif "foregroundDeletion" in finalizers:
            blocking = [(d_rt, d) for d_rt, d in deps if self._blocks(d, m["uid"])]
            for dep_rt, dep in blocking:
                self._delete(dep_rt, dep)
            if blocking:
                return
            finalizers.remove("foregroundDeletion")
        else:
            return
        self._set_finalizers(rt, owner, finalizers)

    @staticmethod
    def _blocks(dep: Obj, owner_uid: str) -> bool:
        return any(r["uid"] == owner_uid for r in dep["metadata"].get("ownerReferences") or [])

    def _strip_owner(self, rt: ResourceType, dep: Obj, owner_uid: str) -> None:
        new = copy.deepcopy(dep)
        refs = [r for r in new["metadata"].get("ownerReferences") or [] if r["uid"] != owner_uid]
        new["metadata"]["ownerReferences"] = refs or None
        if not refs:
            del new["metadata"]["ownerReferences"]
        m = dep["metadata"]
        self.objects.update(rt, m.get("namespace", ""), m["name"], new)

    def _set_finalizers(self, rt: ResourceType, obj: Obj, finalizers: list[str]) -> None:
        new = copy.deepcopy(obj)
        new["metadata"]["finalizers"] = finalizers
        if not finalizers:
            del new["metadata"]["finalizers"]
        m = obj["metadata"]
        self.objects.update(rt, m.get("namespace", ""), m["name"], new)

    def _teardown_namespace(self, ns: Obj, objects: list[tuple[str, Obj]], types: dict[str, ResourceType]) -> None:
        name = ns["metadata"]["name"]
        remaining = [
            (types[k], o)
            for k, o in objects
            if k in types and types[k].namespaced and o["metadata"].get("namespace") == name
        ]
        for rt, obj in remaining:
            self._delete(rt, obj)
        if not remaining:
            finalizers = [f for f in ns["metadata"].get("finalizers") or [] if f != "kubernetes"]
            self._set_finalizers(types["core/namespaces"], ns, finalizers)
