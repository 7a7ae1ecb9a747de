"""``yard node drain`` as kubectl drain (v1.32) does it: cordon, evict every pod through the eviction
API, retry an eviction a PodDisruptionBudget refuses (429) every 5 s, wait until each pod is gone.

``pods_to_evict`` is kubectl's filter chain, pure: DaemonSet-managed and mirror pods are left
(said, for DaemonSets); pods with ``emptyDir`` volumes need ``--delete-emptydir-data`` and pods
that declare no controller ``--force`` (pods that already ended go anyway). ``Drain`` runs the
evictions with an injected clock and sleep, so its retries can be tested without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lightkube import Client
from lightkube.core.exceptions import ApiError
from lightkube.models.meta_v1 import DeleteOptions, ObjectMeta
from lightkube.resources.core_v1 import Node, Pod

Obj = dict[str, Any]
RETRY_AFTER = 5.0
"""Seconds between tries of an eviction refused with 429 (kubectl's)."""
MIRROR = "kubernetes.io/config.mirror"


@dataclass
class Selection:
    evict: list[Obj] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _name(pod: Obj) -> str:
    m = pod.get("metadata") or {}
    return f"{m.get('namespace')}/{m.get('name')}"


def pods_to_evict(pods: Sequence[Obj], *, force: bool, delete_emptydir_data: bool) -> Selection:
    """kubectl drain's filters, with its words for what is skipped, warned about or refused."""
    groups: dict[tuple[str, str], list[str]] = {}
    out = Selection()
    for pod in pods:
        m = pod.get("metadata") or {}
        ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        controller = next((r for r in m.get("ownerReferences") or [] if r.get("controller")), None)
        if controller is not None and controller.get("kind") == "DaemonSet":
            groups.setdefault(("warning", "ignoring DaemonSet-managed Pods"), []).append(_name(pod))
            continue
        if MIRROR in (m.get("annotations") or {}):
            continue
        refused = False
        if not ended and any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or []):
            if delete_emptydir_data:
                groups.setdefault(("warning", "deleting Pods with local storage"), []).append(_name(pod))
            else:
                what = "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
                groups.setdefault(("error", what), []).append(_name(pod))
                refused = True
        if controller is None and not ended:
            if force:
                groups.setdefault(("warning", "deleting Pods that declare no controller"), []).append(_name(pod))
            else:
                what = "cannot delete Pods that declare no controller (use --force to override)"
                groups.setdefault(("error", what), []).append(_name(pod))
                refused = True
        if not refused:
            out.evict.append(pod)
    for (kind, what), names in groups.items():
        (out.warnings if kind == "warning" else out.errors).append(f"{what}: {', '.join(names)}")
    return out


class Drain:
    def __init__(
        self,
        client: Client,
        say: Callable[[str], None],
        *,
        grace_period: int = -1,
        timeout: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.say = say
        self.grace_period = grace_period
        self.timeout = timeout
        self.clock = clock
        self.sleep = sleep

    def cordon(self, node: str) -> None:
        current = self.client.get(Node, node)
        if current.spec is not None and current.spec.unschedulable:
            self.say(f"node/{node} already cordoned")
            return
        self.client.patch(Node, node, {"spec": {"unschedulable": True}})
        self.say(f"node/{node} cordoned")

    def pods_on(self, node: str) -> list[Obj]:
        return [p.to_dict() for p in self.client.list(Pod, namespace="*", fields={"spec.nodeName": node})]

    def evict_all(self, pods: Sequence[Obj]) -> list[str]:
        """Evict every pod and wait until each is gone; the ``ns/name`` of those the timeout left."""
        started = self.clock()
        due = {_name(p): started for p in pods}
        uids = {_name(p): (p.get("metadata") or {}).get("uid") for p in pods}
        evicted: set[str] = set()
        left = set(due)
        while left:
            now = self.clock()
            if self.timeout and now - started >= self.timeout:
                return sorted(left)
            for name in sorted(left - evicted):
                if due[name] <= now:
                    if self._evict(name):
                        evicted.add(name)
                    else:
                        due[name] = now + RETRY_AFTER
            for name in sorted(evicted & left):
                if self._gone(name, uids[name]):
                    self.say(f"pod/{name.partition('/')[2]} evicted")
                    left.discard(name)
            if left:
                self.sleep(0.5)
        return []

    def _evict(self, name: str) -> bool:
        namespace, _, pod = name.partition("/")
        options = DeleteOptions(gracePeriodSeconds=self.grace_period) if self.grace_period >= 0 else None
        body = Pod.Eviction(metadata=ObjectMeta(name=pod, namespace=namespace), deleteOptions=options)
        try:
            self.client.create(body, pod, namespace=namespace)
        except ApiError as exc:
            code = getattr(exc.status, "code", None)
            if code == 404:
                return True
            if code == 429:
                message = getattr(exc.status, "message", "") or str(exc)
                self.say(f'error when evicting pods/"{pod}" -n "{namespace}" (will retry after 5s): {message}')
                return False
            raise
        self.say(f"evicting pod {name}")
        return True

    def _gone(self, name: str, uid: str | None) -> bool:
        namespace, _, pod = name.partition("/")
        try:
            found = self.client.get(Pod, pod, namespace=namespace)
        except ApiError as exc:
            if getattr(exc.status, "code", None) == 404:
                return True
            raise
        return bool(found.metadata is not None and found.metadata.uid != uid)
