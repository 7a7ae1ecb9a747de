"""The write path's ResourceQuota bookkeeping: admission of creates and ``status`` kept current.

On a real cluster the ResourceQuota admission plugin charges a quota's ``status.used`` as it
admits a create, and kube-controller-manager's resourcequota controller recomputes ``used``
when usage falls (a pod deleted or finished, a counted object deleted) and when a quota's
``spec.hard`` changes. Here the API server owns the store and is its only writer, so both happen
in the same write path, synchronously: ``admit`` refuses a create that would pass a quota (before
the store write; a dry run is checked and charges nothing), ``prepare`` gives a written quota its
``status.hard`` and ``status.used``, and ``written`` (after every store write) rewrites the
``status`` of the namespace's quotas when what they count changed.

Cost: a namespace without a ResourceQuota pays one dictionary look per write. In a namespace
with one, object counts are the store's per-namespace counts (one look each, no decoding) and
pod usage comes from an index of that namespace's pods (name → what it charges) with running
totals, built when first needed and dropped with the namespace's last quota: never a scan.
What counts and the messages are ``builtin.quota``'s.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver.builtin import quota
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.storage import codec
from trainyard.cluster.server.storage.store import Store

PODS = "core/pods"


class Quotas:
    """ResourceQuota admission and status over one store (``Objects`` calls it on every write)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._pods: dict[str, dict[str, quota.Usage]] = {}  # namespace → pod name → its charge
        self._totals: dict[str, quota.Usage] = {}  # namespace → the sum of its pods' charges

    def guarded(self, namespace: str) -> bool:
        return bool(namespace) and self.store.count(quota.KEY, namespace) > 0

    def admit(self, rt: ResourceType, obj: Obj) -> None:
        """403 when creating ``obj`` would take one of its namespace's quotas over ``hard``."""
        namespace = (obj.get("metadata") or {}).get("namespace") or ""
        if not rt.namespaced or not self.guarded(namespace):
            return
        name = obj["metadata"].get("name", "")
        requested = quota.object_usage(rt.key, rt.plural, rt.group, obj)
        for q in self._quotas(namespace):
            hard = (q.get("spec") or {}).get("hard") or {}
            quota_name = q["metadata"]["name"]
            if rt.key == PODS and (why := quota.missing(obj, hard)):
                raise quota.forbidden(rt.qualified, rt.group, rt.plural, name, f"failed quota: {quota_name}: {why}")
            charged = {k: v for k, v in requested.items() if k in hard}
            if charged and (why := quota.exceeded(q, charged, self.usage(namespace, charged))):
                raise quota.forbidden(rt.qualified, rt.group, rt.plural, name, why)

    def prepare(self, obj: Obj) -> None:
        """A quota about to be stored: ``status.hard`` from ``spec.hard`` and ``status.used`` counted."""
        namespace = obj["metadata"].get("namespace", "")
        hard = (obj.get("spec") or {}).get("hard") or {}
        obj["status"] = quota.status(obj, self.usage(namespace, hard))

    def written(self, key: str, namespace: str, old: Obj | None, new: Obj | None) -> None:
        """After a store write of ``key``: keep the pod index and rewrite quota status that changed."""
        if not namespace:
            return
        changed = old is None or new is None
        if key == PODS and namespace in self._pods:
            name = (new or old or {}).get("metadata", {}).get("name", "")
            before = self._pods[namespace].pop(name, None)
            after = quota.pod_usage(new) if new is not None else None
            totals = self._totals[namespace]
            if before is not None:
                quota.add(totals, before, -1)
            if after is not None:
                self._pods[namespace][name] = after
                quota.add(totals, after)
            changed = changed or before != after
        if key == quota.KEY and new is None and not self.guarded(namespace):
            self._pods.pop(namespace, None)
            self._totals.pop(namespace, None)
            return
        if changed and self.guarded(namespace):
            self.refresh(namespace)

    def refresh(self, namespace: str) -> None:
        """Rewrite the ``status`` of each quota of ``namespace`` whose counts moved."""
        for q in self._quotas(namespace):
            hard = (q.get("spec") or {}).get("hard") or {}
            wanted = quota.status(q, self.usage(namespace, hard))
            if wanted != q.get("status"):
                new = codec.clone(q)
                new["status"] = wanted
                self.store.put(quota.KEY, namespace, q["metadata"]["name"], new, created=False, old=q)

    def usage(self, namespace: str, keys: Iterable[str]) -> quota.Usage:
        """What ``namespace`` uses of each hard key in ``keys`` now."""
        out: quota.Usage = {}
        totals: quota.Usage | None = None
        for key in keys:
            counted = quota.counted_resource(key)
            if counted is not None:
                out[key] = Decimal(self.store.count(counted, namespace))
                continue
            if totals is None:
                totals = self._pod_totals(namespace)
            out[key] = totals.get(key, Decimal(0))
        return out

    def _quotas(self, namespace: str) -> list[Obj]:
        return self.store.list(quota.KEY, namespace)[0]

    def _pod_totals(self, namespace: str) -> quota.Usage:
        if namespace not in self._pods:
            charges = {p["metadata"]["name"]: quota.pod_usage(p) for p in self.store.list(PODS, namespace)[0]}
            totals: quota.Usage = {}
            for charge in charges.values():
                quota.add(totals, charge)
            self._pods[namespace], self._totals[namespace] = charges, totals
        return self._totals[namespace]
