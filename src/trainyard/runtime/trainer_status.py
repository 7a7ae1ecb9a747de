"""The sink for Kubeflow Trainer v2's status server (``trainerStatus`` of a TrainJob).

The controller injects ``KUBEFLOW_TRAINER_SERVER_URL`` (an HTTPS endpoint),
``KUBEFLOW_TRAINER_SERVER_TOKEN`` (the path of a projected service-account token) and
``KUBEFLOW_TRAINER_SERVER_CA_CERT`` (the path of the CA that signed the server). The body is what
the official SDK's ``update_trainjob_status`` posts: ``{"trainerStatus": {"lastUpdatedTime",
"progressPercentage", "estimatedRemainingSeconds", "metrics": [{"name", "value"}]}}``, metric
values as strings, at most 256 metrics. Upstream's status has no checkpoint field, so the last
checkpoint is not sent here. The POST itself, the TLS trust and what a failure does are
``statushttp``'s, as for trainyard's own sink; it reads the token file on every send, where the
SDK keeps a token five minutes: a token refreshed at 80 % of a ten-minute life would be sent after
it expired.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from trainyard.runtime import statushttp
from trainyard.runtime.snapshots import Snapshot

ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_TOKEN_PATH = "KUBEFLOW_TRAINER_SERVER_TOKEN"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
MAX_METRICS = 256  # the SDK's _MAX_METRICS_COUNT


def build_trainer_status(snapshot: Snapshot) -> dict[str, Any]:
    """The request body for one snapshot, field for field as the official SDK builds it."""
    status: dict[str, Any] = {"lastUpdatedTime": datetime.fromtimestamp(snapshot.time, UTC).isoformat()}
    if snapshot.progress_percentage is not None:
        status["progressPercentage"] = max(0, min(100, int(snapshot.progress_percentage)))
    if snapshot.estimated_remaining_seconds is not None:
        status["estimatedRemainingSeconds"] = max(0, int(snapshot.estimated_remaining_seconds))
    if snapshot.metrics:
        items = list(snapshot.metrics.items())[:MAX_METRICS]
        status["metrics"] = [{"name": str(name), "value": str(value)} for name, value in items]
    return {"trainerStatus": status}


class TrainerStatusSink:
    """POSTs :func:`build_trainer_status` to the status server with the pod's token.

    ``ssl_context`` overrides the one built from the CA file (``None``, or a file that does not
    exist, with an ``https`` URL uses the system's trust store, as the SDK's ``verify=True`` does).
    """

    def __init__(
        self,
        url: str,
        *,
        token_path: str | None = None,
        ca_cert: str | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._poster = statushttp.StatusPoster(url, token_path=token_path, ca_file=ca_cert, ssl_context=ssl_context)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TrainerStatusSink | None:
        env = os.environ if environ is None else environ
        url = env.get(ENV_SERVER_URL)
        if not url:
            return None
        return cls(url, token_path=env.get(ENV_TOKEN_PATH), ca_cert=env.get(ENV_CA_CERT))

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self._poster.post(build_trainer_status(snapshot), timeout)
