"""The embedded API server as one object: store, registry, garbage collector, HTTP listener.

On start it reloads every stored CRD into the registry, installs or upgrades the CRDs of every
job family (``api.families``: generated from the models), the PodGroup and Queue CRDs of the gang
schedulers (``api.podgroupcrds``), JobSet's CRD (``api.jobset``), Kueue's (``api.kueue.crds``),
the system namespaces, the system PriorityClasses, Volcano's ``default`` queue, and the objects
the families' clients expect to find (their ``seeds``: Trainer v2's ``kubeflow-system``
namespace with the ``kubeflow-trainer-public`` ConfigMap and the shipped
ClusterTrainingRuntimes); then listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from trainyard.api import families, jobset, podgroupcrds
from trainyard.api.kueue import crds as kueue_crds
from trainyard.cluster.paths import DEFAULT_PORT, Layout
from trainyard.cluster.server.apiserver import auth, errors
from trainyard.cluster.server.apiserver.builtin import priority
from trainyard.cluster.server.apiserver.loopback import Loopback
from trainyard.cluster.server.apiserver.objects import SYSTEM_NAMESPACES, Objects
from trainyard.cluster.server.apiserver.precedence import Listener
from trainyard.cluster.server.apiserver.registry import Registry
from trainyard.cluster.server.apiserver.server import ApiServer
from trainyard.cluster.server.gc import GarbageCollector
from trainyard.cluster.server.storage.store import Store
from trainyard.cluster.server.storage.watch import Hub

log = logging.getLogger(__name__)

SHUTDOWN_GRACE = 2.0
"""Seconds requests still being served (open watches) get when the API server stops."""


class ApiPlane:
    def __init__(
        self,
        layout: Layout,
        *,
        host: str = "127.0.0.1",
        port: int = DEFAULT_PORT,
        secure: bool = False,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.layout = layout
        self.host = host
        self.port = port
        self.secure = secure
        self.credentials: auth.Credentials | None = None
        self.store = Store(layout.database)
        self.registry = Registry()
        self.hub = Hub()
        self.store.subscribe(self.hub.publish)
        self.objects = Objects(self.store, self.registry, clock=clock)
        self.gc = GarbageCollector(self.objects)
        self.server = ApiServer(self.objects, self.hub, layout, address=lambda: f"{self.host}:{self.port}")
        self._loopback: Loopback | None = None
        self._runner: web.AppRunner | None = None
        self._gc_task: asyncio.Task[None] | None = None
        # GET paths served beside the API by the process that embeds it (the operator's /metrics).
        self.extra_paths: dict[str, Callable[[web.Request], Awaitable[web.StreamResponse]]] = {}
        # Applications served beside the API under a path prefix, each authenticating its own
        # requests (the dashboard: its login and session cookie, as a browser has no bearer token).
        self.mounts: dict[str, web.Application] = {}

    @property
    def url(self) -> str:
        return f"{'https' if self.secure else 'http'}://{self.host}:{self.port}"

    @property
    def loopback(self) -> Loopback:
        """Serves this process's own clients without a socket (``loopback``); there once ``start`` returned."""
        if self._loopback is None:
            raise RuntimeError("the API server has not started")
        return self._loopback

    def bootstrap(self) -> None:
        crd_rt = self.registry.lookup("apiextensions.k8s.io", "v1", "customresourcedefinitions")
        ns_rt = self.registry.lookup("", "v1", "namespaces")
        assert crd_rt is not None and ns_rt is not None
        stored, _ = self.store.list(crd_rt.key)
        for crd in stored:
            self.registry.add_crd(crd)
        for wanted in [*families.crds(), *podgroupcrds.crds(), jobset.crd(), *kueue_crds.crds()]:
            name = wanted["metadata"]["name"]
            try:
                current = self.objects.get(crd_rt, "", name)
            except errors.ApiError:
                self.objects.create(crd_rt, "", wanted)
                continue
            if current.get("spec") != wanted["spec"]:
                self.objects.update(crd_rt, "", name, {**current, "spec": wanted["spec"]})
        for name in SYSTEM_NAMESPACES:
            with contextlib.suppress(errors.ApiError):
                self.objects.create(ns_rt, "", {"metadata": {"name": name}})
        builtins = [("scheduling.k8s.io", "v1", "priorityclasses", c) for c in priority.SYSTEM_CLASSES]
        builtins.append((podgroupcrds.VOLCANO, "v1beta1", "queues", podgroupcrds.default_queue()))
        for group, version, plural, obj in builtins:
            rt = self.registry.lookup(group, version, plural)
            assert rt is not None
            with contextlib.suppress(errors.ApiError):
                created = self.objects.create(rt, "", obj)
                if plural == "queues":  # Volcano's queue controller opens a new queue
                    opened = {**created, "status": {"state": "Open"}}
                    self.objects.update(rt, "", obj["metadata"]["name"], opened, subresource="status")
        self._install_seeds()

    def _install_seeds(self) -> None:
        """What each job family's installer puts beside its CRDs (``api.families``: Trainer v2's
        namespace, public ConfigMap and ClusterTrainingRuntimes): created when absent, else brought
        up to date as the family's ``Seed.refresh`` says."""
        for seed in families.seeds():
            rt = self.registry.lookup(seed.group, seed.version, seed.plural)
            assert rt is not None
            try:
                current = self.objects.get(rt, seed.namespace, seed.name)
            except errors.ApiError:
                self.objects.create(rt, seed.namespace, seed.obj)
                continue
            updated = seed.refresh(current)
            if updated is not None:
                self.objects.update(rt, seed.namespace, seed.name, updated)

    async def start(self) -> None:
        self.bootstrap()
        app = self.server.app(self.mounts)
        if self.secure:
            self.credentials = auth.ensure(self.layout, self.host)
            app.middlewares.append(auth.bearer_middleware(self.credentials.token, own_auth=tuple(self.mounts)))
        if self.extra_paths:
            app.middlewares.append(self._extra_paths_middleware())
        # Watches never finish on their own: on stop they get SHUTDOWN_GRACE seconds, then are cancelled
        # (as kube-apiserver ends watches when it stops), not aiohttp's 60 s, past `yard down`'s patience.
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_GRACE)
        await self._runner.setup()
        site = Listener(
            self._runner,
            self.host,
            self.port,
            self.credentials.server_context() if self.credentials else None,
            self.server.precedence,
        )
        await site.start()
        self.port = site.port
        token = self.credentials.token if self.credentials is not None else None
        self._loopback = Loopback(self.server.handle, self.host, lambda: self.port, token, self.server.precedence)
        self._gc_task = asyncio.create_task(self.gc.run(self.server.precedence.turn))
        log.info("API server listening on %s", self.url)

    def _extra_paths_middleware(self) -> Any:
        @web.middleware
        async def extra(request: web.Request, handler: Any) -> web.StreamResponse:
            serve = self.extra_paths.get(request.path) if request.method == "GET" else None
            return await (serve(request) if serve is not None else handler(request))

        return extra

    async def stop(self) -> None:
        if self._gc_task is not None:
            self._gc_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._gc_task
        if self._loopback is not None:
            await self._loopback.close()
        if self._runner is not None:
            await self._runner.cleanup()
        self.store.close()
