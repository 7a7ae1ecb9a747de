"""The TrainJob reconciler and the runtime plugins, on plain values (no I/O)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trainyard.api import trainer
from trainyard.controller.trainjob import (
    PORT_KEY,
    TrainJobObserved,
    TrainJobSettings,
    reconcile,
)
from trainyard.frameworks.network import NetworkMode

Obj = dict[str, Any]
NOW = datetime(2026, 11, 26, 12, 0, 0, tzinfo=UTC)
CLUSTER = TrainJobSettings()
HOST = TrainJobSettings(NetworkMode.HOST, "127.0.0.1")


def runtime(policy: Obj | None = None, **spec: Any) -> Obj:
    return {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.CLUSTER_TRAINING_RUNTIME,
        "metadata": {"name": "rt", "labels": {trainer.FRAMEWORK_LABEL: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, **(policy if policy is not None else {"torch": {}})},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {trainer.ANCESTOR_LABEL: "trainer"}},
                                "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "img:1"}]}}},
                            },
                        }
                    ]
                }
            },
            **spec,
        },
    }


def trainjob(**spec: Any) -> Obj:
    return {
        "apiVersion": trainer.API_VERSION,
        "kind": trainer.TRAINJOB,
        "metadata": {"name": "tj", "namespace": "ns", "uid": "u1", "creationTimestamp": "2026-11-26T11:59:00Z"},
        "spec": {"runtimeRef": {"name": "rt"}, **spec},
    }


def observe(tj: Obj, rt: Obj | None, *children: Obj, now: datetime = NOW, **extra: Any) -> TrainJobObserved:
    by_key = {(c["kind"], c["metadata"]["name"]): c for c in children}
    return TrainJobObserved(tj, rt, by_key, now, key_pairs=lambda: ("PRIVATE", "ssh-ecdsa PUBLIC"), **extra)


def env_of(container: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env") or []}


def node_container(js: Obj, rjob: str = "node") -> Obj:
    found = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == rjob)
    return found["template"]["spec"]["template"]["spec"]["containers"][0]


def the_jobset(plan: Any) -> Obj:
    return next(o for o in plan.apply if o["kind"] == "JobSet")


def test_torch_runtime_builds_an_indexed_gang_with_upstreams_env_and_overrides() -> None:
    tj = trainjob(
        trainer={
            "numNodes": 2,
            "image": "mine:2",
            "command": ["torchrun", "train.py"],
            "env": [{"name": "LR", "value": "0.1"}],
            "resourcesPerNode": {"requests": {"cpu": "1500m"}},
        }
    )
    plan = reconcile(observe(tj, runtime()), CLUSTER)
    js = the_jobset(plan)
    assert js["metadata"]["name"] == "tj" and js["spec"]["suspend"] is False
    node = js["spec"]["replicatedJobs"][0]
    assert (node["replicas"], node["template"]["spec"]["parallelism"], node["template"]["spec"]["completions"]) == (
        1,
        2,
        2,
    )
    c = node_container(js)
    assert (c["image"], c["command"], c["resources"]) == (
        "mine:2",
        ["torchrun", "train.py"],
        {"requests": {"cpu": "1500m"}},
    )
    env = env_of(c)
    assert env["LR"] == "0.1"
    assert (env["PET_NNODES"], env["PET_NPROC_PER_NODE"]) == ("2", "2")  # auto: CPUs requested, rounded up
    assert env["PET_NODE_RANK"] == {
        "fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
    }
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("tj-node-0-0.tj", "29500")
    assert {"containerPort": 29500, "protocol": "TCP"} in c["ports"]
    assert plan.status == {"state": "Pending"}


def test_host_mode_allocates_node_zeros_port_first_then_points_every_framework_at_the_node() -> None:
    tj = trainjob(trainer={"numNodes": 3})
    assert reconcile(observe(tj, runtime()), HOST).allocate_ports == (PORT_KEY,)
    for policy, expected in (
        ({"torch": {}}, {"PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "24000", "PET_NPROC_PER_NODE": "1"}),
        ({"jax": {}}, {"JAX_NUM_PROCESSES": "3", "JAX_COORDINATOR_ADDRESS": "127.0.0.1:24000"}),
        ({"xgboost": {}}, {"DMLC_TRACKER_URI": "127.0.0.1", "DMLC_TRACKER_PORT": "24000", "DMLC_NUM_WORKER": "3"}),
    ):
        plan = reconcile(observe(tj, runtime(policy), host_ports={PORT_KEY: 24000}), HOST)
        c = node_container(the_jobset(plan))
        assert expected.items() <= env_of(c).items(), policy
        assert "ports" not in c  # the node's network is shared: nothing to declare


def test_mpi_runtime_sizes_nodes_writes_the_hostfile_and_the_ssh_secret_once() -> None:
    rt = runtime({"mpi": {"numProcPerNode": 2, "runLauncherAsNode": True, "sshAuthMountPath": "/home/u/.ssh"}})
    launcher = copy.deepcopy(rt["spec"]["template"]["spec"]["replicatedJobs"][0])
    launcher["name"] = "launcher"
    node = rt["spec"]["template"]["spec"]["replicatedJobs"][0]
    node["template"]["metadata"]["labels"] = {}
    rt["spec"]["template"]["spec"]["replicatedJobs"].append(launcher)
    plan = reconcile(observe(trainjob(trainer={"numNodes": 3}), rt), CLUSTER)
    kinds = sorted(o["kind"] for o in plan.apply)
    assert kinds == ["ConfigMap", "JobSet", "Secret"]
    js = the_jobset(plan)
    assert node_container(js)["volumeMounts"] == [{"name": "mpi-ssh-auth", "mountPath": "/home/u/.ssh"}]
    env = env_of(node_container(js, "launcher"))
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "2"
    config = next(o for o in plan.apply if o["kind"] == "ConfigMap")
    assert config["metadata"]["name"] == "tj-mpi-hostfile"
    assert config["data"]["hostfile"] == (
        "tj-launcher-0-0.tj slots=2\ntj-node-0-0.tj slots=2\ntj-node-0-1.tj slots=2\n"
    )
    secret = next(o for o in plan.apply if o["kind"] == "Secret")
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    # the Secret exists: never generated or written again
    again = reconcile(observe(trainjob(trainer={"numNodes": 3}), rt, {**secret, "kind": "Secret"}, js, config), CLUSTER)
    assert again.apply == ()


def test_a_missing_runtime_is_a_warning_retried_and_an_unsupported_kind_fails() -> None:
    plan = reconcile(observe(trainjob(), None), CLUSTER)
    assert plan.apply == () and plan.requeue_after == timedelta(seconds=30)
    assert [e.reason for e in plan.events] == ["TrainJobResourcesCreationFailed"]
    assert "ClusterTrainingRuntime 'rt' does not exist" in plan.events[0].message
    bad = trainjob()
    bad["spec"]["runtimeRef"] = {"name": "rt", "kind": "Deployment", "apiGroup": "apps"}
    plan = reconcile(observe(bad, None), CLUSTER)
    assert plan.status is not None
    failed = plan.status["conditions"][0]
    assert (failed["type"], failed["reason"], failed["message"]) == (
        "Failed",
        "TrainingRuntimeNotSupported",
        "unsupported runtime: Deployment.apps",
    )
    assert plan.status["state"] == "Failed"


def test_reserved_env_for_the_runtime_is_refused_with_the_field() -> None:
    tj = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "9"}]})
    plan = reconcile(observe(tj, runtime()), CLUSTER)
    assert plan.apply == ()
    assert "spec.trainer.env" in plan.events[0].message and "PET_NNODES" in plan.events[0].message


def _jobset_status(plan: Any, **status: Any) -> Obj:
    js = copy.deepcopy(the_jobset(plan))
    js["metadata"]["resourceVersion"] = "7"
    js["status"] = status
    return js


def test_status_follows_the_jobset_without_created_or_running_conditions() -> None:
    tj = trainjob(trainer={"numNodes": 2})
    first = reconcile(observe(tj, runtime()), CLUSTER)
    running = _jobset_status(
        first,
        replicatedJobsStatus=[{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}],
    )
    plan = reconcile(observe(tj, runtime(), running), CLUSTER)
    assert plan.apply == ()  # a running JobSet is never rewritten
    assert plan.status == {
        "jobsStatus": [{"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}],
        "state": "Running",
    }
    done = _jobset_status(
        first,
        conditions=[
            {
                "type": "Completed",
                "status": "True",
                "reason": "AllJobsCompleted",
                "message": "jobset completed",
                "lastTransitionTime": "2026-11-26T12:00:00Z",
            }
        ],
    )
    plan = reconcile(observe(tj, runtime(), done), CLUSTER)
    assert plan.status is not None
    assert [(c["type"], c["status"], c["reason"]) for c in plan.status["conditions"]] == [
        ("Complete", "True", "AllJobsCompleted")
    ]
    assert plan.status["state"] == "Complete"
    assert [e.reason for e in plan.events] == ["TrainJobComplete"]


def test_suspend_and_resume_flip_the_jobset_and_the_condition() -> None:
    tj = trainjob(suspend=True)
    first = reconcile(observe(tj, runtime()), CLUSTER)
    assert the_jobset(first)["spec"]["suspend"] is True
    assert first.status is not None and first.status["state"] == "Suspended"
    cond = first.status["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "Suspended",
        "True",
        "Suspended",
        "TrainJob is suspended",
    )
    js = _jobset_status(first)
    resumed = trainjob(suspend=False)
    resumed["status"] = first.status
    plan = reconcile(observe(resumed, runtime(), js, now=NOW + timedelta(seconds=5)), CLUSTER)
    assert [o["spec"]["suspend"] for o in plan.apply] == [False]
    assert plan.apply[0]["metadata"]["resourceVersion"] == "7"  # replaced as read
    assert plan.status is not None
    cond = plan.status["conditions"][0]
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == ("False", "Resumed", "2026-11-26T12:00:05Z")


@pytest.mark.parametrize(("elapsed", "fails"), [(30, False), (61, True)])
def test_active_deadline_counts_from_creation_and_deletes_the_jobset(elapsed: int, fails: bool) -> None:
    tj = trainjob(activeDeadlineSeconds=120)
    first = reconcile(observe(tj, runtime()), CLUSTER)
    js = _jobset_status(first)
    plan = reconcile(observe(tj, runtime(), js, now=NOW + timedelta(seconds=elapsed)), CLUSTER)
    if fails:
        assert [r.name for r in plan.delete] == ["tj"]
        assert plan.status is not None and plan.status["conditions"][0]["reason"] == "DeadlineExceeded"
    else:
        assert plan.delete == () and plan.requeue_after == timedelta(seconds=120 - 60 - elapsed)


def test_runtime_patches_and_coscheduling_reach_the_pod_templates() -> None:
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "metadata": {"labels": {"team": "a"}},
                                        "spec": {
                                            "nodeSelector": {"pool": "x"},
                                            "containers": [{"name": "node", "env": [{"name": "A", "value": "1"}]}],
                                        },
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    rt = runtime(podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 90}})
    plan = reconcile(observe(trainjob(runtimePatches=[patch], trainer={"numNodes": 2}), rt), CLUSTER)
    js = the_jobset(plan)
    pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["labels"] == {"team": "a", "scheduling.x-k8s.io/pod-group": "tj"}
    assert pod["spec"]["nodeSelector"] == {"pool": "x"}
    assert env_of(pod["spec"]["containers"][0])["A"] == "1"
    group = next(o for o in plan.apply if o["kind"] == "PodGroup")
    assert group["spec"] == {"minMember": 2, "scheduleTimeoutSeconds": 90}


def test_a_trainjob_managed_elsewhere_or_being_deleted_gets_nothing() -> None:
    assert reconcile(observe(trainjob(managedBy="kueue.x-k8s.io/multikueue"), runtime()), CLUSTER).apply == ()
    going = trainjob()
    going["metadata"]["deletionTimestamp"] = "2026-11-26T12:00:00Z"
    assert reconcile(observe(going, runtime()), CLUSTER).status is None
