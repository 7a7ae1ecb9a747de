"""The sink for trainyard's status server: ``status.trainingProgress`` of a ``kubeflow.org/v1`` job.

The operator gives every replica container ``TRAINYARD_PROGRESS_URL`` (this job's
``.../<plural>/<name>/trainingprogress`` route), ``TRAINYARD_PROGRESS_TOKEN`` (the path of a
projected service-account token whose audience names that route) and ``TRAINYARD_PROGRESS_CA``
(the PEM text of the CA that signed the server). Each send POSTs ``{"report": {...}}``: epoch and
step counters, the latest metrics, progress and ETA as the reporter derived them, the last
checkpoint and the snapshot's time; the server merges it into the job's status. The token file is
read on every send (``tokenfile``: the node replaces the token before it expires).
Stdlib only (``urllib``), so training images need nothing else.
"""

from __future__ import annotations

import json
import math
import os
import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from trainyard.runtime import tokenfile
from trainyard.runtime.snapshots import Snapshot

ENV_URL = "TRAINYARD_PROGRESS_URL"
ENV_TOKEN = "TRAINYARD_PROGRESS_TOKEN"
ENV_CA = "TRAINYARD_PROGRESS_CA"
MAX_METRICS = 256  # what the server keeps per job


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _metric(value: object) -> object:
    # JSON has no NaN or infinity: a diverged loss is sent as the string Python writes for it.
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return str(value)
    return value


def build_report(snapshot: Snapshot) -> dict[str, Any]:
    """The request body for one snapshot: only what is known, in the server's names."""
    report: dict[str, Any] = {"time": _rfc3339(snapshot.time)}
    for key, value in (
        ("epoch", snapshot.epoch),
        ("totalEpochs", snapshot.total_epochs),
        ("step", snapshot.step),
        ("totalSteps", snapshot.total_steps),
    ):
        if value is not None:
            report[key] = max(0, int(value))
    if snapshot.progress_percentage is not None:
        report["progressPercentage"] = max(0, min(100, int(snapshot.progress_percentage)))
    if snapshot.estimated_remaining_seconds is not None:
        report["estimatedRemainingSeconds"] = max(0, int(snapshot.estimated_remaining_seconds))
    if snapshot.metrics:
        items = list(snapshot.metrics.items())[:MAX_METRICS]
        report["metrics"] = {str(name): _metric(value) for name, value in items}
    if snapshot.checkpoint is not None:
        checkpoint: dict[str, Any] = {"path": snapshot.checkpoint.path, "time": _rfc3339(snapshot.checkpoint.time)}
        if snapshot.checkpoint.epoch is not None:
            checkpoint["epoch"] = max(0, int(snapshot.checkpoint.epoch))
        report["checkpoint"] = checkpoint
    return {"report": report}


class ProgressSink:
    """POSTs :func:`build_report` to the job's progress route with the pod's token.

    ``ca_pem`` is the CA's PEM text (``None`` with an ``https`` URL: the system's trust store);
    ``ssl_context`` overrides both. Plain ``http`` URLs are allowed for local servers.
    """

    def __init__(
        self,
        url: str,
        *,
        token_path: str | None = None,
        ca_pem: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.url = url
        self.token_path = token_path
        if ssl_context is None and url.startswith("https:"):
            ssl_context = ssl.create_default_context(cadata=ca_pem or None)
        self.ssl_context = ssl_context

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ProgressSink | None:
        """The sink the operator's env describes; None when ``TRAINYARD_PROGRESS_URL`` is not set."""
        env = os.environ if environ is None else environ
        url = env.get(ENV_URL)
        if not url:
            return None
        return cls(url, token_path=env.get(ENV_TOKEN) or None, ca_pem=env.get(ENV_CA) or None)

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        body = json.dumps(build_report(snapshot)).encode()
        headers = {"Content-Type": "application/json", **tokenfile.bearer(self.token_path)}
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context) as response:
                if response.status != 200:
                    raise RuntimeError(f"status server answered HTTP {response.status}")
        except urllib.error.HTTPError as exc:
            # The server's Status message says what was wrong (which field, which token).
            raise RuntimeError(f"status server answered HTTP {exc.code}: {_message(exc)}") from None


def _message(exc: urllib.error.HTTPError) -> str:
    try:
        body = json.loads(exc.read(4096) or b"{}")
    except (OSError, ValueError):
        return exc.reason if isinstance(exc.reason, str) else ""
    return str(body.get("message") or "") if isinstance(body, dict) else ""
