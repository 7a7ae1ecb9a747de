"""The ``autoscaling/v2`` HorizontalPodAutoscaler the operator writes for elastic PyTorchJobs (§9).

Only the fields the operator sets or compares are modelled; every other field (``behavior``, the
status an autoscaler writes) is kept as read (``K8sModel``), so an HPA read back and written again
loses nothing. Metrics stay the user's ``MetricSpec`` dicts, copied verbatim from the job.

``scale_up_rules`` and ``scale_down_rules`` are autoscaling/v2's defaults of ``behavior``, shared by
the API server's defaulting and the autoscaler (an HPA stored before may lack them).
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


def scale_up_rules(rules: dict[str, Any] | None) -> dict[str, Any]:
    """``GenerateHPAScaleUpRules``: no stabilization, ``selectPolicy: Max``, 4 pods or 100% per 15 s."""
    out = dict(rules or {})
    if out.get("stabilizationWindowSeconds") is None:
        out["stabilizationWindowSeconds"] = 0
    out["selectPolicy"] = out.get("selectPolicy") or "Max"
    if not out.get("policies"):
        out["policies"] = [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ]
    return out


def scale_down_rules(rules: dict[str, Any] | None) -> dict[str, Any]:
    """``GenerateHPAScaleDownRules``: ``selectPolicy: Max``, 100% per 15 s; the stabilization window
    stays unset (the autoscaler's ``--horizontal-pod-autoscaler-downscale-stabilization`` fills it)."""
    out = dict(rules or {})
    out["selectPolicy"] = out.get("selectPolicy") or "Max"
    if not out.get("policies"):
        out["policies"] = [{"type": "Percent", "value": 100, "periodSeconds": 15}]
    return out
