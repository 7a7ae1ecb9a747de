"""The MLflow sink: one tracking run per training process, through MLflow's REST API, stdlib only.

Enabled on the reporting rank (global rank 0 by default) when ``MLFLOW_TRACKING_URI`` is an
``http``/``https`` URL; a ``file:`` (or any other) URI is logged once and ignored, since only a
server can collect the runs of pods on several machines. ``TRAINYARD_MLFLOW=false`` turns it off
for a job whose training code calls ``mlflow`` itself and wants no second run.

What it does, all on the reporter's sender thread, never in ``report()``:

* on its first send: the experiment named by ``MLFLOW_EXPERIMENT_NAME`` (got, or created when
  absent), else ``MLFLOW_EXPERIMENT_ID``, else MLflow's ``Default`` experiment (id ``0``); then a
  run named ``MLFLOW_RUN_NAME`` (the operator defaults it to the job's name) tagged
  ``mlflow.runName`` and ``trainyard.job.name``/``.namespace``/``.kind`` (from
  ``TRAINYARD_JOB_NAME``/``_NAMESPACE``/``_KIND`` when set). ``MLFLOW_RUN_ID`` instead names an
  existing run to log into, which this sink then neither tags nor ends.
* params: the JSON object in ``TRAINYARD_HYPERPARAMETERS`` and everything given to
  ``log_params()`` (which wins for a name in both), nested objects flattened to dotted names,
  values shown with ``str()`` as the ``mlflow`` client does. MLflow keeps a parameter's first
  value: a later different value for a logged name is dropped with a warning.
* metrics: every epoch's numeric metrics with ``step`` = the epoch (see
  ``reporting``'s epoch boundaries), through ``runs/log-batch``. A run that never names an epoch
  gets its metrics sampled at each send with ``step`` = the reported step. String metrics are
  not sent; names are made valid for MLflow (other characters become ``_``).
* at process exit (the reporter's close): the run is marked ``FINISHED``, ``FAILED`` when the
  process ends on an uncaught exception, or ``KILLED`` when it ends on SIGTERM (how Kubernetes
  stops a pod: a job's early stop, a deletion). For that last one, a process whose SIGTERM still
  has the default action (die at once, skipping ``atexit``) gets a handler, installed from the main
  thread when the process-wide reporter is built, that exits with ``SystemExit(143)`` instead: ``finally`` blocks
  and ``atexit`` run, the run is ended and the last update sent. A handler the program set itself
  is left alone.

Unsent metrics and params stay queued in the sink (bounded) and go with the next send, so a
server that is briefly down loses nothing. Authentication as the ``mlflow`` client reads it:
``MLFLOW_TRACKING_TOKEN`` (Bearer), else ``MLFLOW_TRACKING_USERNAME``/``_PASSWORD`` (Basic);
``MLFLOW_TRACKING_SERVER_CERT_PATH`` (a CA bundle) and ``MLFLOW_TRACKING_INSECURE_TLS=true``.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Mapping
from typing import Any

from trainyard.runtime import signals
from trainyard.runtime.signals import exit_on_sigterm as exit_on_sigterm  # reporting calls it here
from trainyard.runtime.snapshots import MetricValue, ParamValue, Snapshot

_logger = logging.getLogger(__name__)

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
ENV_EXPERIMENT_NAME = "MLFLOW_EXPERIMENT_NAME"
ENV_EXPERIMENT_ID = "MLFLOW_EXPERIMENT_ID"
ENV_RUN_NAME = "MLFLOW_RUN_NAME"
ENV_RUN_ID = "MLFLOW_RUN_ID"
ENV_TOKEN = "MLFLOW_TRACKING_TOKEN"
ENV_USERNAME = "MLFLOW_TRACKING_USERNAME"
ENV_PASSWORD = "MLFLOW_TRACKING_PASSWORD"
ENV_CA_PATH = "MLFLOW_TRACKING_SERVER_CERT_PATH"
ENV_INSECURE_TLS = "MLFLOW_TRACKING_INSECURE_TLS"
ENV_ENABLED = "TRAINYARD_MLFLOW"
ENV_HYPERPARAMETERS = "TRAINYARD_HYPERPARAMETERS"
JOB_TAGS = {
    "TRAINYARD_JOB_NAME": "trainyard.job.name",
    "TRAINYARD_JOB_NAMESPACE": "trainyard.job.namespace",
    "TRAINYARD_JOB_KIND": "trainyard.job.kind",
}
DEFAULT_EXPERIMENT_ID = "0"

# MLflow's own limits for one runs/log-batch request and for names and values.
MAX_BATCH_METRICS = 1000
MAX_BATCH_PARAMS = 100
MAX_KEY_LENGTH = 250
MAX_PARAM_VALUE_LENGTH = 6000
PENDING_METRICS_LIMIT = 100_000  # queued while the server is down; the oldest go first

_INVALID_KEY_CHARACTERS = re.compile(r"[^\w\-. /:]")
_warned_uris: set[str] = set()


class MlflowError(RuntimeError):
    """An MLflow REST call failed; ``code`` is MLflow's ``error_code`` (or ``HTTP_<status>``)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"MLflow answered HTTP {status} {code}: {message}")
        self.status = status
        self.code = code


def metric_key(name: object) -> str:
    """``name`` as a valid MLflow metric or param name."""
    return _INVALID_KEY_CHARACTERS.sub("_", str(name))[:MAX_KEY_LENGTH] or "_"


def metric_value(value: MetricValue | object) -> float | str | None:
    """A JSON-ready metric value, or None for what is not a number (strings, objects).

    Non-finite floats become the strings protobuf's JSON mapping uses, which MLflow accepts.
    """
    if isinstance(value, str):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]  # ints, bools, numpy and 0-d tensors
    except (TypeError, ValueError):
        return None
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return number


def flatten_params(params: Mapping[Any, ParamValue], prefix: str = "") -> dict[str, str]:
    """Parameters as MLflow stores them: nested mappings to dotted names, values as ``str()``."""
    out: dict[str, str] = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_params(value, f"{name}."))
        else:
            out[metric_key(name)] = str(value)[:MAX_PARAM_VALUE_LENGTH]
    return out


def run_failed() -> bool:
    """Whether the process is exiting on an uncaught exception: the interpreter stores it in
    ``sys.last_value`` when it prints the traceback, before the ``atexit`` handlers run."""
    return getattr(sys, "last_value", None) is not None


class MlflowSink:
    """A :class:`trainyard.runtime.snapshots.Sink` that keeps an MLflow run; see the module docstring."""

    wants_history = True

    def __init__(
        self,
        tracking_uri: str,
        *,
        experiment_name: str | None = None,
        experiment_id: str | None = None,
        run_name: str | None = None,
        run_id: str | None = None,
        tags: Mapping[str, str] | None = None,
        params: Mapping[str, ParamValue] | None = None,
        headers: Mapping[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
        wall: Any = time.time,
    ) -> None:
        self.base_url = tracking_uri.rstrip("/") + "/api/2.0/mlflow/"
        self.experiment_name = experiment_name or None
        self.experiment_id = experiment_id or None
        self.run_name = run_name or None
        self.run_id = run_id or None
        self.owns_run = False  # True once this sink created the run: it then ends it too
        self.tags = dict(tags or {})
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.ssl_context = ssl_context
        self._wall = wall
        self._pending_params: dict[str, str] = flatten_params(params or {})
        self._logged_params: dict[str, str] = {}
        self._pending_metrics: deque[dict[str, Any]] = deque(maxlen=PENDING_METRICS_LIMIT)
        self._last_queued: dict[str, tuple[int, float | str]] = {}  # key -> (step, value)
        self._conflicts_warned: set[str] = set()

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> MlflowSink | None:
        env = os.environ if environ is None else environ
        uri = env.get(ENV_TRACKING_URI, "").strip()
        if not uri or env.get(ENV_ENABLED, "").strip().lower() in {"0", "false", "no", "off"}:
            return None
        if urllib.parse.urlsplit(uri).scheme not in {"http", "https"}:
            if uri not in _warned_uris:
                _warned_uris.add(uri)
                _logger.warning(
                    "%s=%s is not an http(s) URL: trainyard.runtime sends nothing to MLflow "
                    "(a tracking server is needed to collect every replica's run)",
                    ENV_TRACKING_URI,
                    uri,
                )
            return None
        tags = {tag: env[name] for name, tag in JOB_TAGS.items() if env.get(name)}
        return cls(
            uri,
            experiment_name=env.get(ENV_EXPERIMENT_NAME),
            experiment_id=env.get(ENV_EXPERIMENT_ID),
            run_name=env.get(ENV_RUN_NAME),
            run_id=env.get(ENV_RUN_ID),
            tags=tags,
            params=_hyperparameters(env.get(ENV_HYPERPARAMETERS, "")),
            headers=_auth_headers(env),
            ssl_context=_ssl_context(uri, env),
        )

    # -- the Sink interface (sender thread only) -------------------------------------------------

    def send(self, snapshot: Snapshot, timeout: float) -> None:
        self._queue(snapshot)
        self._ensure_run(timeout)
        self._log_pending(timeout)

    def close(self, timeout: float) -> None:
        if self.run_id is None or not self.owns_run:
            return
        status = "KILLED" if signals.terminated() else "FAILED" if run_failed() else "FINISHED"
        self.call("runs/update", {"run_id": self.run_id, "status": status, "end_time": self._now_ms()}, timeout)

    # -- queueing --------------------------------------------------------------------------------

    def _queue(self, snapshot: Snapshot) -> None:
        for record in snapshot.epochs:
            self._queue_metrics(record.metrics, record.epoch, record.time)
        if snapshot.epoch is None and not snapshot.epochs and snapshot.metrics:
            self._queue_metrics(snapshot.metrics, snapshot.step or 0, snapshot.time)
        for key, value in flatten_params(snapshot.params).items():
            logged = self._logged_params.get(key)
            if logged is None:
                self._pending_params[key] = value
            elif logged != value and key not in self._conflicts_warned:
                self._conflicts_warned.add(key)
                _logger.warning("MLflow param %s keeps its first value %r, not %r", key, logged, value)

    def _queue_metrics(self, metrics: Mapping[str, MetricValue], step: int, wall: float) -> None:
        timestamp = int(wall * 1000)
        for name, raw in metrics.items():
            value = metric_value(raw)
            if value is None:
                continue
            key = metric_key(name)
            if self._last_queued.get(key) == (step, value):
                continue  # the same value at the same step: MLflow would store it twice
            self._last_queued[key] = (step, value)
            self._pending_metrics.append({"key": key, "value": value, "timestamp": timestamp, "step": step})

    # -- REST ------------------------------------------------------------------------------------

    def _ensure_run(self, timeout: float) -> None:
        if self.run_id is not None:
            return
        if self.experiment_id is None:
            self.experiment_id = (
                self._experiment_by_name(self.experiment_name, timeout)
                if self.experiment_name
                else DEFAULT_EXPERIMENT_ID
            )
        tags = dict(self.tags)
        body: dict[str, Any] = {"experiment_id": self.experiment_id, "start_time": self._now_ms()}
        if self.run_name:
            body["run_name"] = self.run_name
            tags["mlflow.runName"] = self.run_name
        body["tags"] = [{"key": key, "value": value} for key, value in tags.items()]
        answer = self.call("runs/create", body, timeout)
        self.run_id = str(answer["run"]["info"]["run_id"])
        self.owns_run = True

    def _experiment_by_name(self, name: str, timeout: float) -> str:
        try:
            return self._get_experiment_id(name, timeout)
        except MlflowError as error:
            if error.code != "RESOURCE_DOES_NOT_EXIST":
                raise
        try:
            return str(self.call("experiments/create", {"name": name}, timeout)["experiment_id"])
        except MlflowError as error:
            if error.code != "RESOURCE_ALREADY_EXISTS":
                raise
            return self._get_experiment_id(name, timeout)  # another replica or job created it first

    def _get_experiment_id(self, name: str, timeout: float) -> str:
        query = urllib.parse.urlencode({"experiment_name": name})
        answer = self.call(f"experiments/get-by-name?{query}", None, timeout)
        return str(answer["experiment"]["experiment_id"])

    def _log_pending(self, timeout: float) -> None:
        while self._pending_params or self._pending_metrics:
            params = list(self._pending_params.items())[:MAX_BATCH_PARAMS]
            count = min(len(self._pending_metrics), MAX_BATCH_METRICS - len(params))
            metrics = [self._pending_metrics[i] for i in range(count)]
            body = {
                "run_id": self.run_id,
                "metrics": metrics,
                "params": [{"key": key, "value": value} for key, value in params],
            }
            self.call("runs/log-batch", body, timeout)
            for key, value in params:
                del self._pending_params[key]
                self._logged_params[key] = value
            for _ in range(count):
                self._pending_metrics.popleft()

    def call(self, path: str, body: Mapping[str, Any] | None, timeout: float) -> dict[str, Any]:
        """One REST call: POST ``body`` as JSON, or GET when it is None; the answer's JSON object."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, headers=self.headers, method="GET" if body is None else "POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raise _error_of(error) from None
        answer = json.loads(raw) if raw.strip() else {}
        return answer if isinstance(answer, dict) else {}

    def _now_ms(self) -> int:
        return int(self._wall() * 1000)


def _error_of(error: urllib.error.HTTPError) -> MlflowError:
    code, message = f"HTTP_{error.code}", error.reason
    try:
        detail = json.loads(error.read() or b"{}")
        code = str(detail.get("error_code") or code)
        message = str(detail.get("message") or message)
    except (ValueError, AttributeError, OSError):
        pass
    return MlflowError(error.code, code, str(message))


def _hyperparameters(raw: str) -> dict[str, ParamValue]:
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        _logger.warning("%s is not JSON; its parameters are not logged to MLflow", ENV_HYPERPARAMETERS)
        return {}
    if not isinstance(value, dict):
        _logger.warning("%s is not a JSON object; its parameters are not logged to MLflow", ENV_HYPERPARAMETERS)
        return {}
    return value


def _auth_headers(env: Mapping[str, str]) -> dict[str, str]:
    token = env.get(ENV_TOKEN)
    if token:
        return {"Authorization": f"Bearer {token}"}
    username, password = env.get(ENV_USERNAME), env.get(ENV_PASSWORD)
    if username and password:
        basic = base64.b64encode(f"{username}:{password}".encode()).decode()
        return {"Authorization": f"Basic {basic}"}
    return {}


def _ssl_context(uri: str, env: Mapping[str, str]) -> ssl.SSLContext | None:
    if not uri.startswith("https:"):
        return None
    if env.get(ENV_INSECURE_TLS, "").strip().lower() == "true":
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        return context
    return ssl.create_default_context(cafile=env.get(ENV_CA_PATH) or None)
