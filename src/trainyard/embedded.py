"""The embedded control plane as one process: API server, scheduler, node agents and operator, wired here.

This is the composition root: the only module that knows them all. The scheduler, the node
agents (one per node: ``node.pool``) and the operator reach the API server through the same
client they would use on a real cluster; its requests are served in-process
(``cluster.apiserver.loopback``: no socket, the same server handler), its watches over HTTP.
The operator runs in ``host`` network mode because every replica shares this machine.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import signal
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from aiohttp import web
from lightkube import AsyncClient, KubeConfig

from trainyard import gctuning
from trainyard.api import families
from trainyard.api.podgroup import SCHEDULER_PLUGINS_SCHEDULER
from trainyard.client.resources import plain_resource
from trainyard.client.transport import Client, route_directly, wrap_transports
from trainyard.cluster.clients.autoscaler import settings as hpa_settings
from trainyard.cluster.clients.autoscaler.controller import HorizontalController
from trainyard.cluster.clients.dns.server import ClusterDns, address_for, host_nameservers
from trainyard.cluster.clients.jobs.controller import JobController
from trainyard.cluster.clients.jobs.decisions import Backoff
from trainyard.cluster.clients.jobsets.controller import JobSetController
from trainyard.cluster.clients.kueue.controller import KueueController
from trainyard.cluster.clients.metrics.custom import CustomMetrics, ExternalMetrics
from trainyard.cluster.clients.metrics.resource import ResourceMetrics
from trainyard.cluster.clients.node import backoff, containerlogs, podexec
from trainyard.cluster.clients.node.agent import NodeAgent
from trainyard.cluster.clients.node.capacity import Capacity
from trainyard.cluster.clients.node.dnsconfig import NodeDns
from trainyard.cluster.clients.node.nodespec import NodeSpec
from trainyard.cluster.clients.node.persistentvolumes import Storage
from trainyard.cluster.clients.node.pool import NodePool
from trainyard.cluster.clients.node.registration import DEFAULT_LEASE_SECONDS
from trainyard.cluster.clients.node.resourcestats import resolution_from_env
from trainyard.cluster.clients.node.runtime import mountns
from trainyard.cluster.clients.nodelifecycle.manager import NodeControllers
from trainyard.cluster.clients.scheduler.loop import Scheduler
from trainyard.cluster.paths import DEFAULT_PORT, Layout
from trainyard.cluster.server.apiserver.auth import Credentials, write_private
from trainyard.cluster.server.plane import ApiPlane
from trainyard.dashboard.app import Dashboard
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.login import PREFIX, Logins
from trainyard.frameworks.registry import kinds
from trainyard.frameworks.trainer.status import StatusServer
from trainyard.kit.informer import Informer
from trainyard.operator.manager import Operator
from trainyard.operator.metrics import CONTENT_TYPE, OperatorMetrics
from trainyard.operator.restclient import UNLIMITED, api_client
from trainyard.operator.serving import Endpoint
from trainyard.operator.settings import (
    DEFAULT_HOST_PORTS,
    HOST_PORTS_ENV,
    OperatorSettings,
    parse_host_ports,
    with_pending_timeout,
)
from trainyard.operator.statusserver import serve_status

log = logging.getLogger(__name__)

CONTEXT = "trainyard"


def kubeconfig(server: str, credentials: Credentials | None = None) -> dict[str, object]:
    cluster: dict[str, str] = {"server": server}
    user: dict[str, str] = {}
    if credentials is not None:
        cluster["certificate-authority-data"] = base64.b64encode(credentials.ca_pem).decode()
        user["token"] = credentials.token
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT, "cluster": cluster}],
        "users": [{"name": CONTEXT, "user": user}],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": CONTEXT, "namespace": "default"}}],
        "current-context": CONTEXT,
        "preferences": {},
    }


@dataclass(frozen=True)
class PlaneOptions:
    home: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workspace: Path | None = None
    secure: bool = True
    # The local node: its name (default: this host's), declared capacity (None: detected) and taints.
    node_name: str | None = None
    capacity: Capacity | None = None
    taints: list[dict[str, Any]] = field(default_factory=list)
    # Several nodes (`yard up --nodes N` or a nodes file); empty: the one local node above.
    nodes: tuple[NodeSpec, ...] = ()
    node_lease_seconds: int = DEFAULT_LEASE_SECONDS
    # False: no in-process operator (`yard up --no-operator`); one runs as its own process instead.
    operator: bool = True
    # The operator's --gang-scheduler-name: the plane's scheduler serves both kinds of PodGroup, so
    # gangs are on by default; "volcano" selects Volcano's, "" turns gang scheduling off.
    gang_scheduler_name: str = SCHEDULER_PLUGINS_SCHEDULER
    # Seconds a pod may stay Pending before its job gets a Pending condition; 0: never; None: default.
    pending_timeout: float | None = None
    # The cluster DNS's address (port 53): "auto" derives one from the API port (dns.server.address_for), "none": off.
    cluster_dns: str = "auto"


class EmbeddedPlane:
    def __init__(self, options: PlaneOptions) -> None:
        self.options = options
        self.layout = Layout(options.home)
        self.api = ApiPlane(self.layout, host=options.host, port=options.port, secure=options.secure)
        self.metrics = OperatorMetrics()
        self.operator: Operator | None = None
        # The in-process operator's metrics (and the embedded Kueue's) are served beside the API: `<server>/metrics`.
        self.api.extra_paths["/metrics"] = self._metrics
        # The dashboard, at `<server>/dashboard/`: mounted now, as the API's application is made when it
        # starts listening; it gets its client once the plane has one.
        self.layout.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.logins = Logins(owner_token=None, secure=options.secure)
        self.dashboard = Dashboard(HistoryStore(self.layout.history), self.logins)
        self.api.mounts[PREFIX] = self.dashboard.application()
        self._tasks: list[asyncio.Task[None]] = []
        self.nodes: NodePool | None = None
        self.exec_server: podexec.ExecServer | None = None
        self.scheduler: Scheduler | None = None
        self.jobs: JobController | None = None
        self.jobsets: JobSetController | None = None
        self.kueue: KueueController | None = None
        self.autoscaler: HorizontalController | None = None
        self._client: AsyncClient | None = None
        self.dns: ClusterDns | None = None
        self._node_dns: NodeDns | None = None
        self._operator_client: AsyncClient | None = None
        self._dashboard_client: AsyncClient | None = None
        self.status_server: Endpoint | None = None

    async def start(self) -> None:
        self.layout.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        await self.api.start()
        # the operator and node agent use exactly what kubectl gets: same CA, same token
        config = kubeconfig(self.api.url, self.api.credentials)
        write_private(self.layout.kubeconfig, yaml.safe_dump(config, sort_keys=False).encode())
        self._client = Client(KubeConfig.from_dict(config), field_manager="trainyard")
        # Their requests and watches are served in-process: same client, same server handler, no
        # socket; their requests without httpx too (lists and watches still go through it).
        wrap_transports(self._client, self.api.loopback.transport, watches=True)
        route_directly(self._client, self.api.loopback.call)
        self.logins.owner_token = self.api.credentials.token if self.api.credentials is not None else None
        # its own client, so what it writes (a suspend, a scale) is its field manager's
        dashboard_client = Client(KubeConfig.from_dict(config), field_manager="trainyard-dashboard")
        wrap_transports(dashboard_client, self.api.loopback.transport, watches=True)
        route_directly(dashboard_client, self.api.loopback.call)
        self._dashboard_client = dashboard_client
        specs = self.options.nodes or (
            NodeSpec(self.options.node_name or "", self.options.capacity, {}, tuple(self.options.taints)),
        )

        def connect() -> Client:
            # Each node its own client (and link, cut when its machine stops), served in-process too.
            node_client = Client(KubeConfig.from_dict(config), field_manager="trainyard")
            wrap_transports(node_client, self.api.loopback.transport, watches=True)
            route_directly(node_client, self.api.loopback.call)
            return node_client

        # One informer on every pod for the scheduler, the Job controller and the DNS, as kube-controller-manager's
        # controllers share its informer factory's: one watch, one decode per change, one copy of each pod.
        pods = Informer(self._client, plain_resource("", "v1", "Pod", "pods"))
        # ... and the dashboard's (its informers, its history).
        self.dashboard.attach(dashboard_client, pods=pods)
        services = Informer(self._client, plain_resource("", "v1", "Service", "services"))
        self.dns, self._node_dns = await self._cluster_dns(services, pods)
        self.nodes = NodePool(specs, client=self._client, connect=connect, make_agent=self._agent)
        self.nodes.boot()
        # The nodes' exec socket: commands run in their running pods (mpirun's launch agent reaches other pods).
        self.exec_server = podexec.ExecServer(self.layout, self.nodes.exec_target)
        await self.exec_server.start()
        first = self.nodes.first
        self.scheduler = Scheduler(self._client, pods=pods)
        # kube-controller-manager's Job controller; its pod-failure back-off keeps the kubelet's base
        # (both 10 s upstream), so `yard up --restart-backoff` shortens both.
        base = backoff.from_env().base
        self.jobs = JobController(self._client, backoff=Backoff(base=base, cap=base * 60), pods=pods)
        # JobSet's controller manager (jobset.x-k8s.io), which Kubeflow Trainer v2 builds on.
        self.jobsets = JobSetController(self._client)
        # Kueue's controller manager (kueue.x-k8s.io): queues the jobs that name a LocalQueue.
        self.kueue = KueueController(self._client)
        # kube-controller-manager's node lifecycle, taint eviction, PodGC and disruption controllers.
        self.node_controllers = NodeControllers(self._client, pods)
        # metrics-server and a metrics adapter, served through the API server as its APIServices
        # (the nodes' own measurements; the jobs' reported metrics; Kueue's queue depth), and
        # kube-controller-manager's horizontal pod autoscaler, which reads them over the API.
        nodes = self.nodes
        server = self.api.server
        server.aggregated["metrics.k8s.io"] = ResourceMetrics(
            lambda: [a.stats.summary() for a in nodes.agents() if a.stats.at is not None], pods, nodes.nodes
        )
        reporting = [f"{c['spec']['names']['plural']}.{c['spec']['group']}" for c in families.crds()]
        server.aggregated["custom.metrics.k8s.io"] = CustomMetrics(self._client, self.api.objects.clock, reporting)
        server.aggregated["external.metrics.k8s.io"] = ExternalMetrics(self.kueue.workloads, self.api.objects.clock)
        hpa = hpa_settings.from_env()
        self.autoscaler = HorizontalController(
            self._client, sync_period=hpa.sync_period, downscale_window=hpa.downscale_stabilization
        )
        self._tasks = [
            asyncio.create_task(pods.run(), name="pod informer"),
            *([asyncio.create_task(services.run(), name="service informer")] if self.dns else []),
            asyncio.create_task(self.nodes.run(), name="nodes"),
            asyncio.create_task(self.scheduler.run(), name="scheduler"),
            asyncio.create_task(self.jobs.run(), name="jobs"),
            asyncio.create_task(self.jobsets.run(), name="jobsets"),
            asyncio.create_task(self.kueue.run(), name="kueue"),
            asyncio.create_task(self.node_controllers.run(), name="node controllers"),
            asyncio.create_task(self.autoscaler.run(), name="horizontal pod autoscaler"),
            asyncio.create_task(self.dashboard.run(), name="dashboard"),
            # kube-controller-manager's volume controllers and the local-path provisioner's (its
            # volumes on the first node): the plane's, whichever node is up.
            asyncio.create_task(
                Storage(self._client, self.layout.storage, first.node_name, first.now).run(), name="volumes"
            ),
        ]
        if self.options.operator:
            # The operator gets a client of its own, metered as client-go meters upstream's, so
            # `<server>/metrics` counts its requests alone (rest_client_requests_total). It is not rate
            # limited (upstream's --kube-api-qps 20 protects a shared kube-apiserver): here it is the
            # only controller client of a server in this process, and a sweep of 1,000 jobs must not
            # be throttled to 20 requests a second.
            self._operator_client = api_client(
                KubeConfig.from_dict(config),
                self.metrics,
                UNLIMITED,
                field_manager="trainyard",
                route=self.api.loopback.transport,
                direct=self.api.loopback.call,
            )
            settings = OperatorSettings.host(self.options.host, self.options.gang_scheduler_name)
            settings = with_pending_timeout(settings, self.options.pending_timeout)
            # As `yard operator --host-ports`, from the environment: each plane on a host may need its own range.
            host_ports = parse_host_ports(os.environ.get(HOST_PORTS_ENV) or DEFAULT_HOST_PORTS)
            settings = replace(settings, host_ports=host_ports)
            # Katib Trials' metrics outlive a restart of the plane, as Katib's database does.
            settings = replace(settings, observations=str(self.layout.observations))
            if self.api.credentials is not None:
                # Kubeflow Trainer's TrainJob status server, on by default: the local node's pods reach
                # it on the plane's address, over TLS with the plane's certificate and CA.
                credentials = self.api.credentials
                address = (self.options.host, 0)
                self.status_server = await serve_status(self._operator_client, address, credentials.server_context())
                url = f"https://{self.options.host}:{self.status_server.port}"
                settings = replace(settings, trainer_status=StatusServer(url, credentials.ca_pem.decode()))
            self.operator = Operator(self._operator_client, settings, metrics=self.metrics)
            self._tasks.append(asyncio.create_task(self.operator.run(), name="operator"))
        self.layout.state_file.write_text(
            json.dumps(
                {
                    "pid": os.getpid(),
                    "url": self.api.url,
                    "secure": self.options.secure,
                    "home": str(self.layout.home),
                    "workspace": str(first.workspace),
                    "node": first.node_name,
                    "capacity": first.capacity.resources(),
                    "declared": sorted(first.capacity.declared),
                    "nodes": [
                        {
                            "name": a.node_name,
                            "capacity": a.capacity.resources(),
                            "declared": sorted(a.capacity.declared),
                        }
                        for a in self.nodes.agents()
                    ],
                    "network": "host",
                    "clusterDNS": self.dns.address if self.dns is not None else None,
                    "operator": self.options.operator,
                    "gangScheduler": self.options.gang_scheduler_name,
                    "kinds": list(kinds()),
                }
            )
        )

    async def _cluster_dns(self, services: Informer, pods: Informer) -> tuple[ClusterDns | None, NodeDns | None]:
        """The cluster's DNS server, started, and what the nodes write into pods' resolv.conf and hosts.

        Pods keep the machine's files where no process may have a mount namespace of its own (the
        files are mounted over /etc's there); Service names resolve only while the server runs.
        """
        if not await asyncio.to_thread(mountns.usable):
            log.warning("pods keep this machine's /etc/resolv.conf and /etc/hosts: no mount namespace can be made")
            return None, None
        host = NodeDns(host_resolv=_read("/etc/resolv.conf"), host_hosts=_read("/etc/hosts"))
        wanted = self.options.cluster_dns
        if wanted == "none":
            return None, host
        address = address_for(self.options.port) if wanted == "auto" else wanted
        server = ClusterDns(address, services, pods, upstream=host_nameservers(host.host_resolv))
        try:
            await server.start()
        except OSError as exc:
            log.warning(
                "no cluster DNS: cannot listen on %s:53 (%s); pods resolve names with this machine's resolv.conf, "
                "so Service names do not resolve in them: run `yard up` as root, or give its python "
                "CAP_NET_BIND_SERVICE (setcap cap_net_bind_service=+ep PYTHON), or choose --cluster-dns ADDRESS",
                address,
                exc.strerror or exc,
            )
            return None, host
        return server, replace(host, cluster_dns=(address,))

    def _volumes(self, first: NodeAgent) -> Storage:
        assert self._client is not None
        return Storage(self._client, self.layout.storage, first.node_name, first.now)

    def _agent(self, spec: NodeSpec, client: AsyncClient) -> NodeAgent:
        return NodeAgent(
            client,
            self.layout,
            workspace=self.options.workspace,
            address=self.options.host,
            restart_backoff=backoff.from_env().base,
            node_name=spec.name or None,
            capacity=spec.capacity,
            taints=list(spec.taints),
            rotation=containerlogs.from_env(),
            labels=spec.labels,
            control_plane=spec.control_plane,
            lease_seconds=self.options.node_lease_seconds,
            metric_resolution=resolution_from_env(),
            dns=self._node_dns,
        )

    async def _metrics(self, _: web.Request) -> web.Response:
        body = self.metrics.exposition() if self.options.operator else b""
        if self.kueue is not None:
            body += self.kueue.metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.scheduler is not None:
            await self.scheduler.shutdown()
        if self.nodes is not None:
            await self.nodes.shutdown(grace=5.0)
        if self.exec_server is not None:
            await self.exec_server.close()
        if self.dns is not None:
            await self.dns.close()
        if self.status_server is not None:
            await self.status_server.close()
        for client in (self._operator_client, self._dashboard_client, self._client):
            if client is not None:
                await client.close()
        await self.api.stop()
        self.dashboard.store.close()
        with contextlib.suppress(FileNotFoundError):
            self.layout.state_file.unlink()

    async def serve_forever(self) -> None:
        """Run until SIGTERM or SIGINT, then stop everything, training processes included."""
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await self.start()
        gctuning.settle()
        log.info("trainyard control plane ready at %s (home %s)", self.api.url, self.layout.home)
        try:
            await stop.wait()
        finally:
            log.info("stopping the control plane")
            await self.stop()


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""
