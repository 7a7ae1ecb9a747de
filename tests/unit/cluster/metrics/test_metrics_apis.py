"""The metrics APIs' answers: the node's measurement of a real process, metrics-server's PodMetrics
and NodeMetrics from it, a job's reported metric as an Object metric, Kueue's queue depth."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from trainyard.api.meta import Obj
from trainyard.cluster.clients.metrics import custom, resource
from trainyard.cluster.clients.node.resourcestats import ResourceStats, resolution_from_env
from trainyard.cluster.clients.node.runs import ContainerRun, PodRun
from trainyard.cluster.clients.node.runtime.shims import Handle
from trainyard.cluster.server.apiserver.requests.selectors import parse_label_selector
from trainyard.kit.informer import Informer

NOW = datetime(2026, 1, 1, 12, tzinfo=UTC)
SPIN = "import time\nx = bytearray(8 << 20)\nend = time.time() + 30\nwhile time.time() < end: pass"


@dataclass
class Query:
    namespace: str | None
    path: tuple[str, ...]
    labels: Any = None
    metric_labels: Any = None
    query: Any = None


def busy_container(tmp_path: Path) -> tuple[subprocess.Popen[bytes], PodRun]:
    """A real process in a session of its own, as a shim starts a container, spinning for CPU."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nx = bytearray(8 << 20)\nend = time.time() + 30\nwhile time.time() < end: pass",
        ],
        start_new_session=True,
    )
    handle = Handle(tmp_path / "state.json", {"pid": proc.pid, "startedAt": time.time()})
    run = PodRun("ns", "p", "uid-1", containers=[ContainerRun("main", "python", process=handle)])
    return proc, run


def test_the_node_measures_its_containers_cpu_and_memory(tmp_path: Path) -> None:
    proc, run = busy_container(tmp_path)
    try:
        stats = ResourceStats("node-a", lambda: [run], resolution=1.0)

        def measured() -> Any:
            # CPU is the time used between two passes: sample until a pass has seen it spin.
            stats.sample()
            found = [c for p in stats.pods for c in p.containers]
            return found and found[0].nano_cores > 50_000_000 and found[0]

        deadline = time.monotonic() + 30
        usage = measured()
        while not usage and time.monotonic() < deadline:
            usage = measured()
        assert usage, "a spinning process, on a busy machine: well over 5% of a core"
        assert len(stats.pods) == 1
        assert usage.memory_bytes > 8 << 20
        summary = stats.summary()
        assert summary["node"]["cpu"]["usageNanoCores"] == usage.nano_cores
        assert summary["pods"][0]["podRef"] == {"name": "p", "namespace": "ns", "uid": "uid-1"}
    finally:
        proc.kill()
        proc.wait()


def test_an_idle_node_reads_nothing() -> None:
    stats = ResourceStats("node-a", lambda: [])
    stats.sample()
    assert stats.pods == [] and stats.summary()["node"]["cpu"]["usageNanoCores"] == 0
    assert resolution_from_env({}) == 15.0 and resolution_from_env({"TRAINYARD_METRIC_RESOLUTION": "2s"}) == 2.0
    with pytest.raises(ValueError, match="positive"):
        resolution_from_env({"TRAINYARD_METRIC_RESOLUTION": "0"})


def summary() -> Obj:
    at = "2026-01-01T12:00:00Z"
    container = {
        "name": "main",
        "cpu": {"time": at, "usageNanoCores": 12345, "window": 15.002},
        "memory": {"time": at, "workingSetBytes": 1234 * 1024},
    }
    return {
        "node": {
            "nodeName": "node-a",
            "cpu": {"time": at, "usageNanoCores": 12345, "window": 15.0},
            "memory": {"time": at, "workingSetBytes": 1234 * 1024},
        },
        "pods": [{"podRef": {"name": "p", "namespace": "ns", "uid": "uid-1"}, "containers": [container]}],
    }


def pods_informer() -> Informer:
    pods = Informer(None, object)  # type: ignore[arg-type]  # fed as its reflector would, never listed
    pods.mutated(
        {"metadata": {"name": "p", "namespace": "ns", "uid": "uid-1", "labels": {"app": "a"}, "resourceVersion": "1"}}
    )
    return pods


def test_pod_and_node_metrics_as_metrics_server_writes_them() -> None:
    api = resource.ResourceMetrics(lambda: [summary()], pods_informer())
    listed = asyncio.run(api.get(Query("ns", ("pods",), parse_label_selector("app=a"))))
    assert listed["kind"] == "PodMetricsList"
    (item,) = listed["items"]
    assert item["containers"] == [{"name": "main", "usage": {"cpu": "12345n", "memory": "1234Ki"}}]
    assert (item["window"], item["timestamp"], item["metadata"]["labels"]) == (
        "15.002s",
        "2026-01-01T12:00:00Z",
        {"app": "a"},
    )
    none = asyncio.run(api.get(Query("ns", ("pods",), parse_label_selector("app=b"))))
    assert none["items"] == []
    node = asyncio.run(api.get(Query(None, ("nodes", "node-a"), parse_label_selector(""))))
    assert (node["kind"], node["usage"], node["window"]) == (
        "NodeMetrics",
        {"cpu": "12345n", "memory": "1234Ki"},
        "15s",
    )
    with pytest.raises(LookupError, match=r'podmetrics\.metrics\.k8s\.io "q" not found'):
        asyncio.run(api.get(Query("ns", ("pods", "q"), parse_label_selector(""))))


def test_a_jobs_reported_metric_and_a_queue_depth() -> None:
    job = {"status": {"trainingProgress": {"metrics": {"queue_depth": 25, "loss": 0.25, "name": "x"}}}}
    assert custom.reported(job, "queue_depth") == 25
    assert custom.quantity(custom.reported(job, "loss") or 0) == "250m"
    assert custom.reported(job, "name") is None and custom.reported({}, "loss") is None
    workloads = Informer(None, object)  # type: ignore[arg-type]
    for i, (queue, reserved) in enumerate([("q", False), ("q", False), ("q", True), ("r", False)]):
        conditions = [{"type": "QuotaReserved", "status": "True"}] if reserved else []
        workloads.mutated(
            {
                "metadata": {"name": f"w{i}", "namespace": "ns", "resourceVersion": "1"},
                "spec": {"queueName": queue},
                "status": {"conditions": conditions},
            }
        )
    api = custom.ExternalMetrics(workloads, lambda: NOW)
    got = asyncio.run(api.get(Query("ns", ("kueue_pending_workloads",), parse_label_selector("queue_name=q"))))
    assert [(i["metricLabels"], i["value"]) for i in got["items"]] == [({"queue_name": "q"}, "2")]
    with pytest.raises(LookupError, match="could not find the metric other"):
        asyncio.run(api.get(Query("ns", ("other",), parse_label_selector(""))))


def test_pods_metrics_have_no_source() -> None:
    api = custom.CustomMetrics(None, lambda: NOW)  # type: ignore[arg-type]
    with pytest.raises(LookupError, match="the server could not find the metric throughput for pods"):
        asyncio.run(api.get(Query("ns", ("pods", "*", "throughput"), parse_label_selector(""))))
