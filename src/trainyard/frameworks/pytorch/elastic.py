"""Elastic PyTorchJobs: the HorizontalPodAutoscaler that ``elasticPolicy.metrics`` asks for (§9).

A PyTorchJob whose (defaulted) ``elasticPolicy`` has ``metrics`` owns an ``autoscaling/v2`` HPA
named after the job, scaling the job itself through its ``/scale`` subresource
(``Worker.replicas``) between ``minReplicas`` and ``maxReplicas``, with the metrics copied
verbatim (the engine makes the job its controller owner, so it is garbage-collected with the job).
``children`` is the PyTorch plugin's answer to ``Framework.children``:

* a suspended job wants none, so its HPA is deleted (and none created), as upstream;
* a job that no longer asks for one (metrics or elasticPolicy removed) wants none either, so its
  HPA is deleted; upstream leaves it behind, scaling a job that asked to stop being scaled.

The engine (``controller.childdiff``) creates, replaces and deletes it, comparing after the API
server's defaults. Nothing here scales anything: an autoscaler (kube-controller-manager's, or the
embedded plane's) does, from the metrics APIs, by writing the job's ``/scale`` (``Worker.replicas``
in the spec). The operator reconciles from that spec, so the count the autoscaler set is the one
it keeps, while the HPA's own spec (bounds, metrics) stays the job's ``elasticPolicy``: a hand
edit of the HPA is put back. Other kinds (PaddleJob's ``elasticPolicy.metrics`` included) get no
HPA, as upstream.
"""

from __future__ import annotations

from trainyard.api.autoscaling import (
    API_VERSION,
    KIND,
    CrossVersionObjectReference,
    HorizontalPodAutoscaler,
    HorizontalPodAutoscalerSpec,
)
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.pytorch import PyTorchJob
from trainyard.api.meta import ObjectMeta
from trainyard.frameworks.base import ChildKind

HPA = ChildKind(
    API_VERSION,
    KIND,
    "horizontalpodautoscalers",
    purpose="elasticPolicy.metrics: one autoscaling/v2 HPA per elastic job",
)


def children(job: PyTorchJob, info: KindInfo) -> tuple[HorizontalPodAutoscaler, ...]:
    """The HPA a (defaulted) job wants now: one while it asks for metrics and is not suspended."""
    policy = job.spec.elastic_policy
    if policy is None or policy.metrics is None or job.run_policy.suspend:
        return ()
    return (hpa(job, info),)


def hpa(job: PyTorchJob, info: KindInfo) -> HorizontalPodAutoscaler:
    """The HPA a (defaulted) elastic job with metrics asks for, as upstream's ``desiredHPA``."""
    elastic = job.spec.elastic_policy
    assert elastic is not None and elastic.max_replicas is not None  # defaulting sets both bounds
    return HorizontalPodAutoscaler(
        api_version=API_VERSION,
        kind=KIND,
        metadata=ObjectMeta(name=job.name),
        spec=HorizontalPodAutoscalerSpec(
            scale_target_ref=CrossVersionObjectReference(
                api_version=job.api_version or info.api_version, kind=job.kind or info.kind, name=job.name
            ),
            min_replicas=elastic.min_replicas,
            max_replicas=elastic.max_replicas,
            metrics=[dict(m) for m in elastic.metrics or []],
        ),
    )
