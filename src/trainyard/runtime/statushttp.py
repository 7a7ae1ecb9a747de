"""The one HTTP transport of the status sinks: ``progress`` (trainyard's ``trainingprogress`` route)
and ``trainer_status`` (Kubeflow Trainer v2's TrainerStatus endpoint) differ only in their env
names and their request bodies; this module POSTs either body.

A send is one JSON POST within the reporter's timeout, with the pod's projected service-account
token as a bearer, over TLS trusting the CA the operator named (its PEM text, or a file), else the
system's trust store; plain ``http`` URLs are allowed for local servers.

The token file is read on every send: the node (a kubelet on a cluster) replaces it, atomically,
once 80 % of the token's life has passed, so a token kept in memory would be refused once it
expires, in the middle of a long training. One small read per request (a sink sends at most once a
second) always holds the current one.

Error policy, the same for both sinks: every failure surfaces when an update is sent, never when
a sink is built (an unreadable CA is an :class:`OSError` of the first send, not an exception in
the training code that configured reporting), as an :class:`OSError` when the server could not be
reached (connection, TLS, timeout, token file) or :class:`StatusRefused` when it answered with
anything but 200, naming the server's reason. The ``reporting.Reporter``, which calls a sink only
from that sink's own sender thread, drops the update (the next one carries the latest values
anyway), logs the first failure of each sink at warning level and the later ones at debug, and
keeps sending at its interval, so a server that comes back, or a token that is refreshed, is
picked up without a restart. Stdlib only (``urllib``), so training images need nothing else.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class StatusRefused(RuntimeError):
    """The status server answered with something other than 200; the message says what it refused."""


def bearer(token_path: str | None) -> dict[str, str]:
    """``{"Authorization": "Bearer <token>"}`` from the file, or nothing without a path or a token in it."""
    if not token_path:
        return {}
    with open(token_path, encoding="utf-8") as handle:
        token = handle.read().strip()
    return {"Authorization": f"Bearer {token}"} if token else {}


class StatusPoster:
    """POSTs JSON bodies to ``url``; see the module docstring for what it sends and how it fails.

    The CA is ``ca_pem`` (PEM text) or ``ca_file`` (a path; a file that does not exist leaves the
    system's trust store, as the Kubeflow SDK does); ``ssl_context`` overrides both.
    """

    def __init__(
        self,
        url: str,
        *,
        token_path: str | None = None,
        ca_pem: str | None = None,
        ca_file: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url
        self.token_path = token_path or None
        self._ca_pem = ca_pem or None
        self._ca_file = ca_file or None
        self._ssl_context = ssl_context

    def post(self, body: Mapping[str, Any], timeout: float) -> None:
        headers = {"Content-Type": "application/json", **bearer(self.token_path)}
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._context()) as response:
                if response.status != 200:
                    raise StatusRefused(f"status server answered HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            # The server's Status message says what was wrong (which field, which token).
            raise StatusRefused(f"status server answered HTTP {exc.code}: {_message(exc)}") from None

    def _context(self) -> ssl.SSLContext | None:
        # Built on the first send, so that a bad CA is a dropped update like any other failure.
        if self._ssl_context is None and self.url.startswith("https:"):
            cafile = self._ca_file if self._ca_file and Path(self._ca_file).exists() else None
            self._ssl_context = ssl.create_default_context(cafile=cafile, cadata=self._ca_pem)
        return self._ssl_context


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read(4096) or b"{}")
    except (OSError, ValueError):
        return exc.reason if isinstance(exc.reason, str) else ""
    return str(body.get("message") or "") if isinstance(body, dict) else ""
