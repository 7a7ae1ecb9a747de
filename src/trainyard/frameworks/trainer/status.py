"""Kubeflow Trainer's TrainJob status server (upstream's ``TrainJobStatus`` gate), its pure half.

Training code reports progress and metrics through the official SDK's
``kubeflow.trainer.update_trainjob_status``: a POST of ``{"trainerStatus": {...}}`` to
``$KUBEFLOW_TRAINER_SERVER_URL`` with the projected token at ``$KUBEFLOW_TRAINER_SERVER_TOKEN`` as
bearer, TLS checked against ``$KUBEFLOW_TRAINER_SERVER_CA_CERT``. As upstream's ``TrainJobStatus``
plugin, ``enforce`` gives every container of the trainer's pods those three variables and one
projected volume at ``/var/run/secrets/kubeflow/trainer``: a service-account token whose audience
names this TrainJob's status endpoint (so a token minted for one TrainJob is refused for another)
and ``ca.crt`` from the ``<trainjob>-tls-config`` ConfigMap, the companion ``ca_config_map`` makes.

``trainer_status`` checks a request body the way the CRD's schema would (progress and remaining
time are integers, progress 0..100, at most 256 metrics of non-empty name and value strings up to
64 characters) and returns the ``status.trainerStatus`` to write, with ``lastUpdatedTime`` set
from the server's clock when the request has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trainyard.api import trainer
from trainyard.api.meta import Obj, format_time
from trainyard.frameworks.trainer.template import _pod_spec, _upsert_named, trainer_job, upsert_env

URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
CA_CERT_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
CA_KEY = "ca.crt"
TOKEN_FILE = "token"
VOLUME = "kubeflow-trainer-token"
TOKEN_SECONDS = 3600
CA_CONFIG_MAP_SUFFIX = "-tls-config"
DEFAULT_PORT = 10443
"""Upstream's ``statusServer.port``."""
MAX_METRICS = 256
MAX_METRIC_LENGTH = 64
INT32_MAX = 2**31 - 1
FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


@dataclass(frozen=True)
class StatusServer:
    """Where trainer pods reach the status server, and the CA its serving certificate chains to."""

    url: str
    """Scheme, host and port: ``https://127.0.0.1:<port>`` embedded, ``https://<svc>.<ns>.svc:10443`` on a cluster."""
    ca_pem: str


def path(namespace: str, name: str) -> str:
    """The endpoint's path: the TrainJob's status subresource, as upstream's ``StatusUrl``."""
    return f"/apis/{trainer.GROUP}/{trainer.VERSION}/namespaces/{namespace}/{trainer.TRAINJOBS}/{name}/status"


def audience(namespace: str, name: str) -> str:
    """The audience a token must carry to report for this TrainJob, as upstream's ``TokenAudience``."""
    return f"{trainer.GROUP}/{trainer.VERSION}/namespaces/{namespace}/{trainer.TRAINJOBS}/{name}/status"


def ca_config_map_name(trainjob_name: str) -> str:
    return f"{trainjob_name}{CA_CONFIG_MAP_SUFFIX}"


def ca_config_map(trainjob: Obj, server: StatusServer) -> Obj:
    """The per-TrainJob ConfigMap holding the server's CA (owned by the TrainJob like every companion)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": ca_config_map_name(trainjob["metadata"]["name"])},
        "data": {CA_KEY: server.ca_pem},
    }


def enforce(js: Obj, trainjob: Obj, server: StatusServer) -> None:
    """Give the trainer's containers the endpoint, the CA and the token (in place); no trainer: nothing."""
    rjob = trainer_job(js)
    if rjob is None:
        return
    meta = trainjob["metadata"]
    namespace, name = meta.get("namespace") or "default", meta["name"]
    env = [
        {"name": URL_ENV, "value": server.url.rstrip("/") + path(namespace, name)},
        {"name": CA_CERT_ENV, "value": f"{MOUNT_PATH}/{CA_KEY}"},
        {"name": TOKEN_ENV, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
    ]
    mount = {"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    volume = {
        "name": VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": audience(namespace, name),
                        "expirationSeconds": TOKEN_SECONDS,
                        "path": TOKEN_FILE,
                    }
                },
                {"configMap": {"name": ca_config_map_name(name), "items": [{"key": CA_KEY, "path": CA_KEY}]}},
            ]
        },
    }
    spec = _pod_spec(rjob)
    for container in spec.get("containers") or []:
        upsert_env(container, env)
        _upsert_named(container.setdefault("volumeMounts", []), [mount])
    _upsert_named(spec.setdefault("volumes", []), [volume])


class InvalidStatus(ValueError):
    """The request body is not a valid ``UpdateTrainJobStatusRequest``; the message names the field."""


def _int(value: Any, field: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidStatus(f"trainerStatus.{field}: must be an integer, got {type(value).__name__}")
    if not 0 <= value <= high:
        raise InvalidStatus(f"trainerStatus.{field}: must be between 0 and {high}, got {value}")
    return value


def _metric(item: Any, i: int) -> Obj:
    if not isinstance(item, dict) or set(item) - {"name", "value"}:
        raise InvalidStatus(f"trainerStatus.metrics[{i}]: must be an object with name and value")
    out: Obj = {}
    for key in ("name", "value"):
        value = item.get(key)
        if not isinstance(value, str) or not 1 <= len(value) <= MAX_METRIC_LENGTH:
            raise InvalidStatus(
                f"trainerStatus.metrics[{i}].{key}: must be a string of 1 to {MAX_METRIC_LENGTH} characters"
            )
        out[key] = value
    return out


def _time(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidStatus("trainerStatus.lastUpdatedTime: must be an RFC 3339 date-time string")
    try:
        # the SDK sends Python's isoformat(): microseconds and "+00:00"; stored as Kubernetes writes times
        stamp = datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise InvalidStatus(f"trainerStatus.lastUpdatedTime: {value!r} is not an RFC 3339 date-time") from None
    if stamp.tzinfo is None:
        raise InvalidStatus(f"trainerStatus.lastUpdatedTime: {value!r} has no time zone")
    return format_time(stamp.astimezone(UTC))


def trainer_status(body: Any, now: datetime) -> Obj | None:
    """The ``status.trainerStatus`` a request asks for; None when it carries none (nothing to write)."""
    if not isinstance(body, dict):
        raise InvalidStatus("the body must be a JSON object with trainerStatus")
    unknown = sorted(set(body) - {"trainerStatus"})
    if unknown:
        raise InvalidStatus(f"unknown field {unknown[0]!r}: the body holds only trainerStatus")
    raw = body.get("trainerStatus")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidStatus("trainerStatus: must be an object")
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise InvalidStatus(f"trainerStatus.{unknown[0]}: unknown field (expected {', '.join(FIELDS)})")
    out: Obj = {}
    if raw.get("progressPercentage") is not None:
        out["progressPercentage"] = _int(raw["progressPercentage"], "progressPercentage", 100)
    if raw.get("estimatedRemainingSeconds") is not None:
        out["estimatedRemainingSeconds"] = _int(
            raw["estimatedRemainingSeconds"], "estimatedRemainingSeconds", INT32_MAX
        )
    metrics = raw.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list):
            raise InvalidStatus("trainerStatus.metrics: must be a list")
        if len(metrics) > MAX_METRICS:
            raise InvalidStatus(f"trainerStatus.metrics: at most {MAX_METRICS} items, got {len(metrics)}")
        if metrics:
            out["metrics"] = [_metric(item, i) for i, item in enumerate(metrics)]
    stamp = raw.get("lastUpdatedTime")
    out["lastUpdatedTime"] = format_time(now) if stamp is None else _time(stamp)
    return out


def merge_patch(status: Obj) -> Obj:
    """A JSON merge patch that makes ``status.trainerStatus`` exactly ``status`` (absent fields removed),
    as upstream's server-side apply of the whole ``trainerStatus`` under its own field manager does."""
    return {"status": {"trainerStatus": {key: status.get(key) for key in FIELDS}}}
