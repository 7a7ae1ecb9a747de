"""The quota books of the API server: which namespaces have ResourceQuotas, and their ``status.used``.

kube-apiserver's ResourceQuota admission charges a create against ``status.used`` and writes the
new usage in the same request; kube-controller-manager's resourcequota controller lowers it when
objects go or pods finish. The embedded server owns its store, so both happen here, beside the
write they follow (``builtin.quota`` decides): a create is charged, a pod reaching a terminal
phase or any counted object removed gives back what it held, and a quota created or changed is
counted afresh from the objects of its namespace. A namespace without quotas costs one dict
lookup a write.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver.builtin import quota
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.storage.store import Store


def _keys_for(hard: dict[str, object]) -> set[str]:
    """The storage keys whose objects a quota with these ``hard`` names counts."""
    legacy = {v: k for k, v in quota.LEGACY_COUNTS.items()}
    out = set()
    for name in hard:
        if name.startswith("count/"):
            plural, _, group = name[len("count/") :].partition(".")
            out.add(f"{group or 'core'}/{plural}")
        elif name in legacy:
            out.add(legacy[name])
        elif name == "requests.storage":
            out.add("core/persistentvolumeclaims")
        else:
            out.add("core/pods")  # compute resources
    return out


class QuotaBooks:
    def __init__(self, store: Store, resource_of: Callable[[str], ResourceType | None]) -> None:
        self.store = store
        self.resource_of = resource_of
        self._namespaces: dict[str, dict[str, int]] = {}

    def _counted(self, key: str = quota.KEY) -> dict[str, int]:
        """Namespace → how many objects of ``key`` (quotas, limit ranges) it holds; read once."""
        if key not in self._namespaces:
            found: dict[str, int] = {}
            for obj in self.store.list(key, None)[0]:
                ns = obj["metadata"].get("namespace", "")
                found[ns] = found.get(ns, 0) + 1
            self._namespaces[key] = found
        return self._namespaces[key]

    def _quotas(self, namespace: str) -> list[Obj]:
        if namespace not in self._counted():
            return []
        return self.store.list(quota.KEY, namespace)[0]

    def limit_ranges(self, namespace: str) -> list[Obj]:
        if namespace not in self._counted(quota.LIMITS_KEY):
            return []
        return self.store.list(quota.LIMITS_KEY, namespace)[0]

    def added(self, rt: ResourceType, obj: Obj) -> None:
        """A quota or limit range was stored: its namespace is now looked at."""
        if rt.key in (quota.KEY, quota.LIMITS_KEY):
            counted = self._counted(rt.key)
            namespace = obj["metadata"].get("namespace", "")
            counted[namespace] = counted.get(namespace, 0) + 1

    # -- a create --------------------------------------------------------------------------------

    def charge(self, rt: ResourceType, obj: Obj) -> list[tuple[Obj, Obj]]:
        """The quota writes ``obj``'s create makes (current, updated); 403 if one is exceeded."""
        namespace = obj["metadata"].get("namespace", "")
        quotas = self._quotas(namespace)
        if not quotas:
            return []
        charged = quota.charge(quotas, rt.key, rt.group, rt.plural, obj, obj["metadata"]["name"])
        by_name = {q["metadata"]["name"]: q for q in quotas}
        return [(by_name[n], self._with_used(by_name[n], used)) for n, used in charged]

    def commit(self, writes: list[tuple[Obj, Obj]]) -> None:
        for current, updated in writes:
            m = updated["metadata"]
            self.store.put(quota.KEY, m["namespace"], m["name"], updated, created=False, old=current)

    # -- usage given back ------------------------------------------------------------------------

    def released(self, rt: ResourceType, old: Obj, new: Obj | None) -> None:
        """``old`` became ``new`` (None: removed): lower the namespace's quotas by what it no longer uses."""
        namespace = old["metadata"].get("namespace", "")
        quotas = self._quotas(namespace)
        if not quotas:
            return
        before = quota.usage(rt.key, rt.group, rt.plural, old)
        after = quota.usage(rt.key, rt.group, rt.plural, new) if new is not None else {}
        freed = {k: v - after.get(k, Decimal(0)) for k, v in before.items() if v > after.get(k, Decimal(0))}
        if not freed:
            return
        for q in quotas:
            used = {k: quota.amount(v) for k, v in ((q.get("status") or {}).get("used") or {}).items()}
            if not any(k in used for k in freed):
                continue
            lowered = {k: max(Decimal(0), v - freed.get(k, Decimal(0))) for k, v in used.items()}
            self.commit([(q, self._with_used(q, lowered))])

    # -- a quota written -------------------------------------------------------------------------

    def counted(self, q: Obj, *, created: bool) -> None:
        """Fill a new or changed quota's status from what its namespace holds (in place)."""
        namespace = q["metadata"].get("namespace", "")
        hard = dict((q.get("spec") or {}).get("hard") or {})
        used: dict[str, Decimal] = {}
        for key in _keys_for(hard):
            rt = self.resource_of(key)
            if rt is None:
                continue  # a kind nothing serves counts nothing
            for obj in self.store.list(key, namespace)[0]:
                for name, value in quota.usage(key, rt.group, rt.plural, obj).items():
                    if name in hard:
                        used[name] = used.get(name, Decimal(0)) + value
        if quota.KEY in _keys_for(hard) and created:
            for name in ("resourcequotas", quota.count_name("", "resourcequotas")):
                if name in hard:
                    used[name] = used.get(name, Decimal(0)) + 1  # itself
        q["status"] = quota.status(hard, used)

    def removed(self, rt: ResourceType, obj: Obj) -> None:
        """``obj`` is gone: a quota or limit range stops being looked at, anything else gives back its usage."""
        if rt.key not in (quota.KEY, quota.LIMITS_KEY):
            self.released(rt, obj, None)
            return
        namespace = obj["metadata"].get("namespace", "")
        counted = self._counted(rt.key)
        counted[namespace] = counted.get(namespace, 1) - 1
        if counted[namespace] <= 0:
            counted.pop(namespace)

    def _with_used(self, q: Obj, used: dict[str, Decimal]) -> Obj:
        hard = ((q.get("status") or {}).get("hard")) or (q.get("spec") or {}).get("hard") or {}
        return {**q, "status": quota.status(hard, used)}
