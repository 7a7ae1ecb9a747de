"""The operator as its own process: ``python -m trainyard.operator`` (also ``yard operator``).

It takes upstream's flags (reference §4.2) so that a Deployment written for the Kubeflow Training
Operator can run it: where to find the cluster, what to watch, how many workers, leader election
through a Lease, where to serve metrics and probes, and the client-side rate limit of its API client
(``--kube-api-qps``/``--kube-api-burst``, upstream's 20/30). trainyard's own additions are the
network mode (``host`` for a single-machine plane) and the leader election timings.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from lightkube import AsyncClient, KubeConfig
from lightkube.config.kubeconfig import DEFAULT_KUBECONFIG, SERVICE_ACCOUNT

from trainyard import gctuning
from trainyard.api.families import job_kinds
from trainyard.api.kinds import KINDS, UPSTREAM_FRAMEWORKS
from trainyard.controller import ControllerSettings
from trainyard.frameworks.registry import operator_flags
from trainyard.frameworks.trainer import status
from trainyard.operator.flags import ElectionOptions, LogLevel, OperatorOptions, run_with
from trainyard.operator.leader import LeaderElectionConfig, LeaderElector
from trainyard.operator.manager import Operator
from trainyard.operator.metrics import OperatorMetrics
from trainyard.operator.restclient import DEFAULT_RATE_LIMIT, RateLimit, api_client, rate_limit_from
from trainyard.operator.serving import Endpoint, metrics_app, parse_bind_address, probes_app, serve
from trainyard.operator.settings import OperatorSettings, parse_host_ports, with_pending_timeout
from trainyard.operator.statusserver import serve_status
from trainyard.operator.webhook import WebhookServer, WebhookSettings, has_certificates, start_webhook, tls_context

log = logging.getLogger("trainyard.operator")

# Upstream's schemes (``--enable-scheme``); those without a trainyard plugin yet are refused by name.
UPSTREAM_SCHEMES = frozenset(kind.lower() for kind in UPSTREAM_FRAMEWORKS)
_LOG_LEVELS: dict[LogLevel, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "error": logging.ERROR,
    "warn": logging.WARNING,
}


def settings_from(options: OperatorOptions) -> OperatorSettings:
    known = {k.lower(): k for k in job_kinds()}
    enabled: list[str] = []
    for scheme in options.enable_scheme:
        name = scheme.strip().lower()
        if name not in known:
            detail = "not implemented by trainyard yet" if name in UPSTREAM_SCHEMES else "unknown"
            raise ValueError(f"--enable-scheme {scheme}: {detail}; supported: {', '.join(sorted(known))}")
        enabled.append(known[name])
    if options.controller_threads < 1:
        raise ValueError("--controller-threads must be at least 1")
    try:
        host_ports = parse_host_ports(options.host_ports)
    except ValueError as exc:
        raise ValueError(f"--host-ports {exc}") from None
    plugin_settings: dict[str, Any] = {}
    for plugin in operator_flags():
        plugin_settings.update(plugin.controller_settings(options.plugin_flags))
    controller = ControllerSettings(
        network_mode=options.network_mode,
        node_address=options.node_address,
        gang_scheduler_name=options.gang_scheduler_name,
        # upstream's operator reads this from its environment, not a flag; kept so for its manifests
        cluster_domain=os.environ.get("CUSTOM_CLUSTER_DOMAIN", ""),
        **plugin_settings,
    )
    settings = OperatorSettings(
        controller=controller,
        namespace=options.namespace or "*",
        workers=options.controller_threads,
        kinds=tuple(dict.fromkeys(enabled)),
        host_ports=host_ports,
        observations=options.observations or None,
    )
    return with_pending_timeout(settings, options.pending_timeout)


def election_from(options: ElectionOptions) -> LeaderElectionConfig | None:
    if not options.leader_elect:
        return None
    namespace = options.leader_election_namespace
    if namespace is None:
        in_cluster = Path(SERVICE_ACCOUNT) / "namespace"
        namespace = in_cluster.read_text().strip() if in_cluster.exists() else "default"
    return LeaderElectionConfig(
        namespace=namespace,
        name=options.leader_election_id,
        identity=options.leader_election_identity or f"{socket.gethostname()}_{uuid.uuid4()}",
        lease_duration=options.leader_elect_lease_duration,
        renew_deadline=options.leader_elect_renew_deadline,
        retry_period=options.leader_elect_retry_period,
    )


def load_kubeconfig(path: str | None) -> KubeConfig:
    """controller-runtime's order: the flag, ``$KUBECONFIG``, in-cluster, ``~/.kube/config``."""
    if path:
        return KubeConfig.from_file(path)
    if os.environ.get("KUBECONFIG"):
        return KubeConfig.from_file(os.environ["KUBECONFIG"])
    if (Path(SERVICE_ACCOUNT) / "token").exists():
        return KubeConfig.from_service_account()
    return KubeConfig.from_file(DEFAULT_KUBECONFIG)


class OperatorProcess:
    """Endpoints, then (with leader election, once leading) the controllers, until a signal."""

    def __init__(
        self,
        config: KubeConfig,
        settings: OperatorSettings,
        election: LeaderElectionConfig | None,
        *,
        metrics_address: tuple[str, int] | None,
        probes_address: tuple[str, int] | None,
        webhook: WebhookSettings | None = None,
        status_server: tuple[int, str] = (0, ""),
        rate_limit: RateLimit = DEFAULT_RATE_LIMIT,
    ) -> None:
        self.rate_limit = rate_limit
        """``--kube-api-qps``/``--kube-api-burst``: one token bucket for every request of this process."""
        self.status_server = status_server
        """(port, URL) of the TrainJob status server; port 0: not served."""
        self.config = config
        self.settings = settings
        self.election = election
        self.metrics_address = metrics_address
        self.probes_address = probes_address
        self.webhook = webhook
        self.metrics = OperatorMetrics()
        self.ready = False
        self.endpoints: list[Endpoint] = []

    async def run(self, stop: asyncio.Event) -> None:
        client = api_client(self.config, self.metrics, self.rate_limit, field_manager="trainyard-operator")
        try:
            if self.metrics_address is not None:
                self.endpoints.append(await serve(metrics_app(self.metrics), self.metrics_address, "metrics"))
            if self.probes_address is not None:
                app = probes_app(lambda: self.ready)
                self.endpoints.append(await serve(app, self.probes_address, "health probes"))
            webhook: WebhookServer | None = None
            if self.webhook is not None and has_certificates(self.webhook):
                # Every replica serves the webhook, leader or not, as upstream's do.
                webhook = await start_webhook(self.webhook)
            elif self.webhook is not None:
                log.info("validating webhook not served: no tls.crt/tls.key in %s", self.webhook.cert_dir)
            await self._serve_status(client)
            stopping = asyncio.create_task(stop.wait())
            try:
                if self.election is None:
                    await self._until(self._operator(client).run(), stopping)
                else:
                    await self._elected(client, self.election, stopping)
            finally:
                stopping.cancel()
                if webhook is not None:
                    await webhook.stop()
        finally:
            for endpoint in self.endpoints:
                await endpoint.close()
            await client.close()

    async def _serve_status(self, client: AsyncClient) -> None:
        """Every replica serves it, as the webhook; TrainJobs get its env only while it is served."""
        port, url = self.status_server
        if not port:
            return
        if (
            self.webhook is None
            or not has_certificates(self.webhook)
            or not (self.webhook.cert_dir / "ca.crt").is_file()
        ):
            where = self.webhook.cert_dir if self.webhook is not None else "--webhook-cert-dir"
            log.info("TrainJob status server not served: no tls.crt, tls.key and ca.crt in %s", where)
            return
        context = tls_context(self.webhook)
        self.endpoints.append(await serve_status(client, ("0.0.0.0", port), context))
        ca = (self.webhook.cert_dir / "ca.crt").read_text()
        if not url:
            in_cluster = Path(SERVICE_ACCOUNT) / "namespace"
            namespace = in_cluster.read_text().strip() if in_cluster.exists() else "kubeflow"
            url = f"https://training-operator.{namespace}.svc:{port}"
        self.settings = replace(self.settings, trainer_status=status.StatusServer(url, ca))

    def _operator(self, client: AsyncClient, elector: LeaderElector | None = None) -> Operator:
        self.ready = True
        return Operator(
            client,
            self.settings,
            metrics=self.metrics,
            may_write=elector.is_leading if elector is not None else lambda: True,
        )

    async def _elected(self, client: AsyncClient, cfg: LeaderElectionConfig, stopping: asyncio.Task[bool]) -> None:
        elector = LeaderElector(client, cfg, metrics=self.metrics)
        # A standby is healthy and ready; it only does not reconcile.
        self.ready = True
        try:
            while not stopping.done():
                if not await self._until(elector.acquire(), stopping):
                    return
                operator = self._operator(client, elector)
                holding = asyncio.create_task(elector.hold())
                try:
                    await self._until(operator.run(), stopping, holding)
                finally:
                    holding.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await holding
                # Lost the lease: the controllers are gone; campaign again with fresh state.
                if not stopping.done():
                    log.warning("stopped reconciling: this replica no longer leads")
        finally:
            if cfg.release_on_cancel:
                await elector.release()

    @staticmethod
    async def _until(work: Coroutine[Any, Any, None], *stops: asyncio.Task[Any]) -> bool:
        """Run ``work`` until it ends or any of ``stops`` does; True when ``work`` ended first."""
        task = asyncio.ensure_future(work)
        done, _ = await asyncio.wait({task, *stops}, return_when=asyncio.FIRST_COMPLETED)
        if task in done:
            task.result()
            return True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return False


def main(argv: Sequence[str] | None = None) -> None:
    """Run the operator with ``argv``'s flags (default: this process's); exits with its exit code."""
    run_with(operate, argv)


def operate(options: OperatorOptions) -> int:
    logging.basicConfig(
        level=_LOG_LEVELS[options.zap_log_level], format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    for noisy in ("httpx", "httpx2", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        settings = settings_from(options)
        election = election_from(options.election)
        metrics_address = parse_bind_address(options.metrics_bind_address)
        probes_address = parse_bind_address(options.health_probe_bind_address)
        rate_limit = rate_limit_from(options.kube_api_qps, options.kube_api_burst)
        config = load_kubeconfig(options.kubeconfig)
    except Exception as exc:  # flags or kubeconfig: say which, exit as a usage error
        print(f"error: {exc}", file=sys.stderr)
        return 2
    process = OperatorProcess(
        config,
        settings,
        election,
        metrics_address=metrics_address,
        probes_address=probes_address,
        # the webhook serves the v1 kinds only (the others' admission is the API server's)
        webhook=replace(options.webhook, kinds=tuple(k for k in settings.kinds if k in KINDS))
        if settings.kinds
        else options.webhook,
        status_server=(options.status_server_port, options.status_server_url),
        rate_limit=rate_limit,
    )

    async def run() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        gctuning.settle()
        await process.run(stop)

    try:
        asyncio.run(run())
    except OSError as exc:
        log.error("cannot serve the operator's endpoints: %s", exc)
        return 1
    except RuntimeError as exc:  # a cluster the operator cannot run against (e.g. a missing CRD)
        log.error("%s", exc)
        return 1
    return 0
