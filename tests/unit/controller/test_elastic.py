"""Elastic PyTorchJobs in the reconciler: the HorizontalPodAutoscaler ``elasticPolicy.metrics`` asks
for, against kubeflow-v1 reference §9 (and §6.1: reconciled on every pass, deleted while suspended).

HPAs observed here are written out as the API server returns them (JSON, camelCase, with its
defaults), independently of ``trainyard.frameworks.pytorch.elastic``.
"""

from __future__ import annotations

from typing import Any

import pytest
from job_builders import (
    DNS,
    NAME,
    NAMESPACE,
    NOW,
    OTHER_UID,
    job,
    owned_deleted,
    owned_written,
    owner_references,
    reconciled,
    stored_status,
)

from trainyard.api import PyTorchJob
from trainyard.api.autoscaling import HorizontalPodAutoscaler
from trainyard.controller import Observed, Plan
from trainyard.controller.children import is_rendezvous

HPA = "HorizontalPodAutoscaler"
CPU_50 = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
PODS_1 = {
    "type": "Pods",
    "pods": {"metric": {"name": "samples_per_second"}, "target": {"type": "AverageValue", "averageValue": "1000m"}},
}
PODS_1_CANONICAL = {
    "type": "Pods",
    "pods": {"metric": {"name": "samples_per_second"}, "target": {"type": "AverageValue", "averageValue": "1"}},
}
SERVER_DEFAULT_METRIC = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
}


def elastic_job(
    policy: dict[str, Any] | None, *, workers: int = 2, run_policy: dict[str, Any] | None = None
) -> PyTorchJob:
    extra: dict[str, Any] = {}
    if policy is not None:
        extra["elasticPolicy"] = policy
    if run_policy is not None:
        extra["runPolicy"] = run_policy
    return job(master=0, workers=workers, extra_spec=extra)


def stored_hpa(
    owner: PyTorchJob, spec: dict[str, Any], *, uid: str | None = None, **extra: Any
) -> HorizontalPodAutoscaler:
    body: dict[str, Any] = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": owner.name,
            "namespace": NAMESPACE,
            "uid": "hpa-uid",
            "resourceVersion": "41",
            "ownerReferences": owner_references(owner, uid),
        },
        "spec": spec,
        **extra,
    }
    return HorizontalPodAutoscaler.model_validate(body)


def target(name: str = NAME) -> dict[str, str]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": name}


def run(owner: PyTorchJob, hpa: HorizontalPodAutoscaler | None = None) -> Plan:
    return reconciled(Observed(owner, (), (), NOW, other_children=(hpa,) if hpa is not None else ()), settings=DNS)


# -- which jobs get one --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "policy",
    [None, {}, {"minReplicas": 1, "maxReplicas": 3}, {"rdzvBackend": "c10d", "maxRestarts": 3}],
    ids=["not-elastic", "elastic-empty", "elastic-bounds", "elastic-rdzv"],
)
def test_no_metrics_no_hpa(policy: dict[str, Any] | None) -> None:
    plan = run(elastic_job(policy))

    assert owned_written(plan, HPA) is None and owned_deleted(plan, HPA) is None
    assert any(o.kind == "Pod" for o in plan.create)  # the rest of the pass is untouched


@pytest.mark.parametrize(
    ("policy", "workers", "bounds"),
    [
        ({"minReplicas": 1, "maxReplicas": 4}, 2, (1, 4)),
        ({"maxReplicas": 3}, 2, (3, 3)),  # only max: min = max
        ({"minReplicas": 2}, 5, (2, 2)),  # only min: max = min
        ({}, 3, (3, 3)),  # neither: both = Worker replicas
    ],
    ids=["both", "only-max", "only-min", "neither"],
)
def test_first_pass_creates_the_hpa_with_defaulted_bounds(
    policy: dict[str, Any], workers: int, bounds: tuple[int, int]
) -> None:
    owner = elastic_job({**policy, "metrics": [CPU_50, PODS_1]}, workers=workers)

    plan = run(owner)

    assert owned_written(plan, HPA) is not None and owned_deleted(plan, HPA) is None
    assert owned_written(plan, HPA).to_dict() == {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "ownerReferences": owner_references(owner)},
        "spec": {
            "scaleTargetRef": target(),
            "minReplicas": bounds[0],
            "maxReplicas": bounds[1],
            "metrics": [CPU_50, PODS_1],
        },
    }
    # Pods are created in the same pass: the HPA does not gate anything.
    assert sum(o.kind == "Pod" and not is_rendezvous(o) for o in plan.create) == workers


def test_a_finished_job_still_has_its_hpa_reconciled() -> None:
    # Reference §6.1 step 1: the HPA is reconciled before the finished check; it goes with the job.
    body = elastic_job({"maxReplicas": 2, "metrics": [CPU_50]}).to_dict()
    body["status"] = stored_status("Succeeded")
    finished = PyTorchJob.model_validate(body)

    plan = run(finished)

    assert owned_written(plan, HPA) is not None and owned_written(plan, HPA).spec.max_replicas == 2


# -- an existing HPA -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metrics", "stored_metrics", "stored_min"),
    [
        ([CPU_50], [CPU_50], 1),
        # The API server may canonicalise quantities (1000m → 1): equal by value.
        ([PODS_1], [PODS_1_CANONICAL], 1),
        # `metrics: []` is non-nil: an HPA, which the server defaults to 80% CPU; not rewritten.
        ([], [SERVER_DEFAULT_METRIC], 1),
    ],
    ids=["same", "quantity-by-value", "server-defaulted-metrics"],
)
def test_an_hpa_that_matches_is_not_written(
    metrics: list[dict[str, Any]], stored_metrics: list[dict[str, Any]], stored_min: int
) -> None:
    owner = elastic_job({"minReplicas": 1, "maxReplicas": 4, "metrics": metrics})
    spec = {"scaleTargetRef": target(), "minReplicas": stored_min, "maxReplicas": 4, "metrics": stored_metrics}

    plan = run(owner, stored_hpa(owner, spec))

    assert owned_written(plan, HPA) is None and owned_deleted(plan, HPA) is None


@pytest.mark.parametrize(
    ("change", "field", "value"),
    [
        ({"maxReplicas": 9}, "maxReplicas", 4),
        ({"minReplicas": 3}, "minReplicas", 1),
        ({"metrics": [PODS_1]}, "metrics", [CPU_50]),
        ({"scaleTargetRef": target("someone-else")}, "scaleTargetRef", target()),
    ],
    ids=["max", "min", "metrics", "target"],
)
def test_an_hpa_that_differs_is_replaced_as_read(change: dict[str, Any], field: str, value: Any) -> None:
    owner = elastic_job({"minReplicas": 1, "maxReplicas": 4, "metrics": [CPU_50]})
    spec = {"scaleTargetRef": target(), "minReplicas": 1, "maxReplicas": 4, "metrics": [CPU_50], **change}
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 30}}

    plan = run(owner, stored_hpa(owner, {**spec, "behavior": behavior}, status={"currentReplicas": 2}))

    assert owned_written(plan, HPA) is not None and owned_deleted(plan, HPA) is None
    written = owned_written(plan, HPA).to_dict()
    assert written["metadata"]["resourceVersion"] == "41" and written["metadata"]["uid"] == "hpa-uid"
    assert written["spec"][field] == value
    assert written["spec"]["behavior"] == behavior  # what others set stays


# -- deleting it ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "run_policy", "have", "deleted"),
    [
        ({"maxReplicas": 2, "metrics": [CPU_50]}, {"suspend": True}, True, NAME),
        ({"maxReplicas": 2, "metrics": [CPU_50]}, {"suspend": True}, False, None),
        ({"maxReplicas": 2}, None, True, NAME),  # metrics removed: upstream leaves it behind
        (None, None, True, NAME),  # elasticPolicy removed
    ],
    ids=["suspended", "suspended-none-there", "metrics-removed", "elastic-removed"],
)
def test_an_hpa_the_job_does_not_want_is_deleted(
    policy: dict[str, Any] | None, run_policy: dict[str, Any] | None, have: bool, deleted: str | None
) -> None:
    owner = elastic_job(policy, run_policy=run_policy)
    stored = stored_hpa(owner, {"scaleTargetRef": target(), "minReplicas": 2, "maxReplicas": 2, "metrics": [CPU_50]})

    plan = run(owner, stored if have else None)

    assert owned_written(plan, HPA) is None and owned_deleted(plan, HPA) == deleted


def test_an_hpa_the_job_does_not_own_is_neither_replaced_nor_deleted() -> None:
    owner = elastic_job({"maxReplicas": 3, "metrics": [CPU_50]})
    foreign = stored_hpa(owner, {"scaleTargetRef": target(), "maxReplicas": 1}, uid=OTHER_UID)
    suspended = elastic_job({"maxReplicas": 3, "metrics": [CPU_50]}, run_policy={"suspend": True})

    for who in (owner, suspended):
        plan = run(who, foreign)
        assert owned_written(plan, HPA) is None and owned_deleted(plan, HPA) is None


@pytest.mark.parametrize(
    "owner",
    [
        job(master=0, extra_spec={"elasticPolicy": {"maxReplicas": 2, "metrics": [CPU_50]}}, deleting=True),
        job(
            master=0,
            extra_spec={
                "elasticPolicy": {"maxReplicas": 2, "metrics": [CPU_50]},
                "runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"},
            },
        ),
    ],
    ids=["being-deleted", "managed-by-someone-else"],
)
def test_jobs_the_operator_does_not_reconcile_get_no_hpa(owner: PyTorchJob) -> None:
    assert run(owner) == Plan()
