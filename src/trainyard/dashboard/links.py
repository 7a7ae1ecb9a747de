"""A login link to the dashboard for whoever holds a kubeconfig of the plane (``yard dashboard``).

The code is minted by the dashboard itself (``POST /dashboard/api/login-codes``) for the bearer
token the kubeconfig holds, over the connection the kubeconfig describes (its CA, its token), as
``kubectl`` would reach the server; the link is that server's address and the login path.
"""

from __future__ import annotations

from pathlib import Path

import httpx2
from lightkube import KubeConfig
from lightkube.config.client_adapter import Client, ConnectionParams

from trainyard.dashboard.login import PREFIX


class NoDashboard(Exception):
    """The server the kubeconfig names serves no dashboard, or refused a code; the message says why."""


def login_link(kubeconfig: Path, *, timeout: float = 10.0) -> str:
    config = KubeConfig.from_file(kubeconfig).get()
    if config is None:
        raise NoDashboard(f"{kubeconfig} names no current context")
    server = config.cluster.server.rstrip("/")
    with Client(config, ConnectionParams(timeout=httpx2.Timeout(timeout))) as http:
        try:
            answer = http.post(f"{server}{PREFIX}/api/login-codes")
        except (OSError, httpx2.HTTPError) as exc:
            raise NoDashboard(f"cannot reach {server}: {exc}; is the plane up (`yard status`)?") from exc
    if answer.status_code == 404:
        raise NoDashboard(
            f"{server} serves no dashboard: on a cluster it runs as a Deployment (deploy/dashboard, docs/dashboard.md)"
        )
    if answer.status_code != 201:
        message = answer.json().get("message") if "json" in answer.headers.get("content-type", "") else answer.text
        raise NoDashboard(f"{server} gave no login code ({answer.status_code}): {message}")
    return f"{server}{answer.json()['path']}"
