"""The ``autoscaling/v2`` HorizontalPodAutoscaler the operator writes for elastic PyTorchJobs (§9).

Only the fields the operator sets or compares are modelled; every other field (``behavior``, the
status an autoscaler writes) is kept as read (``K8sModel``), so an HPA read back and written again
loses nothing. Metrics stay the user's ``MetricSpec`` dicts, copied verbatim from the job.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from trainyard.api.meta import K8sModel, TypedObject

API_VERSION = "autoscaling/v2"
KIND = "HorizontalPodAutoscaler"


class CrossVersionObjectReference(K8sModel):
    api_version: str | None = None
    kind: str = ""
    name: str = ""


class HorizontalPodAutoscalerSpec(K8sModel):
    scale_target_ref: CrossVersionObjectReference = Field(default_factory=CrossVersionObjectReference)
    min_replicas: int | None = None
    max_replicas: int = 0
    metrics: list[dict[str, Any]] | None = None


class HorizontalPodAutoscaler(TypedObject):
    spec: HorizontalPodAutoscalerSpec = Field(default_factory=HorizontalPodAutoscalerSpec)
