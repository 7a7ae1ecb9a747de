"""deploy/monitoring/: the Grafana dashboard and the PrometheusRule load, and query only series the operator exports."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainyard.operator.metrics import OperatorMetrics

MONITORING = Path(__file__).resolve().parents[3] / "deploy" / "monitoring"

# PromQL words that are not metric names; function names are told apart by the "(" after them.
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset"}
_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "gauge": ("",), "untyped": ("",)}


def exported() -> set[str]:
    """Every sample name the operator's registry can expose (families with no sample yet included)."""
    names = set()
    for family in OperatorMetrics().registry.collect():
        names |= {family.name + suffix for suffix in _SUFFIXES[family.type]}
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (with Grafana's $variables) reads."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings: label values
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)  # label lists
    text = re.sub(r"\$\{?\w+\}?", " ", text)
    found = re.findall(r"(?<![\w.$])([A-Za-z_:][\w:]*)\b(?!\s*\()", text)
    return {name for name in found if name not in KEYWORDS}


def dashboard() -> dict[str, Any]:
    return json.loads((MONITORING / "grafana-dashboard.json").read_text())


def rules() -> list[dict[str, Any]]:
    (rule,) = [d for d in yaml.safe_load_all((MONITORING / "prometheusrule.yaml").read_text()) if d]
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def panel_queries(board: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in board["panels"] for t in p.get("targets", [])]


def variable_queries(board: dict[str, Any]) -> list[str]:
    """The series selector inside each ``label_values(<selector>, <label>)`` variable query."""
    selectors = []
    for var in board["templating"]["list"]:
        if var["type"] == "query":
            match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", var["query"]["query"])
            assert match is not None, var
            selectors.append(match.group(1))
    return selectors


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (le, controller) (rate(a_seconds_bucket{x=~"$ns", y="b c"}[$__rate_interval]))', {"a_seconds_bucket"}),
        ("histogram_quantile(0.99, x_bucket) / on (ns) group_left y > 0.5", {"x_bucket", "y"}),
        ('(changes(p[30m]) == 0 and p < 100) and on (a, b) w{state="Pending"} > 900', {"p", "w"}),
        ("workqueue_depth", {"workqueue_depth"}),
    ],
)
def test_the_name_reader_finds_metric_names_only(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_the_operator_exports_the_seeds_series() -> None:
    names = exported()
    seed = {
        "trainingjob_reconciliation_total",
        "trainingjob_reconciliation_duration_seconds_bucket",
        "trainingjob_reconciliation_errors_total",
        "trainingjob_total",
        "trainingjob_progress_percent",
        "trainingjob_current_epoch",
        "trainingjob_duration_seconds",
        "trainingjob_allocated_gpus",
        "trainingjob_allocated_workers",
        "trainingjob_loss",
        "trainingjob_accuracy",
        "trainingjob_created_total",
        "trainingjob_completed_total",
        "trainingjob_failed_total",
    }
    assert seed <= names, seed - names
    assert {"training_operator_jobs_created_total", "controller_runtime_reconcile_time_seconds_bucket"} <= names


def test_the_dashboard_is_a_grafana_dashboard_of_exported_series() -> None:
    board = dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), ids
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert {"namespace", "training_job"} <= set(variables)
    cells: set[tuple[int, int]] = set()
    for panel in board["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        mine = {(grid["x"] + dx, grid["y"] + dy) for dx in range(grid["w"]) for dy in range(grid["h"])}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
        if panel["type"] != "row":
            assert panel["targets"] and panel["datasource"]["uid"] == "${datasource}", panel["title"]
    titles = " ".join(p["title"].lower() for p in board["panels"])
    for wanted in ("state", "progress", "loss", "accuracy", "duration", "workers", "reconcile time", "errors"):
        assert wanted in titles, wanted
    names = exported()
    for expr in panel_queries(board) + variable_queries(board):
        read = metric_names(expr)
        assert read and read <= names, f"{expr!r} reads {sorted(read - names)}, which the operator does not export"


def test_the_alert_rules_are_the_seeds_and_query_exported_series() -> None:
    found = rules()
    alerts = [r["alert"] for r in found]
    assert len(alerts) == len(set(alerts)), alerts
    assert "TrainingJobFailed" in alerts
    # HighGPUIdleTime needs a GPU utilization series; the operator has none (the file says why).
    gpu_series = "trainingjob_gpu_utilization_percent"
    assert ("HighGPUIdleTime" in alerts) == (gpu_series in exported())
    assert "HighGPUIdleTime" in (MONITORING / "prometheusrule.yaml").read_text()
    names = exported()
    for rule in found:
        assert rule["annotations"]["summary"] and rule["labels"]["severity"] in ("warning", "critical"), rule
        assert re.fullmatch(r"\d+[smh]", rule.get("for", "0s")), rule
        read = metric_names(rule["expr"])
        assert read and read <= names, f"{rule['alert']} reads {sorted(read - names)}"


def test_the_kustomization_names_files_that_exist() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    listed = kustomization["resources"] + [f for g in kustomization["configMapGenerator"] for f in g["files"]]
    assert all((MONITORING / name).is_file() for name in listed), listed
    (monitor,) = yaml.safe_load_all((MONITORING / "servicemonitor.yaml").read_text())
    assert monitor["kind"] == "ServiceMonitor" and monitor["spec"]["endpoints"][0]["path"] == "/metrics"
