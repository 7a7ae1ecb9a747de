"""What a job's page offers: suspend or resume by its family's field, scale where its CRD serves the
scale subresource and the job is elastic (its policy's bounds), nothing but delete once it
finished; and the patch an action writes."""

from __future__ import annotations

from typing import Any

from trainyard.api import families
from trainyard.dashboard import actions, pages, views

CREATED = "2026-03-01T11:00:00Z"


def v1job(kind: str, prefix: str, *, suspend: bool = False, elastic: dict[str, int] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "runPolicy": {"suspend": suspend},
        f"{prefix}ReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 3}},
    }
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    conditions = [{"type": "Created", "status": "True", "lastTransitionTime": CREATED}]
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": kind,
        "metadata": {"name": "j", "namespace": "default", "uid": "u1", "creationTimestamp": CREATED},
        "spec": spec,
        "status": {"conditions": conditions},
    }


def finished(job: dict[str, Any], outcome: str = "Succeeded") -> dict[str, Any]:
    done = {"type": outcome, "status": "True", "lastTransitionTime": "2026-03-01T11:30:00Z"}
    return {**job, "status": {"conditions": [*job["status"]["conditions"], done]}}


def offered(job: dict[str, Any]) -> dict[str, Any]:
    return pages.actions(job, views.row(job))


def test_the_scalable_kinds_are_those_whose_crd_serves_scale() -> None:
    served = set()
    for crd in families.crds():
        spec = crd["spec"]
        if any((v.get("subresources") or {}).get("scale") for v in spec["versions"]):
            served.add((spec["group"], spec["names"]["plural"]))
    assert set(pages.scale_paths()) == served
    assert ("kubeflow.org", "pytorchjobs") in served, "an elastic PyTorchJob scales (as an HPA would)"
    assert ("kubeflow.org", "tfjobs") not in served
    assert ("trainer.kubeflow.org", "trainjobs") not in served


def test_a_running_elastic_job_offers_suspend_delete_and_scale_within_its_bounds() -> None:
    job = v1job("PyTorchJob", "pytorch", elastic={"minReplicas": 1, "maxReplicas": 4})
    assert offered(job) == {
        "suspend": True,
        "resume": False,
        "delete": True,
        "scale": {"replicas": 3, "min": 1, "max": 4},
    }


def test_a_scalable_kinds_job_without_an_elastic_policy_is_not_offered_scale() -> None:
    # a static world restarts as a whole gang at a new size
    assert offered(v1job("PyTorchJob", "pytorch"))["scale"] is None


def test_the_scale_reads_the_crds_own_replicas_path_and_open_bounds() -> None:
    job = v1job("PyTorchJob", "pytorch", elastic={})
    assert offered(job)["scale"] == {"replicas": 3, "min": None, "max": None}
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert offered(job)["scale"] == {"replicas": None, "min": None, "max": None}, "no Worker: nothing to read"


def test_a_kind_whose_crd_has_no_scale_offers_none() -> None:
    job = v1job("TFJob", "tf", elastic={"minReplicas": 1, "maxReplicas": 4})
    assert offered(job)["scale"] is None
    assert offered(job)["suspend"] is True


def test_a_suspended_job_offers_resume() -> None:
    job = v1job("PyTorchJob", "pytorch", suspend=True)
    found = offered(job)
    assert (found["suspend"], found["resume"], found["delete"]) == (False, True, True)


def test_a_finished_job_offers_only_delete() -> None:
    for outcome in ("Succeeded", "Failed"):
        job = finished(v1job("PyTorchJob", "pytorch", elastic={"minReplicas": 1, "maxReplicas": 4}), outcome)
        assert offered(job) == {"suspend": False, "resume": False, "delete": True, "scale": None}, outcome
        suspended = finished(v1job("PyTorchJob", "pytorch", suspend=True), outcome)
        assert offered(suspended)["resume"] is False, "a finished job is not resumed"


def test_a_trainjob_suspends_by_its_own_field() -> None:
    job: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default", "uid": "u2", "creationTimestamp": CREATED},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "suspend": True},
        "status": {},
    }
    assert offered(job) == {"suspend": False, "resume": True, "delete": True, "scale": None}
    job["spec"]["suspend"] = False
    assert offered(job)["suspend"] is True


def test_an_action_patches_the_nested_field_its_family_names() -> None:
    assert actions.nested("spec.runPolicy.suspend", True) == {"spec": {"runPolicy": {"suspend": True}}}
    assert actions.nested("spec.suspend", False) == {"spec": {"suspend": False}}
    assert actions.nested("spec", 1) == {"spec": 1}
    for family in families.FAMILIES.values():
        if family.view.suspend_field is None:
            continue  # a kind that cannot be suspended (Katib's Experiment) is offered no suspend
        patch = actions.nested(family.view.suspend_field, True)
        job: Any = {"apiVersion": "x/v1", "kind": next(iter(family.kinds())).kind, **patch}
        assert views.suspended(job), f"{family.name}: the patch sets what suspended() reads"
