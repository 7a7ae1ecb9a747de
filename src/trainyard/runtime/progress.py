"""The sink for trainyard's status server: ``status.trainingProgress`` of a ``kubeflow.org/v1`` job.

The operator gives every replica container ``TRAINYARD_PROGRESS_URL`` (this job's
``.../<plural>/<name>/trainingprogress`` route), ``TRAINYARD_PROGRESS_TOKEN`` (the path of a
projected service-account token whose audience names that route) and ``TRAINYARD_PROGRESS_CA``
(the PEM text of the CA that signed the server). Each send POSTs ``{"report": {...}}``: epoch and
step counters, the latest metrics, progress and ETA as the reporter derived them, the last
checkpoint and the snapshot's time; the server merges it into the job's status. The POST itself,
the token, the TLS trust and what a failure does are ``statushttp``'s, as for Trainer v2's sink.
"""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from trainyard.runtime import statushttp
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
    ``ssl_context`` overrides it.
    """

    def __init__(
        self,
        url: str,
        *,
        token_path: str | None = None,
        ca_pem: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._poster = statushttp.StatusPoster(url, token_path=token_path, ca_pem=ca_pem, ssl_context=ssl_context)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> ProgressSink | None:
        """The sink the operator's env describes; None when ``TRAINYARD_PROGRESS_URL`` is not set."""
        env = os.environ if environ is None else environ
        url = env.get(ENV_URL)
        if not url:
            return None
        return cls(url, token_path=env.get(ENV_TOKEN) or None, ca_pem=env.get(ENV_CA) or None)

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self._poster.post(build_report(snapshot), timeout)
