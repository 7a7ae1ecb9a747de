"""The dashboard on its own, as a cluster's Deployment runs it: ``python -m trainyard.dashboard serve``.

It reads the API with the pod's ServiceAccount (or ``--kubeconfig``), keeps the history in
``--history`` (a volume), and listens on ``--port``, plain HTTP by default: users reach it through
``kubectl port-forward``, which the API server tunnels over its own TLS, with their own RBAC.
The owner's credential (``--token-file``, a Secret's key) mints login codes: at start the log
shows a first login path, and ``python -m trainyard.dashboard login`` (through ``kubectl exec``)
prints another.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import secrets
import signal
import ssl
import sys
import urllib.request
from pathlib import Path

from aiohttp import web
from lightkube import KubeConfig

from trainyard.client.transport import Client
from trainyard.dashboard.app import Dashboard
from trainyard.dashboard.history.store import HistoryStore
from trainyard.dashboard.login import PREFIX, Logins

log = logging.getLogger("trainyard.dashboard")

DEFAULT_PORT = 8080
DEFAULT_HISTORY = Path("/var/lib/trainyard-dashboard/history.db")
DEFAULT_TOKEN_FILE = Path("/etc/trainyard-dashboard/token")


def _config(kubeconfig: str | None) -> KubeConfig:
    return KubeConfig.from_file(kubeconfig) if kubeconfig else KubeConfig.from_env()


def _token(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


async def serve(args: argparse.Namespace) -> None:
    client = Client(_config(args.kubeconfig), field_manager="trainyard-dashboard")
    secure = bool(args.tls_cert)
    token = _token(args.token_file)
    if token is None:
        log.warning("no owner token at %s: only the login link below opens a session", args.token_file)
    # without one, a token nobody knows: no code is minted over HTTP (None would let anyone mint)
    logins = Logins(owner_token=token or secrets.token_urlsafe(32), secure=secure)
    args.history.parent.mkdir(parents=True, exist_ok=True)
    dashboard = Dashboard(HistoryStore(args.history), logins)
    dashboard.attach(client)
    root = web.Application()
    root.add_subapp(PREFIX, dashboard.application())
    runner = web.AppRunner(root, access_log=None, handler_cancellation=True, shutdown_timeout=2.0)
    await runner.setup()
    context = None
    if secure:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
    site = web.TCPSite(runner, args.address, args.port, ssl_context=context)
    await site.start()
    watching = asyncio.create_task(dashboard.run(), name="dashboard")
    log.info(
        "dashboard listening on %s:%s; log in at %s/login?token=%s", args.address, args.port, PREFIX, logins.mint()
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watching
        await runner.cleanup()
        await client.close()
        dashboard.store.close()


def login(args: argparse.Namespace) -> int:
    """A new login path, minted by the dashboard running beside (in this pod) for the owner's token."""
    token = _token(args.token_file)
    if token is None:
        print(f"no owner token at {args.token_file}", file=sys.stderr)
        return 1
    scheme = "https" if args.tls else "http"
    request = urllib.request.Request(
        f"{scheme}://127.0.0.1:{args.port}{PREFIX}/api/login-codes",
        method="POST",
        headers={"Authorization": f"Bearer {token}"},
    )
    context = ssl._create_unverified_context() if args.tls else None  # our own pod, by its loopback address
    with urllib.request.urlopen(request, timeout=10, context=context) as answer:
        print(json.loads(answer.read())["path"])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainyard.dashboard", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="serve the dashboard")
    run.add_argument("--address", default="0.0.0.0")
    run.add_argument("--port", type=int, default=DEFAULT_PORT)
    run.add_argument("--kubeconfig", help="a kubeconfig instead of the pod's ServiceAccount")
    run.add_argument("--history", type=Path, default=DEFAULT_HISTORY, help="the history's SQLite file")
    run.add_argument("--token-file", type=Path, default=DEFAULT_TOKEN_FILE, help="the owner's token (mints logins)")
    run.add_argument("--tls-cert", help="serve HTTPS with this certificate (and --tls-key)")
    run.add_argument("--tls-key")
    link = sub.add_parser("login", help="print a new one-time login path")
    link.add_argument("--port", type=int, default=DEFAULT_PORT)
    link.add_argument("--token-file", type=Path, default=DEFAULT_TOKEN_FILE)
    link.add_argument("--tls", action="store_true", help="the dashboard serves HTTPS")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "login":
        return login(args)
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
