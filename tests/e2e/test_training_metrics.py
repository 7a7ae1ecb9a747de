"""Seed 004's ``trainingjob_*`` series on the session plane's ``/metrics``, read by Prometheus' own parser.

A PyTorchJob whose one replica sleeps runs to the end; a suspended TrainJob (no pods) gets a
``trainerStatus`` written through the status subresource, as the Trainer status server writes it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from operator_process import sleeper_job
from prometheus_client.parser import text_string_to_metric_families

from conftest import Kubectl, eventually

pytestmark = pytest.mark.e2e

Samples = dict[str, list[tuple[dict[str, str], float]]]


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"tm-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def scrape(kubectl: Kubectl) -> Samples:
    found: Samples = {}
    for family in text_string_to_metric_families(kubectl("get", "--raw", "/metrics")):
        for s in family.samples:
            found.setdefault(s.name, []).append((s.labels, s.value))
    return found


def one(samples: Samples, name: str, **labels: str) -> float | None:
    values = [v for got, v in samples.get(name, []) if got == labels]
    assert len(values) <= 1, (name, labels, values)
    return values[0] if values else None


def test_the_operator_exports_per_job_training_series(kubectl: Kubectl, ns: str) -> None:
    job = sleeper_job("metered", workers=0, seconds=[0.2])
    trainjob: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "paused"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True, "trainer": {"numNodes": 2}},
    }
    for body in (job, trainjob):
        kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(body))
    metrics = [{"name": "loss", "value": "0.5"}, {"name": "epoch", "value": "2"}]
    reported = {"progressPercentage": 40, "metrics": metrics}
    patch = json.dumps({"status": {"trainerStatus": reported}})
    kubectl("patch", "trainjob", "paused", "-n", ns, "--subresource=status", "--type=merge", "-p", patch)

    pytorchjob = {"namespace": ns, "training_job": "metered", "kind": "PyTorchJob"}
    paused = {"namespace": ns, "training_job": "paused", "kind": "TrainJob"}

    def settled() -> Samples | None:
        samples = scrape(kubectl)
        done = one(samples, "trainingjob_completed_total", namespace=ns, result="succeeded") == 1
        return samples if done and one(samples, "trainingjob_progress_percent", **paused) == 40 else None

    samples = eventually(settled, timeout=120, what="the PyTorchJob's completion and the TrainJob's progress")
    assert one(samples, "trainingjob_created_total", namespace=ns) == 2
    assert one(samples, "trainingjob_total", namespace=ns, state="Completed") == 1
    assert one(samples, "trainingjob_total", namespace=ns, state="Suspended") == 1
    # startTime and completionTime have whole seconds: a job this short may well last "0 s"
    duration = one(samples, "trainingjob_duration_seconds", **pytorchjob, state="Completed")
    assert duration is not None and duration >= 0
    assert one(samples, "trainingjob_allocated_workers", **pytorchjob) == 0  # finished: holds nothing
    assert (one(samples, "trainingjob_reconciliation_total", **pytorchjob, result="success") or 0) >= 1
    assert (one(samples, "trainingjob_reconciliation_duration_seconds_count", **pytorchjob) or 0) >= 1
    assert one(samples, "trainingjob_loss", **paused) == 0.5
    assert one(samples, "trainingjob_current_epoch", **paused) == 2
    assert one(samples, "trainingjob_allocated_workers", **paused) == 0  # suspended
    # upstream's series are still there beside them
    assert one(samples, "training_operator_jobs_successful_total", job_namespace=ns, framework="pytorch") == 1

    kubectl("delete", "pytorchjob", "metered", "-n", ns)
    eventually(
        lambda: one(scrape(kubectl), "trainingjob_duration_seconds", **pytorchjob, state="Completed") is None,
        what="the deleted job's series to go",
    )
