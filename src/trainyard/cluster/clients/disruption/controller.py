"""The disruption controller's I/O shell: watch PodDisruptionBudgets and pods, write each budget's status.

A budget is queued when it changes and when a pod it selects does. A budget counted from its
controllers' scale (a percentage, or ``maxUnavailable``) reads ``/scale`` of each controller
through the client: a custom resource's URL comes from its CRD (read when a kind is first met);
kinds without a scale subresource (a batch Job) leave the budget ``SyncFailed``, as upstream.
The status is written whole with a resourceVersion guard (an eviction that took a disruption
meanwhile wins: the pass runs again on it); events only when the status changed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.policy_v1 import PodDisruptionBudget

from trainyard.api.disruption import selects
from trainyard.api.meta import Obj
from trainyard.client.events import reference
from trainyard.client.resources import plain_resource, to_dict
from trainyard.cluster.clients.disruption import decisions
from trainyard.kit.applier import Applier
from trainyard.kit.informer import Informer, key_of
from trainyard.kit.queue import WorkQueue
from trainyard.kit.worker import work

log = logging.getLogger(__name__)

COMPONENT = "disruption-controller"
PDB = PodDisruptionBudget
CRD = CustomResourceDefinition
Key = tuple[str, str]


class DisruptionController:
    def __init__(
        self,
        client: AsyncClient,
        pods: Informer,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.clock = clock
        self.applier = Applier(client, component=COMPONENT, clock=clock)
        self.queue: WorkQueue[Key] = WorkQueue()
        self.budgets = Informer(client, PDB, self._on_budget)
        self.pods = pods
        pods.handlers.append(self._on_pod)
        # (group, version, kind) → the resource whose /scale is read, None: the kind has none.
        self._scalable: dict[tuple[str, str, str], Any] = {}

    def _on_budget(self, _: str, obj: Obj) -> None:
        self.queue.add(key_of(obj))

    def _on_pod(self, _: str, pod: Obj) -> None:
        namespace = key_of(pod)[0]
        for pdb in self.budgets.items():
            if key_of(pdb)[0] == namespace and selects(pdb, pod):
                self.queue.add(key_of(pdb))

    async def run(self) -> None:
        task = self.budgets.start("disruption informer poddisruptionbudgets")
        try:
            await self.budgets.synced.wait()
            await self.pods.synced.wait()
            await work(self.queue, self.reconcile, name=COMPONENT)
        finally:
            self.queue.close()
            task.cancel()

    async def reconcile(self, key: Key) -> float | None:
        pdb = self.budgets.get(*key)
        if pdb is None:
            return None
        pods = [p for p in self.pods.items() if key_of(p)[0] == key[0] and selects(pdb, p)]
        pods.sort(key=key_of)
        scales = await self._scales(key[0], pods) if decisions.needs_scale(pdb) else {}
        plan = decisions.reconcile(pdb, pods, scales, self.clock())
        if plan.status != (pdb.get("status") or {}):
            pdb = await self.applier.write_status(PDB, pdb, plan.status, self.budgets, whole=True)
            await self.applier.emit(reference(pdb, "policy/v1", "PodDisruptionBudget"), plan.events)
        return plan.requeue_after

    async def _scales(self, namespace: str, pods: list[Obj]) -> dict[str, int | None]:
        """Each controller's uid → its scale's ``spec.replicas`` (None: no scale, or another incarnation)."""
        out: dict[str, int | None] = {}
        for pod in pods:
            ref = decisions.controller_ref(pod)
            if ref is None or str(ref.get("uid")) in out:
                continue
            group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
            res = await self._resource(group, version, str(ref.get("kind") or ""))
            replicas = None
            if res is not None:
                try:
                    scale = to_dict(await self.client.get(res.Scale, ref["name"], namespace=namespace))
                except ApiError as exc:
                    log.debug("no scale of %s %s/%s: %s", ref.get("kind"), namespace, ref.get("name"), exc)
                else:
                    if (scale.get("metadata") or {}).get("uid") in (None, ref.get("uid")):
                        replicas = int((scale.get("spec") or {}).get("replicas") or 0)
            out[str(ref.get("uid"))] = replicas
        return out

    async def _resource(self, group: str, version: str, kind: str) -> Any:
        """The namespaced resource of a custom kind that serves ``/scale`` in ``version``, else None."""
        wanted = (group, version, kind)
        if wanted not in self._scalable:
            self._scalable[wanted] = None
            if group:
                async for item in self.client.list(CRD):
                    crd = to_dict(item)
                    spec = crd.get("spec") or {}
                    if spec.get("group") != group or (spec.get("names") or {}).get("kind") != kind:
                        continue
                    for served in spec.get("versions") or []:
                        if served.get("name") == version and "scale" in (served.get("subresources") or {}):
                            plural = spec["names"]["plural"]
                            self._scalable[wanted] = plain_resource(group, version, kind, plural)
        return self._scalable[wanted]
