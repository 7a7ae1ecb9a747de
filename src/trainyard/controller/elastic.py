"""Elastic PyTorchJobs: the HorizontalPodAutoscaler that ``elasticPolicy.metrics`` asks for (§9).

A PyTorchJob whose (defaulted) ``elasticPolicy`` has ``metrics`` gets an ``autoscaling/v2``
HPA named after the job, in its namespace, scaling the job itself through its ``/scale``
subresource (``Worker.replicas``) between ``minReplicas`` and ``maxReplicas``, with the metrics
copied verbatim and the job as controller owner (so it is garbage-collected with the job).
``autoscale`` runs after the rest of the pass and amends its plan:

* the HPA is created when missing, and replaced when its spec differs from the wanted one
  (compared after the API server's defaults, quantities by value, so a server that normalises
  ``1000m`` to ``1`` is not rewritten on every pass);
* a suspended job has its HPA deleted (and none created), as upstream;
* a job that no longer asks for one (metrics or elasticPolicy removed) has its HPA deleted;
  upstream leaves it behind, scaling a job that asked to stop being scaled;
* an HPA of the same name that the job does not own (a user's, or an older job's being
  garbage-collected) is left alone.

Nothing here scales anything: an autoscaler (kube-controller-manager) does, from a metrics
pipeline. Other kinds (PaddleJob's ``elasticPolicy.metrics`` included) get no HPA, as upstream.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainyard.api.autoscaling import (
    API_VERSION,
    KIND,
    CrossVersionObjectReference,
    HorizontalPodAutoscaler,
    HorizontalPodAutoscalerSpec,
)
from trainyard.api.common import TrainingJob
from trainyard.api.defaults import apply_defaults
from trainyard.api.kubeflow.pytorch import PyTorchJob
from trainyard.api.meta import ObjectMeta
from trainyard.controller.children import is_owned, owner_reference
from trainyard.controller.gang import quantity_value
from trainyard.controller.observed import Observed
from trainyard.controller.plan import Plan
from trainyard.frameworks.base import Framework

# kube-apiserver's default for an HPA written without metrics (autoscaling/v2 defaults).
_DEFAULT_METRICS: tuple[dict[str, Any], ...] = (
    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
)
_QUANTITY_KEYS = frozenset({"value", "averageValue"})


def autoscales(kind: str) -> bool:
    """Whether jobs of this kind can have an HPA (the operator watches HPAs only for those)."""
    return kind == "PyTorchJob"


def wants_hpa(job: TrainingJob) -> bool:
    """Whether the job asks for an HPA at all, suspended or not (the operator reads it then)."""
    if not isinstance(job, PyTorchJob) or job.spec.elastic_policy is None:
        return False
    return job.spec.elastic_policy.metrics is not None


def autoscale(observed: Observed, plugin: Framework, plan: Plan) -> Plan:
    """``plan`` (the rest of the pass) amended for the job's HPA; unchanged for other kinds.

    Only for jobs this operator manages and that are not being deleted (``reconcile`` sees to it).
    """
    raw = observed.job
    if not isinstance(raw, PyTorchJob):
        return plan
    job = apply_defaults(raw, plugin.info)
    have = observed.hpa
    ours = have if have is not None and is_owned(have, job) and have.metadata.deletion_timestamp is None else None
    wanted = hpa(job) if wants_hpa(job) and not job.run_policy.suspend else None
    if wanted is None:
        return dataclasses.replace(plan, delete_hpa=ours.name) if ours is not None else plan
    if have is not None and ours is None:
        return plan
    if ours is None:
        return dataclasses.replace(plan, hpa=wanted)
    if same_spec(ours.spec, wanted.spec):
        return plan
    # The HPA as read, with the fields the job decides replaced: its resourceVersion makes a
    # concurrent write a conflict (and a retry), and fields others set (``behavior``) stay.
    managed = {f: getattr(wanted.spec, f) for f in ("scale_target_ref", "min_replicas", "max_replicas", "metrics")}
    return dataclasses.replace(plan, hpa=ours.model_copy(update={"spec": ours.spec.model_copy(update=managed)}))


def hpa(job: PyTorchJob) -> HorizontalPodAutoscaler:
    """The HPA a (defaulted) elastic job with metrics asks for, as upstream's ``desiredHPA``."""
    elastic = job.spec.elastic_policy
    assert elastic is not None and elastic.max_replicas is not None  # defaulting sets both bounds
    return HorizontalPodAutoscaler(
        api_version=API_VERSION,
        kind=KIND,
        metadata=ObjectMeta(name=job.name, namespace=job.namespace, owner_references=[owner_reference(job)]),
        spec=HorizontalPodAutoscalerSpec(
            scale_target_ref=CrossVersionObjectReference(
                api_version=job.api_version or "kubeflow.org/v1", kind=job.kind or "PyTorchJob", name=job.name
            ),
            min_replicas=elastic.min_replicas,
            max_replicas=elastic.max_replicas,
            metrics=[dict(m) for m in elastic.metrics or []],
        ),
    )


def same_spec(have: HorizontalPodAutoscalerSpec, want: HorizontalPodAutoscalerSpec) -> bool:
    """Equal once both carry the API server's defaults, quantities compared by value.

    Only what the operator sets is compared: fields someone else added (``behavior``) stay.
    """
    return _normal(have) == _normal(want)


def _normal(spec: HorizontalPodAutoscalerSpec) -> dict[str, Any]:
    return {
        "scaleTargetRef": spec.scale_target_ref.to_dict(),
        "minReplicas": 1 if spec.min_replicas is None else spec.min_replicas,
        "maxReplicas": spec.max_replicas,
        "metrics": [_values(m) for m in (spec.metrics or _DEFAULT_METRICS)],
    }


def _values(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _values(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_values(v) for v in node]
    if key in _QUANTITY_KEYS and isinstance(node, str | int | float) and not isinstance(node, bool):
        try:
            return quantity_value(node)
        except ValueError:
            return node
    return node
