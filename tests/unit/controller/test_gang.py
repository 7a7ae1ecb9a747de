"""Gang scheduling in the reconciler: the PodGroup a job asks for, its pods' decoration and the
pod-creation gate, against kubeflow-v1 reference §6.6 (both flavours, table-driven).

The PodGroups observed here are written out as the API server returns them (JSON, camelCase),
independently of ``trainyard.controller.gang``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from job_builders import (
    NAME,
    NAMESPACE,
    NOW,
    OTHER_UID,
    PLUGIN,
    UID,
    job,
    owned_deleted,
    owned_written,
    owner_references,
    pod,
    reconciled,
    replicas,
    stored_status,
    template,
)

from trainyard.api import PyTorchJob
from trainyard.api.meta import TypedObject
from trainyard.api.podgroup import PodGroup
from trainyard.controller import ControllerSettings, Observed, Plan, gang, reconcile
from trainyard.frameworks.network import NetworkMode
from trainyard.kit.plans import Event, EventType

PLUGINS = ControllerSettings(network_mode=NetworkMode.CLUSTER_DNS, gang_scheduler_name="scheduler-plugins-scheduler")
VOLCANO = ControllerSettings(network_mode=NetworkMode.CLUSTER_DNS, gang_scheduler_name="volcano")
OFF = ControllerSettings(network_mode=NetworkMode.CLUSTER_DNS)

GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_ANNOTATION = "volcano.sh/task-spec"
WRONG_SCHEDULER = Event(
    EventType.WARNING,
    "SetPodTemplateSchedulerName",
    "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten",
)


def gang_job(policy: dict[str, Any] | None = None, *, workers: int = 2, **kw: Any) -> PyTorchJob:
    extra = {"runPolicy": {"schedulingPolicy": policy}} if policy is not None else None
    return job(workers=workers, extra_spec=extra, **kw)


def group(
    owner: PyTorchJob,
    spec: dict[str, Any],
    *,
    volcano: bool = False,
    phase: str | None = None,
    uid: str | None = None,
) -> PodGroup:
    body: dict[str, Any] = {
        "apiVersion": "scheduling.volcano.sh/v1beta1" if volcano else "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": owner.name,
            "namespace": NAMESPACE,
            "uid": "pg-uid",
            "resourceVersion": "17",
            "ownerReferences": owner_references(owner, uid),
        },
        "spec": spec,
    }
    if phase is not None:
        body["status"] = {"phase": phase}
    return PodGroup.model_validate(body)


def gang_run(
    owner: PyTorchJob,
    settings: ControllerSettings,
    *,
    pg: PodGroup | None = None,
    pods: tuple[Any, ...] = (),
    services: tuple[Any, ...] = (),
    classes: dict[str, int] | None = None,
) -> Plan:
    observed = Observed(owner, pods, services, NOW, other_children=groups(pg), priority_classes=classes or {})
    return reconciled(observed, settings=settings)


def groups(pg: PodGroup | None) -> tuple[PodGroup, ...]:
    return (pg,) if pg is not None else ()


def created_pods(plan: Plan) -> dict[str, Any]:
    return {o.name: o.to_dict() for o in plan.create if o.kind == "Pod"}


def spec_of(plan: Plan) -> dict[str, Any]:
    assert owned_written(plan, "PodGroup") is not None
    return owned_written(plan, "PodGroup").spec.to_dict()


# -- off: nothing changes -------------------------------------------------------------------------------


def test_without_a_gang_scheduler_there_is_no_pod_group_and_pods_are_plain() -> None:
    plan = gang_run(gang_job({"minAvailable": 1}), OFF)

    assert owned_written(plan, "PodGroup") is None and owned_deleted(plan, "PodGroup") is None
    pods = created_pods(plan)
    assert len(pods) == 3
    assert all("schedulerName" not in p["spec"] and GROUP_LABEL not in p["metadata"]["labels"] for p in pods.values())


# -- the PodGroup object --------------------------------------------------------------------------------


def test_first_pass_creates_the_group_named_after_the_job_with_its_annotations_and_owner() -> None:
    owner = job(extra_spec=None)
    body = owner.to_dict()
    body["metadata"]["annotations"] = {"team": "vision"}
    owner = PyTorchJob.model_validate(body)

    plan = gang_run(owner, PLUGINS)

    assert owned_written(plan, "PodGroup") is not None
    made = owned_written(plan, "PodGroup").to_dict()
    assert made["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and made["kind"] == "PodGroup"
    assert made["metadata"] == {
        "name": NAME,
        "namespace": NAMESPACE,
        "annotations": {"team": "vision"},
        "ownerReferences": owner_references(owner),
    }


@pytest.mark.parametrize(
    ("settings", "policy", "spec"),
    [
        (PLUGINS, None, {"minMember": 3}),
        (PLUGINS, {"minAvailable": 2, "scheduleTimeoutSeconds": 60}, {"minMember": 2, "scheduleTimeoutSeconds": 60}),
        (PLUGINS, {"queue": "research", "priorityClass": "high"}, {"minMember": 3}),
        (VOLCANO, None, {"minMember": 3, "queue": "default"}),
        (
            VOLCANO,
            {"queue": "research", "priorityClass": "high", "scheduleTimeoutSeconds": 60},
            {"minMember": 3, "queue": "research", "priorityClassName": "high"},
        ),
        (
            VOLCANO,
            {"minAvailable": 1, "minResources": {"cpu": 4}},
            {"minMember": 1, "queue": "default", "minResources": {"cpu": 4}},
        ),
    ],
    ids=[
        "plugins-defaults",
        "plugins-timeout",
        "plugins-no-queue",
        "volcano-default-queue",
        "volcano-fields",
        "given-resources",
    ],
)
def test_pod_group_spec_per_flavour(
    settings: ControllerSettings, policy: dict[str, Any] | None, spec: dict[str, Any]
) -> None:
    assert spec_of(gang_run(gang_job(policy), settings)) == spec


def test_volcano_keeps_the_queue_the_group_already_has() -> None:
    owner = gang_job({"queue": "research", "minAvailable": 2})
    existing = group(owner, {"minMember": 3, "queue": "legacy"}, volcano=True, phase="Running")

    plan = gang_run(owner, VOLCANO, pg=existing)

    assert spec_of(plan) == {"minMember": 2, "queue": "legacy"}


def test_a_group_whose_spec_differs_is_replaced_keeping_its_identity_and_status() -> None:
    owner = gang_job({"minAvailable": 2})
    existing = group(owner, {"minMember": 3, "minTaskMember": {"master": 1}}, phase="Running")

    plan = gang_run(owner, PLUGINS, pg=existing)

    assert owned_written(plan, "PodGroup") is not None
    made = owned_written(plan, "PodGroup").to_dict()
    assert made["spec"] == {"minMember": 2}
    assert made["metadata"]["resourceVersion"] == "17" and made["metadata"]["uid"] == "pg-uid"
    assert made["status"] == {"phase": "Running"}


@pytest.mark.parametrize(
    ("given", "stored"),
    [({"cpu": 1, "memory": "1Gi"}, {"cpu": "1000m", "memory": "1024Mi"}), ({"cpu": "500m"}, {"cpu": "0.5"})],
)
def test_quantities_spelled_differently_are_not_a_difference(given: dict[str, Any], stored: dict[str, Any]) -> None:
    owner = gang_job({"minResources": given})
    existing = group(owner, {"minMember": 3, "minResources": stored}, phase="Running")

    assert owned_written(gang_run(owner, PLUGINS, pg=existing), "PodGroup") is None


# -- minMember and minResources -------------------------------------------------------------------------


def resources(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    if requests is not None:
        res["requests"] = requests
    if limits is not None:
        res["limits"] = limits
    return template(container={"resources": res})


def job_with(master: dict[str, Any], worker: dict[str, Any], workers: int, policy: dict[str, Any] | None) -> PyTorchJob:
    specs = {
        "Master": {"replicas": 1, "template": master},
        "Worker": {"replicas": workers, "template": worker},
    }
    extra: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if policy is not None:
        extra["runPolicy"] = {"schedulingPolicy": policy}
    return job(extra_spec=extra)


def prioritized(tmpl: dict[str, Any], name: str) -> dict[str, Any]:
    return {**tmpl, "spec": {**tmpl["spec"], "priorityClassName": name}}


MIN_RESOURCES = [
    ("no-requests", resources(), resources(), 2, None, {}, None),
    (
        "requests-summed",
        resources({"cpu": 1, "memory": "1Gi"}),
        resources({"cpu": "500m"}),
        2,
        None,
        {},
        {"cpu": "2", "memory": "1Gi"},
    ),
    ("milli", resources({"cpu": "500m"}), resources({"cpu": "250m"}), 1, None, {}, {"cpu": "750m"}),
    (
        "binary-units-kept",
        resources({"memory": "1Gi"}),
        resources({"memory": "512Mi"}),
        1,
        None,
        {},
        {"memory": "1536Mi"},
    ),
    (
        "mixed-units-in-bytes",
        resources({"memory": "1G"}),
        resources({"memory": "1Ki"}),
        1,
        None,
        {},
        {"memory": "1000001024"},
    ),
    (
        "limits-when-no-requests",
        resources(limits={"cpu": 2}),
        resources({"cpu": 1}, {"cpu": 8}),
        1,
        None,
        {},
        {"cpu": "3"},
    ),
    ("empty-requests-hide-limits", resources({}, {"cpu": 2}), resources({"cpu": 1}), 1, None, {}, {"cpu": "1"}),
    ("first-min-members", resources({"cpu": 1}), resources({"cpu": 2}), 3, {"minAvailable": 2}, {}, {"cpu": "3"}),
    (
        "higher-priority-first",
        prioritized(resources({"cpu": 1}), "low"),
        prioritized(resources({"cpu": 2}), "high"),
        3,
        {"minAvailable": 2},
        {"low": 10, "high": 1000},
        {"cpu": "4"},
    ),
    (
        "unknown-class-is-zero",
        prioritized(resources({"cpu": 1}), "missing"),
        prioritized(resources({"cpu": 2}), "low"),
        3,
        {"minAvailable": 1},
        {"low": 10},
        {"cpu": "2"},
    ),
    ("given-wins", resources({"cpu": 1}), resources({"cpu": 2}), 1, {"minResources": {"cpu": "10"}}, {}, {"cpu": "10"}),
]


@pytest.mark.parametrize(
    ("master", "worker", "workers", "policy", "classes", "expected"),
    [c[1:] for c in MIN_RESOURCES],
    ids=[c[0] for c in MIN_RESOURCES],
)
def test_min_resources(
    master: dict[str, Any],
    worker: dict[str, Any],
    workers: int,
    policy: dict[str, Any] | None,
    classes: dict[str, int],
    expected: dict[str, str] | None,
) -> None:
    plan = gang_run(job_with(master, worker, workers, policy), PLUGINS, classes=classes)

    assert spec_of(plan).get("minResources") == expected


# -- the gate and pod decoration ------------------------------------------------------------------------

GATE = [
    ("plugins-no-group-yet", PLUGINS, None, False, False),
    ("plugins-group-pending", PLUGINS, "Pending", True, False),
    ("plugins-group-without-status", PLUGINS, "", True, False),
    ("volcano-no-group-yet", VOLCANO, None, False, True),
    ("volcano-phase-empty", VOLCANO, "", False, True),
    ("volcano-pending", VOLCANO, "Pending", False, True),
    ("volcano-inqueue", VOLCANO, "Inqueue", True, False),
    ("volcano-running", VOLCANO, "Running", True, False),
]


@pytest.mark.parametrize(("settings", "phase", "creates", "stamped"), [c[1:] for c in GATE], ids=[c[0] for c in GATE])
def test_pods_and_services_wait_for_the_group(
    settings: ControllerSettings, phase: str | None, creates: bool, stamped: bool
) -> None:
    owner = gang_job()
    volcano = settings is VOLCANO
    spec = {"minMember": 3, "queue": "default"} if volcano else {"minMember": 3}
    existing = None if phase is None else group(owner, spec, volcano=volcano, phase=phase or None)

    plan = gang_run(owner, settings, pg=existing)
    assert plan.status is not None
    # As the operator hands the group over (a plain typed object, not a PodGroup), the same pass;
    # and a pass held back builds no pod or Service to drop (``holds_creates``).
    typed = tuple(TypedObject.model_validate(g.to_dict()) for g in groups(existing))
    observed = Observed(owner, (), (), NOW, other_children=typed)
    as_models = Observed(owner, (), (), NOW, other_children=groups(existing))
    assert reconcile(observed, PLUGIN, settings) == reconcile(as_models, PLUGIN, settings)
    assert gang.holds_creates(observed, owner, settings) is (not creates)
    written = PyTorchJob.model_validate({**owner.to_dict(), "status": plan.status.to_dict()})
    later = reconcile(
        Observed(written, (), (), NOW + timedelta(seconds=2), other_children=groups(existing)), PLUGIN, settings
    )

    assert (len(plan.create) == 6) is creates and (not plan.create) is (not creates)
    # A later pass with nothing new writes the status only to stamp a Volcano wait.
    assert (later.status is not None) is stamped
    if later.status is not None:
        assert later.status.last_reconcile_time == NOW + timedelta(seconds=2)


def test_the_volcano_stamp_is_written_at_most_once_a_second() -> None:
    owner = gang_job()
    existing = group(owner, {"minMember": 3, "queue": "default"}, volcano=True, phase="Pending")

    def at(owner: PyTorchJob, micros: int) -> Plan:
        observed = Observed(owner, (), (), NOW + timedelta(microseconds=micros), other_children=groups(existing))
        return reconciled(observed, settings=VOLCANO)

    first = at(owner, 100_000)
    assert first.status is not None
    written = PyTorchJob.model_validate({**owner.to_dict(), "status": first.status.to_dict()})

    assert at(written, 400_000) == Plan()
    later = at(written, 1_200_000).status
    # Stored at second precision, as every metav1.Time.
    assert later is not None and later.to_dict()["lastReconcileTime"] == "2026-01-01T00:00:01Z"


def test_scheduler_plugins_pods_get_the_scheduler_and_the_group_label() -> None:
    owner = gang_job()
    plan = gang_run(owner, PLUGINS, pg=group(owner, {"minMember": 3}, phase="Pending"))

    pods = created_pods(plan)
    assert set(pods) == {f"{NAME}-master-0", f"{NAME}-worker-0", f"{NAME}-worker-1"}
    for body in pods.values():
        assert body["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        assert body["metadata"]["labels"][GROUP_LABEL] == NAME
        assert GROUP_ANNOTATION not in (body["metadata"].get("annotations") or {})
    assert WRONG_SCHEDULER not in plan.events


def test_volcano_pods_get_the_scheduler_and_the_group_and_task_annotations() -> None:
    owner = gang_job()
    plan = gang_run(
        owner, VOLCANO, pg=group(owner, {"minMember": 3, "queue": "default"}, volcano=True, phase="Inqueue")
    )

    pods = created_pods(plan)
    for name, task in ((f"{NAME}-master-0", "master"), (f"{NAME}-worker-1", "worker")):
        assert pods[name]["spec"]["schedulerName"] == "volcano"
        assert pods[name]["metadata"]["annotations"] == {GROUP_ANNOTATION: NAME, TASK_ANNOTATION: task}
        assert GROUP_LABEL not in pods[name]["metadata"]["labels"]


@pytest.mark.parametrize(
    ("template_scheduler", "warned"),
    [("default-scheduler", True), ("scheduler-plugins-scheduler", False)],
)
def test_a_template_scheduler_is_kept_and_another_one_warned_about(template_scheduler: str, warned: bool) -> None:
    owner = gang_job(tmpl=template(spec={"schedulerName": template_scheduler}))
    plan = gang_run(owner, PLUGINS, pg=group(owner, {"minMember": 3}, phase="Running"))

    assert {p["spec"]["schedulerName"] for p in created_pods(plan).values()} == {template_scheduler}
    assert (WRONG_SCHEDULER in plan.events) is warned


def test_no_warning_when_no_pod_is_created() -> None:
    owner = gang_job(tmpl=template(spec={"schedulerName": "default-scheduler"}))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Running"]})

    plan = gang_run(owner, PLUGINS, pg=group(owner, {"minMember": 3}, phase="Running"), pods=pods, services=services)

    assert WRONG_SCHEDULER not in plan.events


# -- deletion -------------------------------------------------------------------------------------------

DELETION = [
    ("succeeded", {"status": stored_status("Created", "Running=False", "Succeeded")}, True),
    ("failed", {"status": stored_status("Created", "Failed")}, True),
    ("suspended", {"extra_spec": {"runPolicy": {"suspend": True}}}, True),
    ("running", {"status": stored_status("Created", "Running")}, False),
]


@pytest.mark.parametrize(("job_kw", "deleted"), [c[1:] for c in DELETION], ids=[c[0] for c in DELETION])
def test_group_deleted_when_the_job_finishes_or_is_suspended(job_kw: dict[str, Any], deleted: bool) -> None:
    owner = job(**job_kw)
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Running"]})

    plan = gang_run(owner, PLUGINS, pg=group(owner, {"minMember": 3}, phase="Running"), pods=pods, services=services)

    assert owned_deleted(plan, "PodGroup") == (NAME if deleted else None)
    if deleted:
        assert owned_written(plan, "PodGroup") is None


def test_group_deleted_in_the_pass_that_fails_the_job() -> None:
    owner = job(restart="ExitCode", status=stored_status("Created", "Running"))
    pods = (pod(owner, "Master", 0), pod(owner, "Worker", 0), pod(owner, "Worker", 1, phase="Failed", exit_code=1))

    plan = gang_run(owner, PLUGINS, pg=group(owner, {"minMember": 3}, phase="Running"), pods=pods)

    assert plan.status is not None and plan.status.conditions[-1].type.value == "Failed"
    assert owned_deleted(plan, "PodGroup") == NAME


def test_finished_job_without_a_group_deletes_nothing() -> None:
    owner = job(status=stored_status("Created", "Succeeded"))

    assert owned_deleted(gang_run(owner, PLUGINS), "PodGroup") is None


def test_a_group_of_an_older_job_of_the_same_name_is_left_alone_and_waited_for() -> None:
    owner = gang_job()
    stale = group(owner, {"minMember": 7}, phase="Running", uid=OTHER_UID)

    plan = gang_run(owner, PLUGINS, pg=stale)

    assert owned_written(plan, "PodGroup") is None and owned_deleted(plan, "PodGroup") is None
    assert not plan.create


@pytest.mark.parametrize(
    "job_kw",
    [{"deleting": True}, {"extra_spec": {"runPolicy": {"managedBy": "kueue.x-k8s.io/multikueue"}}}],
    ids=["deleting", "managed-elsewhere"],
)
def test_jobs_not_reconciled_here_get_no_group_writes(job_kw: dict[str, Any]) -> None:
    owner = job(**job_kw)
    plan = gang_run(owner, PLUGINS, pg=group(owner, {"minMember": 1}, phase="Running"))

    assert owned_written(plan, "PodGroup") is None and owned_deleted(plan, "PodGroup") is None


def test_the_group_uid_is_the_jobs() -> None:
    # The ownerReference the group gets is the job's, so the garbage collector removes it with the job.
    plan = gang_run(gang_job(), VOLCANO)

    assert owned_written(plan, "PodGroup") is not None
    assert [r.uid for r in owned_written(plan, "PodGroup").metadata.owner_references or []] == [UID]
