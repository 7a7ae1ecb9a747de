"""The reconciler as a pure function: observed job, pods, Services and clock in, plan out.

Every case states the observed world with the builders of ``job_builders`` and checks the end
values of the plan (what to allocate, create, delete, the status to write and the events) against
the upstream behaviour of kubeflow-v1 reference §3.1, §4.1, §5.2-5.3, §6.2, §7 and §8.
"""

from __future__ import annotations

from typing import Any

import pytest
from job_builders import (
    DNS,
    HOST,
    JOB_ROLE,
    MASTER_HOST_PORT,
    NAME,
    NAMESPACE,
    NOW,
    OTHER_UID,
    UID,
    WORKER_HOST_PORT,
    World,
    apply,
    child_labels,
    created,
    env_names,
    env_of,
    job,
    owner_references,
    pod,
    replicas,
    run,
    run_world,
    service,
    set_phase,
    stored_status,
    template,
    with_host_ports,
)

from trainyard.api import ConditionType, Pod
from trainyard.controller import ChildRef
from trainyard.kit.plans import Event, EventType

SELECTOR = "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name=pytorchjob-controller"


def conditions(plan_status: Any) -> list[tuple[str, str]]:
    return [(c.type.value, c.status) for c in plan_status.conditions]


def pods_and_services(names: list[str]) -> set[ChildRef]:
    return {ChildRef(kind, n) for n in names for kind in ("Pod", "Service")}


# -- host network mode: ports first ---------------------------------------------------------------------

HOST_PORT_REQUESTS = [
    (1, 2, {"master-0/pytorchjob-port", "worker-0/pytorchjob-port", "worker-1/pytorchjob-port"}),
    (1, 0, {"master-0/pytorchjob-port"}),
    (0, 3, {"worker-0/pytorchjob-port", "worker-1/pytorchjob-port", "worker-2/pytorchjob-port"}),
]


@pytest.mark.parametrize(
    ("masters", "workers", "keys"), HOST_PORT_REQUESTS, ids=["master+2-workers", "master-only", "3-workers-no-master"]
)
def test_host_mode_asks_for_ports_before_creating_anything(masters: int, workers: int, keys: set[str]) -> None:
    plan = run(job(masters, workers), settings=HOST)

    assert set(plan.allocate_ports) == keys
    assert len(plan.allocate_ports) == len(keys)
    assert plan.create == ()
    assert plan.delete == ()
    assert plan.status is not None
    assert conditions(plan.status) == [("Created", "True")]
    assert plan.status.conditions[0].reason == "PyTorchJobCreated"
    assert plan.status.conditions[0].message == "PyTorchJob mnist is created."
    assert plan.status.start_time == NOW


def test_host_mode_asks_only_for_ports_not_yet_recorded() -> None:
    scaled_up = with_host_ports(
        job(1, 3), {"master-0/pytorchjob-port": MASTER_HOST_PORT, "worker-0/pytorchjob-port": WORKER_HOST_PORT}
    )

    plan = run(scaled_up, settings=HOST)

    assert sorted(plan.allocate_ports) == ["worker-1/pytorchjob-port", "worker-2/pytorchjob-port"]
    assert plan.create == ()


def test_host_mode_asks_for_every_declared_port_of_the_default_container() -> None:
    extra_port = template(container={"ports": [{"name": "metrics", "containerPort": 9090}]})

    plan = run(job(1, 1, tmpl=extra_port), settings=HOST)

    assert set(plan.allocate_ports) == {
        "master-0/metrics",
        "master-0/pytorchjob-port",
        "worker-0/metrics",
        "worker-0/pytorchjob-port",
    }


# -- host network mode: pods and Services once ports are recorded -------------------------------------

REPLICAS = [
    # replica type, index, rank, own allocated port, master role
    ("Master", 0, "0", MASTER_HOST_PORT, True),
    ("Worker", 0, "1", WORKER_HOST_PORT, False),
    ("Worker", 1, "2", WORKER_HOST_PORT + 1, False),
]
REPLICA_IDS = ["master-0", "worker-0", "worker-1"]


def test_host_mode_creates_one_pod_and_one_service_per_replica() -> None:
    plan = run(job(1, 2, ports=True), settings=HOST)

    expected = ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"]
    assert plan.allocate_ports == ()
    assert sorted(created(plan, "Pod")) == expected
    assert sorted(created(plan, "Service")) == expected
    assert len(plan.create) == 6
    assert plan.delete == ()


@pytest.mark.parametrize(("rtype", "index", "rank", "port", "is_master"), REPLICAS, ids=REPLICA_IDS)
def test_host_mode_pod(rtype: str, index: int, rank: str, port: int, is_master: bool) -> None:
    owner = job(1, 2, ports=True)
    plan = run(owner, settings=HOST)
    name = f"mnist-{rtype.lower()}-{index}"
    built = created(plan, "Pod")[name]

    expected_labels = child_labels(owner, rtype, index) | ({JOB_ROLE: "master"} if is_master else {})
    assert built.metadata.namespace == NAMESPACE
    assert built.metadata.labels == expected_labels
    assert [r.to_dict() for r in built.metadata.owner_references] == owner_references(owner)
    assert built.metadata.owner_references[0].uid == UID
    assert env_of(built) == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": "127.0.0.1",
        "PET_MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(MASTER_HOST_PORT),
        "PET_MASTER_PORT": str(MASTER_HOST_PORT),
        "WORLD_SIZE": "3",
        "RANK": rank,
        "PET_NODE_RANK": rank,
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "auto",
        "TRAINYARD_JOB_NAME": "mnist",
        "TRAINYARD_JOB_NAMESPACE": NAMESPACE,
        "TRAINYARD_JOB_KIND": "PyTorchJob",
    }
    spec = built.to_dict()["spec"]
    assert spec["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": port}]
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["restartPolicy"] == "OnFailure"


@pytest.mark.parametrize(("rtype", "index", "rank", "port", "is_master"), REPLICAS, ids=REPLICA_IDS)
def test_host_mode_service(rtype: str, index: int, rank: str, port: int, is_master: bool) -> None:
    owner = job(1, 2, ports=True)
    plan = run(owner, settings=HOST)
    name = f"mnist-{rtype.lower()}-{index}"
    svc = created(plan, "Service")[name].to_dict()

    assert svc["metadata"]["namespace"] == NAMESPACE
    assert svc["metadata"]["labels"] == child_labels(owner, rtype, index)
    assert svc["metadata"]["ownerReferences"] == owner_references(owner)
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"] == [{"name": "pytorchjob-port", "port": port, "targetPort": port, "protocol": "TCP"}]
    selector = svc["spec"]["selector"]
    selected = [p.name for p in created(plan, "Pod").values() if selector.items() <= (p.metadata.labels or {}).items()]
    assert selected == [name]


# -- cluster-dns network mode -------------------------------------------------------------------------


@pytest.mark.parametrize(("rtype", "index", "rank"), [r[:3] for r in REPLICAS], ids=REPLICA_IDS)
def test_cluster_dns_pod_uses_the_master_service_name_and_declared_port(rtype: str, index: int, rank: str) -> None:
    plan = run(job(1, 2), settings=DNS)
    built = created(plan, "Pod")[f"mnist-{rtype.lower()}-{index}"]

    env = env_of(built)
    assert plan.allocate_ports == ()
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("mnist-master-0", "23456")
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("mnist-master-0", "23456")
    assert (env["RANK"], env["WORLD_SIZE"]) == (rank, "3")
    spec = built.to_dict()["spec"]
    assert "hostNetwork" not in spec
    assert spec["containers"][0]["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456}]


def test_cluster_dns_master_port_is_the_port_the_user_declared() -> None:
    custom = template(container={"ports": [{"name": "pytorchjob-port", "containerPort": 29500}]})

    plan = run(job(1, 1, tmpl=custom))

    for built in created(plan, "Pod").values():
        assert env_of(built)["MASTER_PORT"] == "29500"
        assert built.to_dict()["spec"]["containers"][0]["ports"] == [
            {"name": "pytorchjob-port", "containerPort": 29500}
        ]


def test_cluster_dns_service_selects_exactly_its_pod() -> None:
    owner = job(1, 2)
    plan = run(owner)

    for name, svc in created(plan, "Service").items():
        body = svc.to_dict()
        assert body["spec"]["clusterIP"] == "None"
        assert body["spec"]["ports"] == [
            {"name": "pytorchjob-port", "port": 23456, "targetPort": 23456, "protocol": "TCP"}
        ]
        selector = body["spec"]["selector"]
        assert [p.name for p in created(plan, "Pod").values() if selector.items() <= p.metadata.labels.items()] == [
            name
        ]


POD_RESTART_POLICIES = [
    ("OnFailure", "OnFailure"),
    ("Always", "Always"),
    ("Never", "Never"),
    ("ExitCode", "Never"),
    (None, "OnFailure"),
]


@pytest.mark.parametrize(
    ("replica_policy", "pod_policy"), POD_RESTART_POLICIES, ids=["OnFailure", "Always", "Never", "ExitCode", "unset"]
)
def test_pod_restart_policy_comes_from_the_replica_spec(replica_policy: str | None, pod_policy: str) -> None:
    tmpl = template(spec={"restartPolicy": "Always"})

    plan = run(job(1, 1, restart=replica_policy, tmpl=tmpl))

    assert {p.name: p.spec.restart_policy for p in created(plan, "Pod").values()} == {
        "mnist-master-0": pod_policy,
        "mnist-worker-0": pod_policy,
    }


# -- the user's pod template is kept --------------------------------------------------------------------

USER_TEMPLATE = template(
    env=[
        {"name": "EPOCHS", "value": "3"},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "MASTER_PORT", "value": "1"},
    ],
    container={
        "resources": {"limits": {"cpu": "2", "memory": "4Gi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "imagePullPolicy": "IfNotPresent",
    },
    spec={
        "volumes": [{"name": "data", "emptyDir": {}}],
        "nodeSelector": {"accelerator": "h100"},
        "tolerations": [{"key": "gpu", "operator": "Exists"}],
        "schedulerName": "default-scheduler",
    },
    metadata={
        "labels": {"app": "mnist", "training.kubeflow.org/job-name": "spoofed"},
        "annotations": {"sidecar.istio.io/inject": "false"},
    },
)
OPERATOR_VARS = {
    "PYTHONUNBUFFERED",
    "MASTER_PORT",
    "PET_MASTER_PORT",
    "MASTER_ADDR",
    "PET_MASTER_ADDR",
    "WORLD_SIZE",
    "RANK",
    "PET_NODE_RANK",
    "PET_NPROC_PER_NODE",
    "PET_NNODES",
    "TRAINYARD_JOB_NAME",
    "TRAINYARD_JOB_NAMESPACE",
    "TRAINYARD_JOB_KIND",
}


@pytest.mark.parametrize("settings", [DNS, HOST], ids=["cluster-dns", "host"])
def test_user_env_and_unknown_template_fields_are_kept(settings: Any) -> None:
    plan = run(job(1, 1, tmpl=USER_TEMPLATE, ports=True), settings=settings)
    body = created(plan, "Pod")["mnist-worker-0"].to_dict()

    container = body["spec"]["containers"][0]
    assert container["env"][:3] == USER_TEMPLATE["spec"]["containers"][0]["env"]
    assert {e["name"] for e in container["env"][3:]} == OPERATOR_VARS
    assert container["resources"] == {"limits": {"cpu": "2", "memory": "4Gi"}}
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert body["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert body["spec"]["nodeSelector"] == {"accelerator": "h100"}
    assert body["spec"]["tolerations"] == [{"key": "gpu", "operator": "Exists"}]
    assert body["spec"]["schedulerName"] == "default-scheduler"
    assert body["metadata"]["labels"]["app"] == "mnist"
    assert body["metadata"]["labels"]["training.kubeflow.org/job-name"] == NAME
    assert body["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}


def test_operator_value_comes_last_so_it_wins_a_clash() -> None:
    plan = run(job(1, 1, tmpl=USER_TEMPLATE))
    worker = created(plan, "Pod")["mnist-worker-0"]

    ports = [e.value for e in worker.spec.containers[0].env or [] if e.name == "MASTER_PORT"]
    assert ports == ["1", "23456"]


def test_every_container_gets_the_operator_env() -> None:
    two = template()
    two["spec"]["containers"].append({"name": "sidecar", "image": "busybox", "env": [{"name": "X", "value": "y"}]})

    plan = run(job(1, 1, tmpl=two))
    worker = created(plan, "Pod")["mnist-worker-0"]

    assert env_names(worker, 1)[0] == "X"
    assert env_of(worker, 1)["PYTHONUNBUFFERED"] == "1"
    assert env_of(worker, 1)["RANK"] == "1"
    assert worker.spec.containers[1].ports is None


# -- status from the observed pods --------------------------------------------------------------------

STATUS_FROM_PHASES = [
    # id, phases, last condition, (Master active, Worker active)
    ("all-pending", {"Master": ["Pending"], "Worker": ["Pending", "Pending"]}, ("Created", "True"), (0, 0)),
    ("master-running", {"Master": ["Running"], "Worker": ["Pending", "Running"]}, ("Running", "True"), (1, 1)),
    ("everyone-running", {"Master": ["Running"], "Worker": ["Running", "Running"]}, ("Running", "True"), (1, 2)),
    ("only-workers-running", {"Master": ["Pending"], "Worker": ["Running", "Running"]}, ("Created", "True"), (0, 2)),
]


@pytest.mark.parametrize(
    ("phases", "last", "active"), [c[1:] for c in STATUS_FROM_PHASES], ids=[c[0] for c in STATUS_FROM_PHASES]
)
def test_status_follows_the_pod_phases(
    phases: dict[str, list[str]], last: tuple[str, str], active: tuple[int, int]
) -> None:
    owner = job(1, 2, status=stored_status("Created"))
    pods, services = replicas(owner, phases)

    plan = run(owner, pods, services)

    assert plan.create == ()
    assert plan.delete == ()
    assert plan.status is not None
    assert conditions(plan.status)[-1] == last
    statuses = {k: v.to_dict() for k, v in plan.status.replica_statuses.items()}
    assert statuses == {
        "Master": {
            "active": active[0],
            "succeeded": 0,
            "failed": 0,
            "selector": SELECTOR + ",training.kubeflow.org/replica-type=master",
        },
        "Worker": {
            "active": active[1],
            "succeeded": 0,
            "failed": 0,
            "selector": SELECTOR + ",training.kubeflow.org/replica-type=worker",
        },
    }


def test_running_condition_reason_and_message() -> None:
    owner = job(1, 1, status=stored_status("Created"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    running = plan.status.conditions[-1]
    assert (running.type, running.status, running.reason) == (ConditionType.RUNNING, "True", "PyTorchJobRunning")
    assert running.message == "PyTorchJob mnist is running."
    assert running.last_transition_time == NOW


def test_start_time_is_set_on_the_first_pass_and_then_kept() -> None:
    first = run(job(1, 1))
    assert first.status is not None
    assert first.status.start_time == NOW

    owner = job(1, 1, status=stored_status("Created", start="2025-12-31T12:00:00Z"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})
    later = run(owner, pods, services)
    assert later.status is not None
    assert later.status.start_time is not None
    assert later.status.start_time.isoformat() == "2025-12-31T12:00:00+00:00"


# -- success -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "workers",
    [["Running", "Running"], ["Succeeded", "Running"], [], ["Failed", "Pending"]],
    ids=["workers-running", "one-worker-done", "worker-pods-missing", "worker-failed-and-pending"],
)
def test_master_succeeded_completes_the_job(workers: list[str]) -> None:
    owner = job(1, 2, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Succeeded"], "Worker": workers})

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert conditions(plan.status) == [("Created", "True"), ("Running", "False"), ("Succeeded", "True")]
    succeeded = plan.status.conditions[-1]
    assert succeeded.reason == "PyTorchJobSucceeded"
    assert succeeded.message == "PyTorchJob mnist is successfully completed."
    assert plan.status.completion_time == NOW
    assert plan.create == ()
    assert plan.delete == ()
    assert plan.status.replica_statuses["Master"].succeeded == 1
    assert plan.status.replica_statuses["Master"].active == 0
    assert plan.status.replica_statuses["Worker"].active == 0


def test_after_success_running_workers_count_as_succeeded() -> None:
    owner = job(1, 2, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Succeeded"], "Worker": ["Running", "Succeeded"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert plan.status.replica_statuses["Worker"].to_dict() == {
        "active": 0,
        "succeeded": 2,
        "failed": 0,
        "selector": SELECTOR + ",training.kubeflow.org/replica-type=worker",
    }


def test_worker_only_job_succeeds_when_every_worker_succeeded() -> None:
    owner = job(0, 2, status=stored_status("Created", "Running"))
    half, services = replicas(owner, {"Worker": ["Succeeded", "Running"]})
    done, _ = replicas(owner, {"Worker": ["Succeeded", "Succeeded"]})

    assert conditions(run(owner, half, services).status)[-1] == ("Running", "True")
    finished = run(owner, done, services)
    assert finished.status is not None
    assert conditions(finished.status)[-1] == ("Succeeded", "True")
    assert finished.status.conditions[-1].message == f"PyTorchJob {NAMESPACE}/mnist successfully completed."
    assert finished.status.completion_time == NOW


# -- failed pods: restart or fail (§7) ------------------------------------------------------------------

FAILED_WORKER = [
    # id, replica restartPolicy, exit code of the pytorch container, deleted for restart, condition
    ("OnFailure", "OnFailure", 1, True, "Restarting"),
    ("Always", "Always", 1, True, "Restarting"),
    ("Never", "Never", 1, False, "Failed"),
    ("ExitCode-137-OOMKilled", "ExitCode", 137, True, "Restarting"),
    ("ExitCode-143-SIGTERM", "ExitCode", 143, True, "Restarting"),
    ("ExitCode-128", "ExitCode", 128, True, "Restarting"),
    ("ExitCode-no-terminated-state", "ExitCode", None, True, "Restarting"),
    ("ExitCode-1", "ExitCode", 1, False, "Failed"),
    ("ExitCode-127", "ExitCode", 127, False, "Failed"),
]


@pytest.mark.parametrize(
    ("policy", "exit_code", "restarted", "outcome"), [c[1:] for c in FAILED_WORKER], ids=[c[0] for c in FAILED_WORKER]
)
def test_failed_worker(policy: str, exit_code: int | None, restarted: bool, outcome: str) -> None:
    owner = job(1, 2, restart=policy, status=stored_status("Created", "Running"))
    pods = (
        pod(owner, "Master", 0),
        pod(owner, "Worker", 0),
        pod(owner, "Worker", 1, phase="Failed", exit_code=exit_code),
    )
    services = [service(owner, t, i) for t, i in (("Master", 0), ("Worker", 0), ("Worker", 1))]

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert plan.create == ()
    if restarted:
        # Counted and marked first (written with the status); deleted by the pass that reads it back.
        assert plan.delete == ()
        assert plan.status.restart_count == 1
        assert plan.status.completion_time is None
        again = run_world(apply(World(owner, pods, tuple(services)), plan))
        assert again.delete == (ChildRef("Pod", "mnist-worker-1"),)
        assert again.create == ()
    else:
        assert plan.delete == ()
        assert plan.status.completion_time == NOW
    assert conditions(plan.status)[-1] == (outcome, "True")
    assert plan.status.conditions[-1].reason == f"PyTorchJob{outcome}"
    assert plan.status.replica_statuses["Worker"].failed == 1


def test_restarting_replaces_running() -> None:
    owner = job(1, 2, status=stored_status("Created", "Running"))
    pods = (pod(owner, "Master", 0), pod(owner, "Worker", 0), pod(owner, "Worker", 1, phase="Failed", exit_code=1))

    plan = run(owner, pods, [service(owner, "Worker", 1)])

    assert plan.status is not None
    assert conditions(plan.status) == [("Created", "True"), ("Restarting", "True")]
    assert plan.status.conditions[-1].message == "PyTorchJob mnist is restarting because 1 Worker replica(s) failed."


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("Never", "PyTorchJob mnist is failed because 1 Worker replica(s) failed."),
        ("ExitCode", 'job "mnist" is failing because "Worker" replica(s) failed.'),
    ],
    ids=["Never", "ExitCode-permanent"],
)
def test_failed_condition_message(policy: str, message: str) -> None:
    owner = job(1, 1, restart=policy, status=stored_status("Created", "Running"))
    pods = (pod(owner, "Master", 0), pod(owner, "Worker", 0, phase="Failed", exit_code=2))

    plan = run(owner, pods, [service(owner, "Master", 0), service(owner, "Worker", 0)])

    assert plan.status is not None
    failed = plan.status.conditions[-1]
    assert (failed.type, failed.status, failed.message) == (ConditionType.FAILED, "True", message)


@pytest.mark.parametrize("policy", ["Never", "ExitCode"], ids=["Never", "ExitCode-permanent"])
def test_failing_job_keeps_running_as_false_and_is_never_reported_restarting(policy: str) -> None:
    # Upstream fails the job on a non-retryable exit code while reconciling pods, before the status
    # pass; Failed is terminal, so the status pass's Restarting is ignored (reconcile.py pass
    # order: step 6 before step 7).
    owner = job(1, 1, restart=policy, status=stored_status("Created", "Running"))
    pods = (pod(owner, "Master", 0), pod(owner, "Worker", 0, phase="Failed", exit_code=2))

    plan = run(owner, pods, [service(owner, "Master", 0), service(owner, "Worker", 0)])

    assert plan.status is not None
    assert conditions(plan.status) == [("Created", "True"), ("Running", "False"), ("Failed", "True")]
    assert [(e.type, e.reason) for e in plan.events] == [
        (EventType.NORMAL, "ExitedWithCode"),
        (EventType.WARNING, "PyTorchJobFailed"),
    ]


def test_failed_master_with_never_fails_the_job() -> None:
    owner = job(1, 2, restart="Never", status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Failed"], "Worker": ["Running", "Running"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    assert conditions(plan.status)[-1] == ("Failed", "True")
    assert plan.status.conditions[-1].message == "PyTorchJob mnist is failed because 1 Master replica(s) failed."
    assert plan.delete == ()


def test_failed_pod_already_being_deleted_is_not_deleted_again() -> None:
    owner = job(1, 1, status=stored_status("Created", "Running"))
    pods = (pod(owner, "Master", 0), pod(owner, "Worker", 0, phase="Failed", exit_code=1, deleting=True))

    plan = run(owner, pods, [service(owner, "Master", 0), service(owner, "Worker", 0)])

    assert plan.delete == ()
    assert plan.create == ()
    assert plan.status is not None
    assert conditions(plan.status)[-1] == ("Restarting", "True")


# -- a finished job: cleanPodPolicy (§6.2) --------------------------------------------------------------

CLEAN_POD_POLICY = [
    # id, cleanPodPolicy, finished as, pods deleted (every Service goes whatever the policy)
    ("All", "All", "Succeeded", ["mnist-master-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]),
    ("Running", "Running", "Succeeded", ["mnist-worker-0", "mnist-worker-1"]),
    ("None", "None", "Succeeded", []),
    ("unset-means-None", None, "Succeeded", []),
    ("All-after-failure", "All", "Failed", ["mnist-master-0", "mnist-worker-0", "mnist-worker-1", "mnist-worker-2"]),
    ("Running-after-failure", "Running", "Failed", ["mnist-worker-0", "mnist-worker-1"]),
]


@pytest.mark.parametrize(
    ("clean", "finished", "deleted"), [c[1:] for c in CLEAN_POD_POLICY], ids=[c[0] for c in CLEAN_POD_POLICY]
)
def test_finished_job_cleans_up_by_policy(clean: str | None, finished: str, deleted: list[str]) -> None:
    owner = job(1, 3, clean=clean, status=stored_status("Created", "Running=False", finished))
    pods, services = replicas(owner, {"Master": ["Succeeded"], "Worker": ["Running", "Pending", "Failed"]})

    plan = run(owner, pods, services)

    every_service = {ChildRef("Service", s.name) for s in services}
    assert set(plan.delete) == {ChildRef("Pod", n) for n in deleted} | every_service
    assert len(plan.delete) == len(deleted) + len(every_service)
    assert plan.create == ()
    assert plan.allocate_ports == ()


def test_finished_job_creates_nothing_even_when_pods_are_missing() -> None:
    owner = job(1, 2, clean="All", status=stored_status("Created", "Running=False", "Succeeded"))

    plan = run(owner, [pod(owner, "Master", 0, phase="Succeeded")], [])

    assert plan.create == ()
    assert plan.delete == (ChildRef("Pod", "mnist-master-0"),)


def test_finished_job_does_not_delete_pods_already_being_deleted() -> None:
    owner = job(1, 1, clean="All", status=stored_status("Created", "Running=False", "Succeeded"))
    pods = (pod(owner, "Master", 0, phase="Succeeded", deleting=True), pod(owner, "Worker", 0))

    plan = run(owner, pods, [service(owner, "Master", 0), service(owner, "Worker", 0)])

    assert set(plan.delete) == {
        ChildRef("Pod", "mnist-worker-0"),
        ChildRef("Service", "mnist-worker-0"),
        ChildRef("Service", "mnist-master-0"),
    }


def test_finished_job_in_host_mode_asks_for_no_ports() -> None:
    owner = job(1, 1, clean="All", status=stored_status("Created", "Running=False", "Succeeded"))

    plan = run(owner, settings=HOST)

    assert plan.allocate_ports == ()
    assert plan.create == ()


# -- scale down, ownership, deletion -------------------------------------------------------------------


@pytest.mark.parametrize("surplus", ["Running", "Pending", "Succeeded", "Failed"])
def test_scale_down_deletes_surplus_pod_and_service_once(surplus: str) -> None:
    owner = job(1, 2, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Running", surplus]})

    plan = run(owner, pods, services)

    assert sorted(plan.delete, key=repr) == [ChildRef("Pod", "mnist-worker-2"), ChildRef("Service", "mnist-worker-2")]
    assert plan.create == ()


def test_removed_replica_type_is_deleted() -> None:
    owner = job(0, 2, status=stored_status("Created", "Running"))
    stale = job(1, 2)
    pods = (pod(stale, "Master", 0), pod(owner, "Worker", 0), pod(owner, "Worker", 1))
    services = (service(stale, "Master", 0), service(owner, "Worker", 0), service(owner, "Worker", 1))

    plan = run(owner, pods, services)

    assert set(plan.delete) == pods_and_services(["mnist-master-0"])
    assert plan.create == ()


def test_scale_up_creates_only_the_missing_replicas() -> None:
    owner = job(1, 3, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})

    plan = run(owner, pods, services)

    assert sorted(created(plan, "Pod")) == ["mnist-worker-1", "mnist-worker-2"]
    assert sorted(created(plan, "Service")) == ["mnist-worker-1", "mnist-worker-2"]
    assert plan.delete == ()


def test_missing_service_is_recreated_for_an_existing_pod() -> None:
    owner = job(1, 1, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running"]})

    plan = run(owner, pods, services[:1])

    assert [(o.kind, o.name) for o in plan.create] == [("Service", "mnist-worker-0")]


@pytest.mark.parametrize(
    "status",
    [None, stored_status("Created", "Running"), stored_status("Created", "Running=False", "Succeeded")],
    ids=["new", "running", "succeeded"],
)
@pytest.mark.parametrize("settings", [DNS, HOST], ids=["cluster-dns", "host"])
def test_job_being_deleted_gets_an_empty_plan(status: dict[str, Any] | None, settings: Any) -> None:
    owner = job(1, 2, clean="All", status=status, deleting=True)
    pods, services = replicas(owner, {"Master": ["Failed"], "Worker": ["Running", "Running", "Running"]})

    plan = run(owner, pods, services, settings=settings)

    assert plan.empty


def test_children_of_another_job_with_the_same_name_are_ignored() -> None:
    owner = job(1, 1)
    older = job(1, 1, uid=OTHER_UID)
    pods = (pod(older, "Master", 0, phase="Failed"), pod(older, "Worker", 0, phase="Running"))
    services = (service(older, "Master", 0), service(older, "Worker", 0))

    plan = run(owner, pods, services)

    assert plan.delete == ()
    assert sorted(created(plan, "Pod")) == ["mnist-master-0", "mnist-worker-0"]
    assert sorted(created(plan, "Service")) == ["mnist-master-0", "mnist-worker-0"]
    assert all(o.metadata.owner_references[0].uid == UID for o in plan.create)
    assert plan.status is not None
    assert conditions(plan.status) == [("Created", "True")]
    assert {k: (v.active, v.failed) for k, v in plan.status.replica_statuses.items()} == {
        "Master": (0, 0),
        "Worker": (0, 0),
    }


def test_pod_without_a_controller_reference_is_not_owned() -> None:
    owner = job(1, 1)
    body = pod(owner, "Worker", 0, phase="Failed").to_dict()
    del body["metadata"]["ownerReferences"][0]["controller"]
    orphan = Pod.model_validate(body)

    plan = run(owner, [orphan])

    assert plan.delete == ()
    assert "mnist-worker-0" in created(plan, "Pod")


@pytest.mark.parametrize(
    ("status", "phases", "deleted"),
    [
        (None, {}, []),
        (
            stored_status("Created", "Running"),
            {"Master": ["Running"], "Worker": ["Running", "Succeeded"]},
            ["mnist-master-0", "mnist-worker-0", "mnist-worker-1"],
        ),
    ],
    ids=["created-suspended", "suspended-while-running"],
)
def test_suspended_job_has_no_pods(
    status: dict[str, Any] | None, phases: dict[str, list[str]], deleted: list[str]
) -> None:
    # runPolicy.suspend (reference §6.1 step 3, §6.5): every pod and Service is deleted, none is
    # created, and the job is marked Suspended; a job created suspended gets no startTime.
    owner = job(1, 2, status=status, extra_spec={"runPolicy": {"suspend": True}})
    pods, services = replicas(owner, phases)

    plan = run(owner, pods, services)

    assert plan.create == ()
    assert set(plan.delete) == pods_and_services(deleted)
    assert plan.status is not None
    assert conditions(plan.status)[-1] == ("Suspended", "True")
    if status is None:
        assert plan.status.start_time is None


# -- level-triggered and idempotent ---------------------------------------------------------------------


def assert_nothing_to_do(plan: Any) -> None:
    assert plan.allocate_ports == ()
    assert plan.create == ()
    assert plan.delete == ()
    assert plan.status is None
    assert plan.events == ()


@pytest.mark.parametrize(("masters", "workers"), [(1, 2), (0, 2), (1, 0)], ids=["master+2", "2-workers", "master"])
def test_cluster_dns_converges_and_then_does_nothing(masters: int, workers: int) -> None:
    world = World(job(masters, workers))

    first = run_world(world)
    assert len(first.create) == 2 * (masters + workers)
    world = apply(world, first, phase="Pending")
    assert_nothing_to_do(run_world(world))

    world = set_phase(world, "Running")
    running = run_world(world)
    assert running.create == ()
    assert running.status is not None
    assert conditions(running.status)[-1] == ("Running", "True")
    world = apply(world, running)
    assert_nothing_to_do(run_world(world))


def test_host_mode_converges_and_then_does_nothing() -> None:
    world = World(job(1, 2))

    asked = run_world(world, settings=HOST)
    ports = {key: 31000 + i for i, key in enumerate(asked.allocate_ports)}
    world = apply(world, asked)
    world = World(with_host_ports(world.job, ports))

    creating = run_world(world, settings=HOST)
    assert creating.allocate_ports == ()
    assert len(creating.create) == 6
    world = apply(world, creating, phase="Pending")
    assert_nothing_to_do(run_world(world, settings=HOST))

    world = apply(set_phase(world, "Running"), run_world(set_phase(world, "Running"), settings=HOST))
    assert_nothing_to_do(run_world(world, settings=HOST))


def test_restart_converges() -> None:
    world = apply(World(job(1, 2)), run_world(World(job(1, 2))), phase="Running")
    world = apply(world, run_world(world))
    world = set_phase(world, "Failed", "mnist-worker-1")

    marking = run_world(world)
    assert marking.delete == () and marking.create == ()
    world = apply(world, marking)
    restarting = run_world(world)
    assert restarting.delete == (ChildRef("Pod", "mnist-worker-1"),)
    assert restarting.create == ()
    world = apply(world, restarting)
    assert sorted(p.name for p in world.pods) == ["mnist-master-0", "mnist-worker-0"]

    recreating = run_world(world)
    assert [(o.kind, o.name) for o in recreating.create] == [("Pod", "mnist-worker-1")]
    assert recreating.delete == ()
    world = apply(world, recreating, phase="Pending")
    assert conditions(world.job.status)[-1] == ("Running", "True")
    assert_nothing_to_do(run_world(world))


@pytest.mark.parametrize("clean", ["All", "Running", "None"])
def test_finished_job_converges_and_then_does_nothing(clean: str) -> None:
    owner = job(1, 2, clean=clean, status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Succeeded"], "Worker": ["Running", "Running"]})
    world = World(owner, pods, services)

    for _ in range(3):
        plan = run_world(world)
        if plan.empty:
            break
        world = apply(world, plan)
    assert_nothing_to_do(run_world(world))
    assert conditions(world.job.status)[-1] == ("Succeeded", "True")
    assert world.job.status.completion_time == NOW
    assert world.job.status.replica_statuses["Worker"].succeeded == 2


# -- events ---------------------------------------------------------------------------------------------

EVENTS = [
    ("first-pass", None, {}, [(EventType.NORMAL, "PyTorchJobCreated", "PyTorchJob mnist is created.")]),
    (
        "master-running",
        stored_status("Created"),
        {"Master": ["Running"], "Worker": ["Running"]},
        [(EventType.NORMAL, "PyTorchJobRunning", "PyTorchJob mnist is running.")],
    ),
    (
        "worker-restarting",
        stored_status("Created", "Running"),
        {"Master": ["Running"], "Worker": ["Failed"]},
        [
            (
                EventType.WARNING,
                "PyTorchJobRestarting",
                "PyTorchJob mnist is restarting because 1 Worker replica(s) failed.",
            )
        ],
    ),
    (
        "master-succeeded",
        stored_status("Created", "Running"),
        {"Master": ["Succeeded"], "Worker": ["Running"]},
        [(EventType.NORMAL, "PyTorchJobSucceeded", "PyTorchJob mnist is successfully completed.")],
    ),
    ("unchanged", stored_status("Created", "Running"), {"Master": ["Running"], "Worker": ["Running"]}, []),
]


@pytest.mark.parametrize(("status", "phases", "events"), [e[1:] for e in EVENTS], ids=[e[0] for e in EVENTS])
def test_events_for_conditions_that_became_true(
    status: dict[str, Any] | None, phases: dict[str, list[str]], events: list[tuple[EventType, str, str]]
) -> None:
    owner = job(1, 1, status=status)
    pods, services = replicas(owner, phases)

    plan = run(owner, pods, services)

    assert list(plan.events) == [Event(*e) for e in events]


def test_failed_job_emits_a_warning() -> None:
    owner = job(1, 1, restart="Never", status=stored_status("Created", "Running"))
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Failed"]})

    plan = run(owner, pods, services)

    assert [(e.type, e.reason) for e in plan.events] == [(EventType.WARNING, "PyTorchJobFailed")]
    assert plan.events[0].message == "PyTorchJob mnist is failed because 1 Worker replica(s) failed."


def test_resuming_a_suspended_job_restarts_the_clock_and_creates_its_pods() -> None:
    # Reference §6.1 step 4: Suspended flips to False (reason <Kind>Resumed) and startTime is reset.
    owner = job(1, 1, status=stored_status("Created", "Suspended"), extra_spec={"runPolicy": {"suspend": False}})

    plan = run(owner, (), ())

    assert plan.status is not None
    suspended = next(c for c in plan.status.conditions if c.type == "Suspended")
    assert (suspended.status, suspended.reason) == ("False", "PyTorchJobResumed")
    assert plan.status.start_time == NOW
    assert {obj.name for obj in plan.create} == {"mnist-master-0", "mnist-worker-0"}


# -- a replica the API server refused (a ResourceQuota's 403) -------------------------------------------


def test_the_created_condition_says_which_replica_the_server_refused_until_it_is_created() -> None:
    import dataclasses

    from job_builders import observe, reconciled

    stored = job(master=1, workers=1, status=stored_status("Created"))
    refusal = 'pods "mnist-worker-0" is forbidden: exceeded quota: q, requested: pods=1, used: pods=2, limited: pods=2'
    observed = dataclasses.replace(observe(stored), refused={"mnist-worker-0": refusal})
    plan = reconciled(observed)
    [told] = [c for c in plan.status.conditions if c.type is ConditionType.CREATED]
    assert (told.status, told.message) == ("True", f"PyTorchJob {NAME} is created. Pod mnist-worker-0 waits: {refusal}")
    assert told.last_transition_time == stored.status.conditions[0].last_transition_time  # only the message moved
    # Once the refused pod exists it is no longer planned, and the message is the plain one again.
    world = apply(World(stored), run(stored))
    again = dataclasses.replace(observe(world.job, world.pods, world.services), refused={"mnist-worker-0": refusal})
    later = reconciled(again)
    status = later.status if later.status is not None else world.job.status
    assert (
        next(c.message for c in status.conditions if c.type is ConditionType.CREATED)
        == f"PyTorchJob {NAME} is created."
    )
