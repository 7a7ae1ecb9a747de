"""The node agent's view of the API, kept by watches as a kubelet keeps it.

* ``BoundPods``: the pods bound to this node, listed and watched with the ``spec.nodeName`` field
  selector a kubelet uses, so the agent never decodes the cluster's other pods. The agent acts on
  its changes, GPU admission reads from it which devices the node's other pods hold, and a
  container's thread count how many pods share the node's cores (``active``).
* ``ConfigSources``: the ConfigMaps and Secrets the node's pods read (``env``, ``envFrom``,
  volumes), from one informer per kind, started when a pod first needs that kind (the kubelet's
  watch-based ConfigMap and Secret managers). What the cache does not hold is asked of the API
  server, so a pod created right after its ConfigMap does not fail because the watch has not
  brought the ConfigMap yet; an answer is cached.

Objects are plain dicts (no typed decoding) and shared with the caches: readers must not change them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from lightkube import AsyncClient
from lightkube.core.exceptions import ApiError

from trainyard.api.meta import Obj
from trainyard.client.resources import is_status, plain_resource, to_dict
from trainyard.cluster.clients.node import threads
from trainyard.kit.informer import Informer

POD = plain_resource("", "v1", "Pod", "pods")
CONFIG_MAP = plain_resource("", "v1", "ConfigMap", "configmaps")
SECRET = plain_resource("", "v1", "Secret", "secrets")
EVENT = plain_resource("", "v1", "Event", "events")
SYNC_SECONDS = 5.0  # how long a first read waits for its kind's first list


class BoundPods(Informer):
    """The pods whose ``spec.nodeName`` is ``node``; ``handle`` gets each change, in order."""

    def __init__(self, client: AsyncClient, node: str, handle: Callable[[str, Obj], None]) -> None:
        # The field selector is the kubelet's own.
        super().__init__(client, POD, handle, fields={"spec.nodeName": node}, indexers={threads.ACTIVE: threads.active})
        self.node = node

    def active(self) -> list[Obj]:
        """The node's pods that are not done (``threads.active``): those sharing its cores."""
        return self.by_index(threads.ACTIVE, threads.ACTIVE)


class ConfigSources:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._informers: dict[Any, Informer] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def _informer(self, res: Any) -> Informer:
        informer = self._informers.get(res)
        if informer is None:
            informer = self._informers[res] = Informer(self.client, res)
            self._tasks.append(asyncio.create_task(informer.run(), name=f"node-informer-{res.__name__}"))
        with contextlib.suppress(TimeoutError):
            # A kind that cannot be listed (yet) leaves the cache empty: reads then go to the API.
            await asyncio.wait_for(informer.synced.wait(), SYNC_SECONDS)
        return informer

    async def read(self, res: Any, namespace: str, name: str) -> Obj | None:
        """The ConfigMap or Secret ``res`` named ``name``, None where there is none."""
        informer = await self._informer(res)
        found = informer.get(namespace, name)
        if found is not None:
            return found
        try:
            answer: Any = await self.client.get(res, name, namespace=namespace)
        except ApiError as exc:
            if not is_status(exc, 404):
                raise
            return None
        obj = to_dict(answer)
        informer.mutated(obj)
        return obj

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self._informers.clear()
