"""The PyTorch plugin's owned children (``Framework.children``): the HPA of an elastic job with metrics.

How the HPA is created, replaced and deleted is the engine's (tests/unit/controller/test_elastic.py);
here only what the plugin wants and declares. Jobs are defaulted as the reconciler does.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api import PYTORCHJOB, PyTorchJob
from trainyard.api.defaults import apply_defaults
from trainyard.frameworks.base import ChildKind
from trainyard.frameworks.pytorch import PyTorch

PLUGIN = PyTorch()
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}


def job(elastic: dict[str, Any] | None, *, suspend: bool = False) -> PyTorchJob:
    worker = {"replicas": 2, "template": {"spec": {"containers": [{"name": "pytorch", "image": "pytorch:2"}]}}}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Worker": worker}, "runPolicy": {"suspend": suspend}}
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    body = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "mnist"}, "spec": spec}
    return apply_defaults(PyTorchJob.model_validate(body), PYTORCHJOB)


def test_the_plugin_declares_the_hpa_kind_its_jobs_own() -> None:
    assert list(PLUGIN.child_kinds) == [
        ChildKind("autoscaling/v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
    ]
    assert PLUGIN.child_kinds[0].group == "autoscaling"


@pytest.mark.parametrize(
    ("elastic", "suspend"),
    [(None, False), ({"maxReplicas": 3}, False), ({"maxReplicas": 3, "metrics": [CPU]}, True)],
    ids=["not-elastic", "no-metrics", "suspended"],
)
def test_no_hpa_is_wanted(elastic: dict[str, Any] | None, suspend: bool) -> None:
    assert list(PLUGIN.children(job(elastic, suspend=suspend))) == []


def test_an_elastic_job_with_metrics_wants_one_hpa_named_after_it_scaling_it() -> None:
    (hpa,) = PLUGIN.children(job({"minReplicas": 1, "maxReplicas": 4, "metrics": [CPU]}))

    assert hpa.to_dict() == {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        # the engine adds the namespace and the job as controller owner
        "metadata": {"name": "mnist"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "mnist"},
            "minReplicas": 1,
            "maxReplicas": 4,
            "metrics": [CPU],
        },
    }
