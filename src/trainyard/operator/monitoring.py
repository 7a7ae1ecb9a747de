"""``deploy/monitoring/``: a Grafana dashboard, seed 004's alert rules and a ServiceMonitor, from the code.

``manifests.render`` writes them beside the rest of ``deploy/`` (``kubectl apply -k
deploy/monitoring`` on a cluster running the Prometheus Operator and Grafana's dashboard sidecar).
Every query names only series ``metrics.OperatorMetrics`` exports: upstream's
(``training_operator_*``, ``controller_runtime_*``, ``workqueue_depth``) and seed 004's
``trainingjob_*`` (tests/unit/operator/test_monitoring_manifests.py checks the names against the
operator's registry, so a renamed series breaks the test rather than a panel).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import yaml

DASHBOARD_UID = "trainyard-training-jobs"
RULES_NAME = "training-operator-rules"
DASHBOARD_CONFIGMAP = "training-operator-dashboard"

# Grafana template variables every per-job query filters by.
JOB = 'namespace=~"$namespace", kind=~"$kind", training_job=~"$training_job"'
NS = 'namespace=~"$namespace"'

_RULES_NOTES = """\
# Seed 004's alert rules, and what a training platform pages on. TrainingJobFailed counts failures
# of the last 10 minutes: the seed's `trainingjob_failed_total > 0` would fire for ever after the first.
# Seed 004's HighGPUIdleTime (trainingjob_gpu_utilization_percent < 50 for 10m) is not here: the
# operator sees pods, not GPUs, so it exports no utilization series. On a cluster with NVIDIA's DCGM
# exporter the same alert reads DCGM_FI_DEV_GPU_UTIL (per GPU, labelled with the pod):
#   avg by (namespace, pod) (DCGM_FI_DEV_GPU_UTIL) < 50   for: 10m
# The PrometheusRule's labels must match your Prometheus' ruleSelector (kube-prometheus-stack:
# release: <its release name>); add them with a kustomize patch.
"""


# -- the dashboard ---------------------------------------------------------------------------------

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _target(expr: str, legend: str, ref: str) -> dict[str, Any]:
    return {"datasource": _DATASOURCE, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}


def _panel(
    kind: str,
    title: str,
    grid: tuple[int, int, int, int],
    targets: list[tuple[str, str]],
    *,
    unit: str = "short",
    description: str = "",
    **defaults: Any,
) -> dict[str, Any]:
    """A panel of ``kind`` at ``grid`` (x, y, w, h), one query per (expr, legend); ids come later."""
    x, y, w, h = grid
    return {
        "type": kind,
        "title": title,
        "description": description,
        "datasource": _DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit, **defaults}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
        "targets": [_target(expr, legend, chr(ord("A") + i)) for i, (expr, legend) in enumerate(targets)],
    }


def _row(title: str, y: int) -> dict[str, Any]:
    return {
        "type": "row",
        "title": title,
        "collapsed": False,
        "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
        "panels": [],
    }


def _variable(name: str, label: str, query: str, *, include_all: bool = True) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": _DATASOURCE,
        "query": {"query": query, "refId": f"{name}-values"},
        "definition": query,
        "refresh": 2,  # on time range change: jobs come and go
        "includeAll": include_all,
        "multi": True,
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
    }


def _panels() -> list[dict[str, Any]]:
    job_legend = "{{namespace}}/{{training_job}} ({{kind}})"
    rate = "[$__rate_interval]"
    return [
        _row("Training jobs", 0),
        _panel(
            "stat",
            "Jobs by state",
            (0, 1, 8, 6),
            [(f"sum by (state) (trainingjob_total{{{NS}}})", "{{state}}")],
            description="Jobs that exist, by state (a TrainingJob and the job it compiles to count once).",
        ),
        _panel(
            "timeseries",
            "Jobs by state over time",
            (8, 1, 8, 6),
            [(f"sum by (state) (trainingjob_total{{{NS}}})", "{{state}}")],
        ),
        _panel(
            "timeseries",
            "Created, completed and failed",
            (16, 1, 8, 6),
            [
                (f"sum(increase(trainingjob_created_total{{{NS}}}{rate}))", "created"),
                (f"sum by (result) (increase(trainingjob_completed_total{{{NS}}}{rate}))", "completed: {{result}}"),
                (f"sum by (reason) (increase(trainingjob_failed_total{{{NS}}}{rate}))", "failed: {{reason}}"),
            ],
        ),
        _row("Training progress", 7),
        _panel(
            "timeseries",
            "Training progress over time",
            (0, 8, 12, 8),
            [(f"trainingjob_progress_percent{{{JOB}}}", job_legend)],
            unit="percent",
            min=0,
            max=100,
        ),
        _panel("timeseries", "Current epoch", (12, 8, 12, 8), [(f"trainingjob_current_epoch{{{JOB}}}", job_legend)]),
        _panel(
            "timeseries",
            "Loss",
            (0, 16, 12, 8),
            [(f"trainingjob_loss{{{JOB}}}", job_legend)],
            description="The latest loss each job's training reported (trainyard.runtime.report).",
        ),
        _panel(
            "timeseries",
            "Accuracy",
            (12, 16, 12, 8),
            [(f"trainingjob_accuracy{{{JOB}}}", job_legend)],
            unit="percentunit",
        ),
        _panel(
            "timeseries",
            "Job duration",
            (0, 24, 12, 8),
            [(f"trainingjob_duration_seconds{{{JOB}}}", "{{namespace}}/{{training_job}} ({{kind}}, {{state}})")],
            unit="s",
        ),
        _panel(
            "timeseries",
            "Allocated workers and GPUs",
            (12, 24, 12, 8),
            [
                (f"sum by (namespace) (trainingjob_allocated_workers{{{JOB}}})", "workers {{namespace}}"),
                (f"sum by (namespace) (trainingjob_allocated_gpus{{{JOB}}})", "GPUs {{namespace}}"),
            ],
            description="Replicas and nvidia.com/gpu limits of the jobs that run (finished and suspended ones hold "
            "none). GPU utilization is not the operator's to know: see NVIDIA's DCGM exporter.",
        ),
        _row("Operator", 32),
        _panel(
            "timeseries",
            "Reconcile time (p50, p99)",
            (0, 33, 8, 8),
            [
                (
                    f"histogram_quantile(0.5, sum by (le, controller) "
                    f"(rate(controller_runtime_reconcile_time_seconds_bucket{rate})))",
                    "p50 {{controller}}",
                ),
                (
                    f"histogram_quantile(0.99, sum by (le, controller) "
                    f"(rate(controller_runtime_reconcile_time_seconds_bucket{rate})))",
                    "p99 {{controller}}",
                ),
            ],
            unit="s",
        ),
        _panel(
            "timeseries",
            "Reconciles and errors",
            (8, 33, 8, 8),
            [
                (
                    f"sum by (controller, result) (rate(controller_runtime_reconcile_total{rate}))",
                    "{{controller}} {{result}}",
                ),
                (
                    f"sum by (controller) (rate(controller_runtime_reconcile_errors_total{rate}))",
                    "errors {{controller}}",
                ),
            ],
            unit="ops",
        ),
        _panel(
            "timeseries",
            "Work queue depth",
            (16, 33, 8, 8),
            [("workqueue_depth", "{{name}}")],
        ),
        _panel(
            "timeseries",
            "Slowest jobs to reconcile (p90)",
            (0, 41, 12, 8),
            [
                (
                    f"topk(5, histogram_quantile(0.9, sum by (le, namespace, training_job, kind) "
                    f"(rate(trainingjob_reconciliation_duration_seconds_bucket{{{JOB}}}{rate}))))",
                    job_legend,
                )
            ],
            unit="s",
        ),
        _panel(
            "timeseries",
            "Reconcile errors by job",
            (12, 41, 12, 8),
            [
                (
                    f"sum by (namespace, training_job, error_type) "
                    f"(increase(trainingjob_reconciliation_errors_total{{{JOB}}}{rate}))",
                    "{{namespace}}/{{training_job}} {{error_type}}",
                )
            ],
        ),
    ]


def dashboard() -> dict[str, Any]:
    """Grafana's dashboard model (schemaVersion 39): import it, or let the sidecar load the ConfigMap."""
    panels = _panels()
    for number, panel in enumerate(panels, start=1):
        panel["id"] = number
    per_job = "trainingjob_duration_seconds"
    return {
        "uid": DASHBOARD_UID,
        "title": "trainyard: training jobs",
        "description": "Seed 004's training job panels from the trainyard operator's /metrics "
        "(generated by python -m trainyard.operator.manifests).",
        "tags": ["trainyard", "kubeflow", "training"],
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "timezone": "browser",
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "annotations": {"list": []},
        "links": [],
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "label": "Data source",
                    "type": "datasource",
                    "query": "prometheus",
                    "current": {},
                    "hide": 0,
                },
                _variable("namespace", "Namespace", "label_values(trainingjob_total, namespace)"),
                _variable("kind", "Kind", f"label_values({per_job}{{{NS}}}, kind)"),
                _variable(
                    "training_job",
                    "Training job",
                    f'label_values({per_job}{{{NS}, kind=~"$kind"}}, training_job)',
                ),
            ]
        },
        "panels": panels,
    }


# -- alerts and scraping -----------------------------------------------------------------------------


def _alert(name: str, expr: str, summary: str, description: str, severity: str, for_: str = "") -> dict[str, Any]:
    rule: dict[str, Any] = {"alert": name, "expr": expr}
    if for_:
        rule["for"] = for_
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description}
    return rule


def alert_rules() -> list[dict[str, Any]]:
    """Seed 004's TrainingJobFailed and the ones a training platform pages on."""
    job = "{{ $labels.namespace }}/{{ $labels.training_job }} ({{ $labels.kind }})"
    return [
        # Not the seed's `trainingjob_failed_total > 0`: a counter never goes down (_RULES_NOTES).
        _alert(
            "TrainingJobFailed",
            "sum by (namespace, reason) (increase(trainingjob_failed_total[10m])) > 0",
            "Training job failed",
            "{{ $value | humanize }} training job(s) in {{ $labels.namespace }} failed in the last 10 minutes "
            "({{ $labels.reason }}). kubectl describe the job for its events.",
            "warning",
        ),
        _alert(
            "TrainingJobStuckPending",
            'max by (namespace, training_job, kind) (trainingjob_duration_seconds{state="Pending"}) > 900',
            "Training job pending for 15 minutes",
            f"{job} has not started running for {{{{ $value | humanizeDuration }}}}: its pods cannot be scheduled "
            "(resources, gang size, quotas). kubectl describe its pods.",
            "warning",
            "1m",
        ),
        _alert(
            "TrainingJobStalled",
            "(changes(trainingjob_progress_percent[30m]) == 0 and trainingjob_progress_percent < 100)"
            " and on (namespace, training_job, kind) trainingjob_allocated_workers > 0",
            "Training job made no progress for 30 minutes",
            f"{job} runs but its reported progress has not moved for 30 minutes.",
            "warning",
            "5m",
        ),
        _alert(
            "TrainingJobReconcileErrors",
            "sum by (namespace, training_job, kind, error_type) "
            "(increase(trainingjob_reconciliation_errors_total[10m])) > 3",
            "The operator keeps failing to reconcile a training job",
            f"{job}: {{{{ $value | humanize }}}} failed reconciles ({{{{ $labels.error_type }}}}) in 10 minutes. "
            "See the operator's log.",
            "warning",
            "10m",
        ),
        _alert(
            "TrainingOperatorReconcileErrors",
            "sum by (controller) (rate(controller_runtime_reconcile_errors_total[5m]))"
            " / sum by (controller) (rate(controller_runtime_reconcile_total[5m])) > 0.1",
            "Training operator reconcile errors above 10%",
            "{{ $labels.controller }}: {{ $value | humanizePercentage }} of reconciles fail. See the operator's log.",
            "critical",
            "15m",
        ),
    ]


def prometheus_rule(namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": RULES_NAME, "namespace": namespace, "labels": dict(labels)},
        "spec": {"groups": [{"name": "trainingjob", "rules": alert_rules()}]},
    }


def service_monitor(
    namespace: str, labels: Mapping[str, str], selector: Mapping[str, str], port: str
) -> dict[str, Any]:
    """Scrapes the operator's Service on its metrics port (the Prometheus Operator's way of finding it)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "training-operator", "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "namespaceSelector": {"matchNames": [namespace]},
            "endpoints": [{"port": port, "path": "/metrics", "interval": "30s"}],
        },
    }


def files(
    header: str, *, namespace: str, labels: Mapping[str, str], selector: Mapping[str, str], port: str
) -> dict[str, str]:
    """``deploy/monitoring/``'s files, relative to ``deploy/``."""

    def dump(doc: dict[str, Any]) -> str:
        # Wide: a PromQL expression reads best on one line.
        return yaml.safe_dump(doc, sort_keys=False, width=1 << 16)

    kustomization = {
        "resources": ["prometheusrule.yaml", "servicemonitor.yaml"],
        "configMapGenerator": [
            {
                "name": DASHBOARD_CONFIGMAP,
                "namespace": namespace,
                "files": ["grafana-dashboard.json"],
                # Grafana's dashboard sidecar (kube-prometheus-stack) loads ConfigMaps with this label.
                "options": {"disableNameSuffixHash": True, "labels": {"grafana_dashboard": "1", **labels}},
            }
        ],
    }
    return {
        "monitoring/grafana-dashboard.json": json.dumps(dashboard(), indent=2) + "\n",
        "monitoring/prometheusrule.yaml": header + _RULES_NOTES + dump(prometheus_rule(namespace, labels)),
        "monitoring/servicemonitor.yaml": header + dump(service_monitor(namespace, labels, selector, port)),
        "monitoring/kustomization.yaml": header + dump(kustomization),
    }
