"""The operator's validating admission webhook, for real clusters (kubeflow-v1 reference §2).

The embedded plane runs the job rules itself at admission; a real kube-apiserver calls this
endpoint instead, with an ``admission.k8s.io/v1`` ``AdmissionReview`` over HTTPS, on the paths
upstream registers (``/validate-kubeflow-org-v1-pytorchjob``, one per served kind). The rules are
``trainyard.api.validation``'s, so both paths answer the same 422 ``Status`` with field paths and
the same warnings.

TLS material is read from ``--webhook-cert-dir`` (``tls.crt`` and ``tls.key``, the names of a
``kubernetes.io/tls`` Secret mounted as a volume, as controller-runtime expects) and re-read when
the files change, so a rotated Secret is served without a restart.

Entry points: ``start_webhook(settings)`` for the operator process (``webhook_flags`` gives it
upstream's flags, as typer parameters), ``python -m trainyard.operator.webhook`` to run the
endpoint on its own, and ``webhook_configuration`` for the matching
``ValidatingWebhookConfiguration`` manifest.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import signal
import socket
import ssl
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from aiohttp import web

from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import KINDS
from trainyard.api.validation import invalid_status, review_job
from trainyard.operator.commandline import composed, parameters, run

log = logging.getLogger(__name__)

DEFAULT_PORT = 9443
DEFAULT_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
CONFIGURATION_NAME = "validator.training-operator.kubeflow.org"


def path_for(info: KindInfo) -> str:
    """Upstream's path: ``/validate-<group with dashes>-<version>-<lower-case kind>``."""
    return f"/validate-{info.group.replace('.', '-')}-{info.version}-{info.kind.lower()}"


@dataclass(frozen=True)
class WebhookSettings:
    port: int = DEFAULT_PORT
    cert_dir: Path = DEFAULT_CERT_DIR
    host: str = "0.0.0.0"
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    reload_seconds: float = 10.0
    """How often the certificate files are checked for a rotation."""
    kinds: tuple[str, ...] = field(default_factory=lambda: tuple(KINDS))

    @property
    def cert_file(self) -> Path:
        return self.cert_dir / self.cert_name

    @property
    def key_file(self) -> Path:
        return self.cert_dir / self.key_name


# -- the review itself (pure) --------------------------------------------------------------------


def _failure(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code}


def review(body: Any, info: KindInfo) -> dict[str, Any]:
    """The ``AdmissionReview`` answering ``body`` for jobs of ``info``'s kind.

    A request that cannot be read is denied with a 400 in the review (never an HTTP error), so
    the API server shows the reason; CREATE and UPDATE run the job rules; anything else is allowed.
    """
    api_version = body.get("apiVersion") if isinstance(body, dict) else None
    request = body.get("request") if isinstance(body, dict) else None
    answer_version = api_version if api_version in REVIEW_VERSIONS else REVIEW_VERSIONS[0]

    def answer(response: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": answer_version, "kind": "AdmissionReview", "response": response}

    if api_version not in REVIEW_VERSIONS or not isinstance(request, dict):
        why = f"expected an AdmissionReview of {' or '.join(REVIEW_VERSIONS)} with a request"
        return answer({"uid": "", "allowed": False, "status": _failure(400, "BadRequest", why)})
    uid = request.get("uid") or ""
    operation = request.get("operation")
    if operation not in ("CREATE", "UPDATE"):
        return answer({"uid": uid, "allowed": True})
    obj, old = request.get("object"), request.get("oldObject")
    if not isinstance(obj, dict) or (operation == "UPDATE" and not isinstance(old, dict)):
        needs = "the object and the old object" if operation == "UPDATE" else "the object"
        why = f"{operation} of a {info.kind} needs {needs}"
        return answer({"uid": uid, "allowed": False, "status": _failure(400, "BadRequest", why)})
    verdict = review_job(obj, info, old if operation == "UPDATE" else None)
    response: dict[str, Any] = {"uid": uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        name = (obj.get("metadata") or {}).get("name") or request.get("name") or ""
        status = invalid_status(info, name, verdict.errors)
        response["status"] = {k: v for k, v in status.items() if k not in ("apiVersion", "kind")}
    if verdict.warnings:
        response["warnings"] = verdict.warnings
    return answer(response)


# -- serving ---------------------------------------------------------------------------------------


def make_app(settings: WebhookSettings) -> web.Application:
    app = web.Application(client_max_size=8 * 1024 * 1024)
    for kind in settings.kinds:
        info = KINDS[kind]

        async def handle(request: web.Request, info: KindInfo = info) -> web.Response:
            try:
                body = json.loads(await request.read())
            except ValueError:
                body = None
            return web.json_response(review(body, info))

        app.router.add_post(path_for(info), handle)
    return app


class CertificateMissing(Exception):
    """The TLS files are not there: the message says which and how to provide them."""


def has_certificates(settings: WebhookSettings) -> bool:
    """Whether the TLS files are there: an operator without them (a test, a laptop) runs without the webhook."""
    return settings.cert_file.is_file() and settings.key_file.is_file()


def tls_context(settings: WebhookSettings) -> ssl.SSLContext:
    missing = [str(p) for p in (settings.cert_file, settings.key_file) if not p.is_file()]
    if missing:
        raise CertificateMissing(
            f"webhook TLS material not found: {', '.join(missing)}; mount the webhook's kubernetes.io/tls "
            "Secret there or point --webhook-cert-dir at a directory holding tls.crt and tls.key"
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(settings.cert_file, settings.key_file)
    return context


def _stamp(settings: WebhookSettings) -> tuple[int, int]:
    try:
        return settings.cert_file.stat().st_mtime_ns, settings.key_file.stat().st_mtime_ns
    except OSError:
        return (0, 0)


@dataclass
class WebhookServer:
    """A running webhook endpoint; ``stop()`` ends it."""

    settings: WebhookSettings
    runner: web.AppRunner
    context: ssl.SSLContext
    port: int
    _reloader: asyncio.Task[None] | None = None

    async def _watch_certificates(self) -> None:
        stamp = _stamp(self.settings)
        while True:
            await asyncio.sleep(self.settings.reload_seconds)
            now = _stamp(self.settings)
            if now == stamp or now == (0, 0):
                continue
            try:
                # New handshakes use the new pair; connections already open keep theirs.
                self.context.load_cert_chain(self.settings.cert_file, self.settings.key_file)
            except (OSError, ssl.SSLError) as exc:
                # A rotation may be caught half-written (certificate before key); try again next time.
                log.warning("webhook certificate not reloaded yet: %s", exc)
                continue
            stamp = now
            log.info("webhook certificate reloaded from %s", self.settings.cert_dir)

    async def stop(self) -> None:
        if self._reloader is not None:
            self._reloader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reloader
        await self.runner.cleanup()


async def start_webhook(settings: WebhookSettings) -> WebhookServer:
    """Serve the webhook over HTTPS; raises ``CertificateMissing`` when the TLS files are absent."""
    context = tls_context(settings)
    runner = web.AppRunner(make_app(settings), access_log=None)
    await runner.setup()
    # Bound here rather than by aiohttp so that port 0 (tests, side-by-side runs) reports the real one.
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((settings.host, settings.port))
    except OSError:
        sock.close()
        await runner.cleanup()
        raise
    site = web.SockSite(runner, sock, ssl_context=context)
    await site.start()
    server = WebhookServer(settings, runner, context, sock.getsockname()[1])
    server._reloader = asyncio.create_task(server._watch_certificates())
    log.info("webhook serving %s on https://%s:%d", ", ".join(settings.kinds), settings.host, server.port)
    return server


# -- flags and manifests ---------------------------------------------------------------------------


def webhook_flags(
    webhook_server_port: Annotated[
        int, typer.Option(help="HTTPS port of the webhook", show_default=False)
    ] = DEFAULT_PORT,
    webhook_cert_dir: Annotated[
        Path,
        typer.Option(
            help="directory holding tls.crt and tls.key (a mounted kubernetes.io/tls Secret)", show_default=False
        ),
    ] = DEFAULT_CERT_DIR,
    webhook_bind_address: Annotated[
        str, typer.Option(help="address the webhook listens on", show_default=False)
    ] = "0.0.0.0",
    webhook_cert_reload_seconds: Annotated[
        float, typer.Option(help="how often the certificate files are checked for rotation", show_default=False)
    ] = 10.0,
) -> WebhookSettings:
    """Upstream's webhook flags (reference §4.2) as typer parameters, and the settings (of every kind) they give.

    The standalone command is this function; the operator's command line takes its parameters too.
    """
    return WebhookSettings(
        port=webhook_server_port,
        cert_dir=webhook_cert_dir,
        host=webhook_bind_address,
        reload_seconds=webhook_cert_reload_seconds,
    )


def webhook_configuration(
    *,
    service_name: str = "training-operator",
    namespace: str = "kubeflow",
    ca_bundle: str = "",
    port: int = 443,
    kinds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """The ``ValidatingWebhookConfiguration`` for the served kinds, named as upstream's manifests.

    ``ca_bundle`` is the base64 PEM of the CA that signed the serving certificate; ``port`` is the
    Service's port (which forwards to ``--webhook-server-port``).
    """
    infos: list[KindInfo] = [KINDS[k] for k in (kinds if kinds is not None else KINDS)]
    hooks = []
    for info in infos:
        client_config: dict[str, Any] = {
            "service": {"name": service_name, "namespace": namespace, "path": path_for(info), "port": port}
        }
        if ca_bundle:
            client_config["caBundle"] = ca_bundle
        hooks.append(
            {
                "name": f"validator.{info.kind.lower()}.training-operator.kubeflow.org",
                "admissionReviewVersions": ["v1"],
                "clientConfig": client_config,
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "rules": [
                    {
                        "apiGroups": [info.group],
                        "apiVersions": [info.version],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [info.plural],
                    }
                ],
            }
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": CONFIGURATION_NAME},
        "webhooks": hooks,
    }


# -- standalone ------------------------------------------------------------------------------------


async def _serve(settings: WebhookSettings) -> None:
    server = await start_webhook(settings)
    # The chosen port goes to stdout, so a caller that asked for port 0 learns the real one.
    print(f"webhook listening on {settings.host}:{server.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await server.stop()


def _standalone(settings: WebhookSettings) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        asyncio.run(_serve(settings))
    except CertificateMissing as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    """Serve with ``argv``'s flags (default: this process's); exits with the exit code."""
    command = composed(lambda **flags: _standalone(webhook_flags(**flags)), parameters(webhook_flags))
    run(
        command,
        argv,
        prog="python -m trainyard.operator.webhook",
        help="Serve the job validation webhook (AdmissionReview v1 over HTTPS) on its own.",
    )


if __name__ == "__main__":
    main()
