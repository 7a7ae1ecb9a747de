"""The operator's Prometheus metrics: upstream's job counters, reconcile timing, queue depth, leadership.

The job counters keep upstream's names and labels (reference §11) but count each job event once:
they are derived from the condition transitions that a status write the operator actually made
carried (a condition that was not True before the write and is True after it). So an operator
restart does not count every existing job as created again (upstream does), a retried status
write does not count twice, and every path to Failed counts (upstream counts only one of them).

The rest use the names controller-runtime and client-go expose, so dashboards built for the
upstream operator keep working: ``controller_runtime_reconcile_total``/``_errors_total``/
``_time_seconds``, ``workqueue_depth``, ``leader_election_master_status``, and the API client's
``rest_client_requests_total``, ``rest_client_request_duration_seconds`` and
``rest_client_rate_limiter_duration_seconds`` (fed by ``restclient``'s transport).

Beside them, seed 004's per-job series (``trainingjob_*``), fed by ``observe_job`` (every job the
controllers reconcile, after their status write) and ``forget_job`` (the job is gone). What they
read of a job is its family's ``sample`` (``api.families``); here is how they are kept:

* Per-job series (labels ``namespace``, ``training_job``, ``kind``): progress, epoch, loss,
  accuracy, duration (plus ``state``), allocated workers and GPUs, and the per-job reconcile count,
  errors and time. They are made at scrape time from what was last observed, so a state change
  leaves no stale series, and a finished job's vanish ``retention`` (10 minutes) after it ended:
  label cardinality stays bounded by the live jobs. A deleted job's go at once.
* ``trainingjob_total{namespace,state}`` counts the jobs that exist (finished ones too, until deleted).
* Counters, each job once: ``created`` when first observed, ``completed{result}``/``failed{reason}``
  when first observed finished. A restarted operator does not count again what its predecessor
  saw: a job counts as created only if it was created, or first reconciled (its earliest
  condition), after this process started; as finished only if it was seen running here or ended
  after this process started (to the second). Upstream counts every existing job as created again
  on a restart. The price: a job created and left unreconciled while no operator ran, whose kind
  writes no condition, is not counted as created.
* A job controlled by another job (seed 004's TrainingJob owns the v1 job it compiles to) counts
  once in ``trainingjob_total`` and the counters, under the controlling job when both are observed;
  both keep their per-job series, told apart by ``kind``.
* ``trainingjob_gpu_utilization_percent`` is not exported: the operator sees pods, not GPUs (on a
  cluster, NVIDIA's DCGM exporter's ``DCGM_FI_DEV_GPU_UTIL`` is the source of truth).

Each ``OperatorMetrics`` has its own registry (no process globals), served by ``exposition``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import prometheus_client
from lightkube.core.exceptions import ApiError
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from trainyard.api import families, jobshapes
from trainyard.api.jobshapes import JobSample
from trainyard.api.kinds import framework_label

# Counters are exposed as ``<name>_total`` only, as Go's client does; no ``_created`` series.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = prometheus_client.CONTENT_TYPE_LATEST

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# client-go's buckets for its request and rate-limiter latencies (component-base's restclient metrics).
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)
RETENTION = timedelta(minutes=10)
"""How long a finished job's per-job series stay after it ended."""
JOB_LABELS = ("namespace", "training_job", "kind")

# Condition that became True in a written status → the counter it moves.
_TRANSITIONS = {"Created": "created", "Succeeded": "successful", "Failed": "failed", "Restarting": "restarted"}


def true_conditions(status: Mapping[str, Any] | None) -> set[str]:
    """Types of the conditions that are True in a status (a job's ``status`` as JSON)."""
    conditions = (status or {}).get("conditions") or []
    return {str(c.get("type")) for c in conditions if isinstance(c, dict) and c.get("status") == "True"}


class _QueueDepth(Collector):
    """``workqueue_depth{name}`` read from the live queues at scrape time."""

    def __init__(self) -> None:
        self.queues: dict[str, Callable[[], int]] = {}

    def collect(self) -> Iterable[GaugeMetricFamily]:
        family = GaugeMetricFamily("workqueue_depth", "Current depth of workqueue", labels=["name"])
        for name, depth in sorted(self.queues.items()):
            family.add_metric([name], float(depth()))
        yield family


def error_type(exc: BaseException) -> str:
    """A reconcile error's ``error_type``: the API's reason (Conflict, NotFound, ...), else the exception's class."""
    if isinstance(exc, ApiError):
        reason = getattr(exc.status, "reason", None)
        if reason:
            return jobshapes.word(reason, type(exc).__name__)
    return type(exc).__name__


@dataclass
class _Reconciles:
    """One job's reconcile count by result, errors by type, and time histogram (cumulative buckets)."""

    results: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    buckets: list[int] = field(default_factory=lambda: [0] * (len(RECONCILE_BUCKETS) + 1))
    seconds: float = 0.0

    def add(self, seconds: float, result: str, error: str | None) -> None:
        self.results[result] = self.results.get(result, 0) + 1
        if error is not None:
            self.errors[error] = self.errors.get(error, 0) + 1
        self.seconds += seconds
        for i, bound in enumerate((*RECONCILE_BUCKETS, float("inf"))):
            if seconds <= bound:
                self.buckets[i] += 1


@dataclass
class _Job:
    """What was last observed of one job, and what its counters have seen of it."""

    kind: str
    namespace: str
    name: str
    uid: str
    root: str  # the controlling job's uid, else its own: jobs of one root count once
    created: datetime | None
    first_reconciled: datetime | None
    sample: JobSample
    seen_unfinished: bool = False
    ended: datetime | None = None  # when retention starts: it ended (or was first seen ended)
    version: str = ""  # the resourceVersion ``sample`` was taken from
    reconciles: _Reconciles = field(default_factory=_Reconciles)

    @property
    def labels(self) -> list[str]:
        return [self.namespace, self.name, self.kind]


def _earliest_transition(status: Mapping[str, Any]) -> datetime | None:
    times = [jobshapes.time_of(c.get("lastTransitionTime")) for c in status.get("conditions") or []]
    return min((t for t in times if t is not None), default=None)


def _root(metadata: Mapping[str, Any]) -> str:
    controller = next((r for r in metadata.get("ownerReferences") or [] if r.get("controller")), None)
    return str((controller or metadata).get("uid") or "")


class _JobSeries(Collector):
    """Seed 004's per-job gauges, ``trainingjob_total`` and per-job reconcile series, made at scrape time."""

    def __init__(self, clock: Callable[[], datetime], retention: timedelta) -> None:
        self.clock = clock
        self.retention = retention
        self.jobs: dict[tuple[str, str, str], _Job] = {}
        self._per_root: dict[str, int] = {}  # jobs of each root: whether a root has any left is a look

    def add(self, key: tuple[str, str, str], job: _Job) -> None:
        self.jobs[key] = job
        self._per_root[job.root] = self._per_root.get(job.root, 0) + 1

    def remove(self, key: tuple[str, str, str]) -> _Job | None:
        """Forget the job at ``key``; returns it, if it was known."""
        gone = self.jobs.pop(key, None)
        if gone is not None:
            left = self._per_root[gone.root] - 1
            if left:
                self._per_root[gone.root] = left
            else:
                del self._per_root[gone.root]
        return gone

    def holds_root(self, root: str) -> bool:
        return root in self._per_root

    def shown(self, now: datetime) -> Iterator[_Job]:
        for job in list(self.jobs.values()):
            if job.ended is None or now < job.ended + self.retention:
                yield job

    def collect(self) -> Iterable[Metric]:
        now = self.clock()
        labels = list(JOB_LABELS)
        gauges = {
            attr: GaugeMetricFamily(f"trainingjob_{name}", doc, labels=labels)
            for attr, name, doc in (
                ("progress", "progress_percent", "Training progress of the job, 0 to 100"),
                ("epoch", "current_epoch", "Epochs the job's training has completed"),
                ("loss", "loss", "Latest loss the job's training reported"),
                ("accuracy", "accuracy", "Latest accuracy the job's training reported"),
                ("workers", "allocated_workers", "Replicas of the job while it runs (0 once finished or suspended)"),
                ("gpus", "allocated_gpus", "nvidia.com/gpu limits of the job's replicas while it runs"),
            )
        }
        duration = GaugeMetricFamily(
            "trainingjob_duration_seconds", "Time since the job started, until it ended", labels=[*labels, "state"]
        )
        results = CounterMetricFamily(
            "trainingjob_reconciliation", "Reconciles of the job by result", labels=[*labels, "result"]
        )
        errors = CounterMetricFamily(
            "trainingjob_reconciliation_errors", "Failed reconciles of the job by error", labels=[*labels, "error_type"]
        )
        times = HistogramMetricFamily(
            "trainingjob_reconciliation_duration_seconds", "Time per reconcile of the job", labels=labels
        )
        for job in self.shown(now):
            sample = job.sample
            idle = sample.state in jobshapes.IDLE
            for attr, family in gauges.items():
                value = getattr(sample, attr)
                if attr in ("workers", "gpus") and value is not None and idle:
                    value = 0
                if value is not None:
                    family.add_metric(job.labels, float(value))
            started = sample.started or job.created
            if started is not None:
                seconds = ((sample.finished or now) - started).total_seconds()
                duration.add_metric([*job.labels, sample.state], max(seconds, 0.0))
            rec = job.reconciles
            for result, count in sorted(rec.results.items()):
                results.add_metric([*job.labels, result], count)
            for kind, count in sorted(rec.errors.items()):
                errors.add_metric([*job.labels, kind], count)
            if rec.results:
                bounds = [*(str(b) for b in RECONCILE_BUCKETS), "+Inf"]
                times.add_metric(job.labels, list(zip(bounds, map(float, rec.buckets), strict=True)), rec.seconds)
        yield from gauges.values()
        yield duration
        yield self.by_state()
        yield results
        yield errors
        yield times

    def by_state(self) -> GaugeMetricFamily:
        """Jobs that exist by namespace and state; jobs of one root count once, as the controlling job."""
        roots: dict[str, _Job] = {}
        for key in sorted(self.jobs):
            job = self.jobs[key]
            if job.root not in roots or job.uid == job.root:
                roots[job.root] = job
        counts: dict[tuple[str, str], int] = {}
        for job in roots.values():
            counts[job.namespace, job.sample.state] = counts.get((job.namespace, job.sample.state), 0) + 1
        family = GaugeMetricFamily("trainingjob_total", "Training jobs by state", labels=["namespace", "state"])
        for (namespace, state), count in sorted(counts.items()):
            family.add_metric([namespace, state], count)
        return family


class OperatorMetrics:
    def __init__(
        self,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        retention: timedelta = RETENTION,
        started: datetime | None = None,
    ) -> None:
        """``clock`` times the series at scrape; ``started`` (default: now) is when this operator
        began, which decides what a predecessor already counted."""
        self.registry = CollectorRegistry(auto_describe=True)
        # Second precision: object timestamps have no fraction.
        self.started = (started or clock()).replace(microsecond=0)
        self._kinds: dict[str, str] = {}
        self._series = _JobSeries(clock, retention)
        self.registry.register(self._series)
        self._lifecycle = {
            "created": Counter("trainingjob_created", "Training jobs created", ["namespace"], registry=self.registry),
            "completed": Counter(
                "trainingjob_completed",
                "Training jobs that ended, by result (succeeded, failed)",
                ["namespace", "result"],
                registry=self.registry,
            ),
            "failed": Counter(
                "trainingjob_failed",
                "Training jobs that failed, by reason",
                ["namespace", "reason"],
                registry=self.registry,
            ),
        }
        self._counted: dict[str, set[str]] = {"created": set(), "finished": set()}
        job_labels = ["job_namespace", "framework"]
        self._jobs = {
            event: Counter(
                f"training_operator_jobs_{event}",
                f"Counts number of jobs {event}",
                job_labels,
                registry=self.registry,
            )
            for event in ("created", "deleted", "successful", "failed", "restarted")
        }
        self.reconcile_total = Counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=self.registry,
        )
        self.reconcile_errors = Counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=self.registry,
        )
        self.reconcile_time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=self.registry,
        )
        self.leader = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease.",
            ["name"],
            registry=self.registry,
        )
        self._depth = _QueueDepth()
        self.registry.register(self._depth)
        self.rest_requests = Counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "host", "method"],
            registry=self.registry,
        )
        self.rest_request_duration = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_CLIENT_BUCKETS,
            registry=self.registry,
        )
        self._api_series: dict[tuple[str, str, str], tuple[Any, Any]] = {}
        self.rest_rate_limiter_duration = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Client side rate limiter latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_CLIENT_BUCKETS,
            registry=self.registry,
        )

    # -- job events ------------------------------------------------------------------------------

    def status_written(
        self, kind: str, namespace: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]
    ) -> None:
        """Count the job events a status write made: conditions it turned True."""
        became_true = true_conditions(after) - true_conditions(before)
        for ctype in sorted(became_true):
            event = _TRANSITIONS.get(ctype)
            if event is not None:
                self._jobs[event].labels(namespace, framework_label(kind)).inc()

    def job_deleted(self, kind: str, namespace: str) -> None:
        """The operator deleted a finished job (``ttlSecondsAfterFinished``)."""
        self._jobs["deleted"].labels(namespace, framework_label(kind)).inc()

    # -- the controllers -------------------------------------------------------------------------

    def reconciled(
        self,
        controller: str,
        seconds: float,
        result: str,
        key: tuple[str, str] | None = None,
        error: BaseException | None = None,
    ) -> None:
        """One reconcile: ``result`` is ``success``, ``error``, ``requeue_after``; ``key`` the job's
        (namespace, name), counted in its per-job series too once the job has been observed."""
        self.reconcile_time.labels(controller).observe(seconds)
        self.reconcile_total.labels(controller, result).inc()
        if result == "error":
            self.reconcile_errors.labels(controller).inc()
        kind = self._kinds.get(controller)
        job = self._series.jobs.get((kind, *key)) if kind is not None and key is not None else None
        if job is not None:
            job.reconciles.add(seconds, result, error_type(error) if error is not None else None)

    def observer(self, controller: str) -> Callable[[str, float, tuple[str, str], BaseException | None], None]:
        """What a controller kit's worker reports each pass to (``kit.worker.Observe``)."""

        def observe(result: str, seconds: float, key: tuple[str, str], error: BaseException | None) -> None:
            self.reconciled(controller, seconds, result, key, error)

        return observe

    # -- seed 004's per-job series ---------------------------------------------------------------

    def observe_job(self, job: Mapping[str, Any], now: datetime) -> None:
        """Take what a job (of any kind a family of ``api.families`` serves; others are ignored) shows now."""
        metadata = job.get("metadata") or {}
        key = (str(job.get("kind") or ""), str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))
        uid = str(metadata.get("uid") or "")
        version = str(metadata.get("resourceVersion") or "")
        seen = self._series.jobs.get(key)
        if version and seen is not None and (seen.uid, seen.version) == (uid, version):
            return  # a version already taken: every pass after a write sees it again
        sample = families.sample(job)
        if sample is None or not metadata.get("name"):
            return
        if seen is not None and seen.uid != uid:  # deleted and made again under the same name
            self.forget_job(*key)
            seen = None
        if seen is None:
            seen = _Job(
                *key,
                uid=uid,
                root=_root(metadata) or uid,
                created=jobshapes.time_of(metadata.get("creationTimestamp")),
                first_reconciled=_earliest_transition(job.get("status") or {}),
                sample=sample,
            )
            self._series.add(key, seen)
            self._count_created(seen)
        seen.sample, seen.version = sample, version
        if not sample.terminal:
            seen.seen_unfinished, seen.ended = True, None
        elif seen.ended is None:
            seen.ended = min(sample.finished or now, now)
            self._count_finished(seen)

    def forget_job(self, kind: str, namespace: str, name: str) -> None:
        """The job is gone: its per-job series go now."""
        gone = self._series.remove((kind, namespace, name))
        if gone is not None and not self._series.holds_root(gone.root):
            for roots in self._counted.values():
                roots.discard(gone.root)

    def _count_created(self, job: _Job) -> None:
        if job.root in self._counted["created"]:
            return
        self._counted["created"].add(job.root)
        made_here = job.created is not None and job.created >= self.started
        if made_here or (job.first_reconciled is not None and job.first_reconciled >= self.started):
            self._lifecycle["created"].labels(job.namespace).inc()

    def _count_finished(self, job: _Job) -> None:
        if job.root in self._counted["finished"]:
            return
        self._counted["finished"].add(job.root)
        ended = job.sample.finished
        if not (job.seen_unfinished or (ended is not None and ended >= self.started)):
            return  # it ended before this operator started: a predecessor counted it
        failed = job.sample.state == jobshapes.FAILED
        self._lifecycle["completed"].labels(job.namespace, "failed" if failed else "succeeded").inc()
        if failed:
            self._lifecycle["failed"].labels(job.namespace, job.sample.failure_reason or "Unknown").inc()

    def watch_queue(self, name: str, depth: Callable[[], int], *, kind: str | None = None) -> None:
        """Report a controller's queue; ``kind``: the kind its keys name (for the per-job reconcile series)."""
        self._depth.queues[name] = depth
        if kind is not None:
            self._kinds[name] = kind

    # -- the API client --------------------------------------------------------------------------

    def api_request(self, verb: str, host: str, code: str, seconds: float) -> None:
        """One HTTP round trip of the API client: ``code`` is the status, or ``<error>`` when none came."""
        key = (verb, host, code)
        series = self._api_series.get(key)
        if series is None:  # ``labels`` checks and looks its arguments up on every call: once per key
            series = self._api_series[key] = (
                self.rest_requests.labels(code, host, verb),
                self.rest_request_duration.labels(verb, host),
            )
        series[0].inc()
        series[1].observe(seconds)

    def api_throttled(self, verb: str, host: str, seconds: float) -> None:
        """A request waited ``seconds`` for the client's rate limiter."""
        self.rest_rate_limiter_duration.labels(verb, host).observe(seconds)

    def leading(self, lease: str, value: bool) -> None:
        self.leader.labels(lease).set(1 if value else 0)

    def exposition(self) -> bytes:
        return bytes(prometheus_client.generate_latest(self.registry))
