"""The XGBoost plugin: the env every replica gets (reference §3.3), its pods' roles (§4) and the
success/failure rule (§8), plus the job it lays out for a Python function.

Jobs are written as a user writes them and defaulted as the reconciler does before it asks the
plugin, so ports and replicas are the defaulted ones.
"""

from __future__ import annotations

from typing import Any

import pytest

import replica_pods
from trainyard.api import ConditionType, labels
from trainyard.api.defaults import apply_defaults
from trainyard.api.kubeflow.xgboost import XGBOOSTJOB, XGBoostJob
from trainyard.controller import ControllerSettings, Observed, reconcile
from trainyard.controller.children import build_pod, required_port_keys
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.registry import function_jobs, plugin_for
from trainyard.frameworks.xgboost import XGBoost

PLUGIN = XGBoost()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST_PORTS = {"master-0/xgboostjob-port": 31000, "worker-0/xgboostjob-port": 31001, "worker-1/xgboostjob-port": 31002}
HOST = Network(NetworkMode.HOST, HOST_PORTS, node_address="10.1.2.3")


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "xgboost", "image": "xgb:3", **container}]}}


def job(
    master: int = 1, workers: int = 2, *, restart: str | None = None, tmpl: dict[str, Any] | None = None
) -> XGBoostJob:
    """A defaulted XGBoostJob named ``iris`` in ``team-a``; ``master=0`` leaves Master out."""
    specs: dict[str, Any] = {}
    if master:
        specs["Master"] = {"replicas": master, "template": tmpl or template()}
    if workers:
        specs["Worker"] = {"replicas": workers, "template": tmpl or template()}
    if restart is not None:
        for spec in specs.values():
            spec["restartPolicy"] = restart
    body = {"metadata": {"name": "iris", "namespace": "team-a", "uid": "u"}, "spec": {"xgbReplicaSpecs": specs}}
    return apply_defaults(XGBoostJob.model_validate(body), XGBOOSTJOB)


def env(owner: XGBoostJob, rtype: str, index: int, network: Network = DNS) -> list[tuple[str, str | None]]:
    """The variables in order: upstream appends them in a fixed order, so the order is checked too."""
    return [(e.name, e.value) for e in PLUGIN.env(owner, rtype, index, network)]


def test_registry_gives_the_xgboost_plugin_with_function_jobs() -> None:
    assert plugin_for("XGBoostJob").info is XGBOOSTJOB
    assert function_jobs("XGBoostJob") is plugin_for("XGBoostJob")


# -- env (§3.3) ----------------------------------------------------------------------------------------


def expected(rank: int, *, addr: str = "iris-master-0", port: str = "9999", world: int = 3) -> list[tuple[str, str]]:
    return [
        ("MASTER_PORT", port),
        ("MASTER_ADDR", addr),
        ("WORLD_SIZE", str(world)),
        ("RANK", str(rank)),
        ("PYTHONUNBUFFERED", "1"),
    ]


CLUSTER_WORKERS = [("WORKER_PORT", "9999"), ("WORKER_ADDRS", "iris-worker-0,iris-worker-1")]


@pytest.mark.parametrize(
    ("rtype", "index", "rank"),
    [("Master", 0, 0), ("Worker", 0, 1), ("Worker", 1, 2)],
    ids=["master-0", "worker-0", "worker-1"],
)
def test_cluster_dns_env_names_the_master_service_and_every_worker(rtype: str, index: int, rank: int) -> None:
    assert env(job(), rtype, index) == [*expected(rank), *CLUSTER_WORKERS]


@pytest.mark.parametrize(("rtype", "index", "rank"), [("Master", 0, 0), ("Worker", 1, 2)], ids=["master-0", "worker-1"])
def test_host_env_points_at_the_node_and_the_masters_allocated_port(rtype: str, index: int, rank: int) -> None:
    # Every address is the node's: WORKER_ADDRS repeats it, and WORKER_PORT is worker-0's own port.
    assert env(job(), rtype, index, HOST) == [
        *expected(rank, addr="10.1.2.3", port="31000"),
        ("WORKER_PORT", "31001"),
        ("WORKER_ADDRS", "10.1.2.3,10.1.2.3"),
    ]


def test_host_mode_allocates_a_port_for_every_replica() -> None:
    assert sorted(required_port_keys(job(), PLUGIN)) == sorted(HOST_PORTS)


def test_host_env_before_the_ports_are_allocated_uses_the_declared_ones() -> None:
    assert env(job(), "Worker", 0, Network(NetworkMode.HOST))[:2] == [
        ("MASTER_PORT", "9999"),
        ("MASTER_ADDR", "127.0.0.1"),
    ]


def test_a_master_alone_gets_no_worker_variables() -> None:
    assert env(job(1, 0), "Master", 0) == expected(0, world=1)


def test_ports_are_the_declared_xgboostjob_ports() -> None:
    custom = template(ports=[{"name": "xgboostjob-port", "containerPort": 9991}])
    got = dict(env(job(tmpl=custom), "Worker", 0))

    assert (got["MASTER_PORT"], got["WORKER_PORT"]) == ("9991", "9991")


def test_a_job_without_master_gets_only_unbuffered_output() -> None:
    # Admission refuses it; should one reach the operator anyway, its pods still get built.
    assert env(job(0, 2), "Worker", 0) == [("PYTHONUNBUFFERED", "1")]


def test_env_follows_the_containers_own_and_reaches_every_container() -> None:
    tmpl = {
        "spec": {
            "containers": [
                {"name": "xgboost", "image": "xgb:3", "env": [{"name": "RANK", "value": "mine"}]},
                {"name": "sidecar", "image": "busybox"},
            ]
        }
    }
    pod = build_pod(job(tmpl=tmpl), PLUGIN, "Worker", 1, DNS)

    main, sidecar = pod.spec.containers
    assert [(e.name, e.value) for e in main.env or []] == [("RANK", "mine"), *expected(2), *CLUSTER_WORKERS]
    assert [(e.name, e.value) for e in sidecar.env or []] == [*expected(2), *CLUSTER_WORKERS]


# -- pods (§4) -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "index", "role"), [("Master", 0, "master"), ("Worker", 0, None)], ids=["master", "worker"]
)
def test_the_master_pod_has_the_master_role(rtype: str, index: int, role: str | None) -> None:
    pod = build_pod(job(), PLUGIN, rtype, index, DNS)

    assert pod.metadata.name == f"iris-{rtype.lower()}-{index}"
    pod_labels = pod.metadata.labels or {}
    assert pod_labels[labels.OPERATOR_NAME] == "xgboostjob-controller"
    assert pod_labels[labels.REPLICA_TYPE] == rtype.lower()
    assert pod_labels.get(labels.JOB_ROLE) == role
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.init_containers is None  # upstream waits for nothing: workers retry the tracker


def test_the_world_is_static() -> None:
    assert PLUGIN.is_elastic(job()) is False
    assert PLUGIN.rendezvous_host(job()) is None
    assert list(PLUGIN.children(job())) == []
    assert list(PLUGIN.init_containers(job(), "Worker", 0, DNS)) == []


# -- verdicts (§8) -------------------------------------------------------------------------------------


def counts(replicas: int, active: int = 0, succeeded: int = 0, failed: int = 0, policy: str = "Never") -> ReplicaCounts:
    return ReplicaCounts(replicas=replicas, active=active, succeeded=succeeded, failed=failed, restart_policy=policy)


RUNNING = Verdict(ConditionType.RUNNING, "XGBoostJob iris is running.")
SUCCEEDED = Verdict(ConditionType.SUCCEEDED, "XGBoostJob iris is successfully completed.")


def restarting(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.RESTARTING, f"XGBoostJob iris is restarting because {n} {rtype} replica(s) failed.")


def failed(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.FAILED, f"XGBoostJob iris is failed because {n} {rtype} replica(s) failed.")


VERDICTS = [
    ("all-pending", counts(1), counts(2), []),
    ("master-running", counts(1, active=1), counts(2, active=2), [RUNNING]),
    ("only-workers-running", counts(1), counts(2, active=2), []),
    ("master-succeeded-sets-running-too", counts(1, succeeded=1), counts(2), [RUNNING, SUCCEEDED]),
    ("master-succeeded-workers-running", counts(1, succeeded=1), counts(2, active=2), [RUNNING, SUCCEEDED]),
    (
        "master-succeeded-beats-a-failed-worker",
        counts(1, succeeded=1),
        counts(2, active=1, failed=1),
        [RUNNING, SUCCEEDED],
    ),
    (
        "worker-failed-Never",
        counts(1, active=1),
        counts(2, active=1, failed=1),
        [RUNNING, failed(1, "Worker")],
    ),
    (
        "failed-even-when-others-cover-the-replicas",
        counts(1),
        counts(2, active=2, failed=1),
        [RUNNING, failed(1, "Worker")],
    ),
    ("two-workers-failed-Never", counts(1, active=1), counts(3, failed=2), [RUNNING, failed(2, "Worker")]),
    ("master-failed-Never", counts(1, failed=1), counts(2, active=2), [RUNNING, failed(1, "Master")]),
    (
        "worker-failed-ExitCode",
        counts(1, active=1),
        counts(2, active=1, failed=1, policy="ExitCode"),
        [RUNNING, restarting(1, "Worker")],
    ),
    (
        "worker-failed-OnFailure",
        counts(1, active=1),
        counts(2, failed=1, policy="OnFailure"),
        [RUNNING, restarting(1, "Worker")],
    ),
    ("master-failed-Always", counts(1, failed=1, policy="Always"), counts(2, active=2), [restarting(1, "Master")]),
    (
        "master-restarts-worker-fails",
        counts(1, failed=1, policy="ExitCode"),
        counts(2, failed=1),
        [restarting(1, "Master"), RUNNING, failed(1, "Worker")],
    ),
]


@pytest.mark.parametrize(("master", "worker", "expected"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS])
def test_verdicts(master: ReplicaCounts, worker: ReplicaCounts, expected: list[Verdict]) -> None:
    assert list(PLUGIN.verdicts(job(1, worker.replicas), {"Master": master, "Worker": worker})) == expected


def test_a_master_alone_succeeds() -> None:
    assert list(PLUGIN.verdicts(job(1, 0), {"Master": counts(1, succeeded=1)})) == [RUNNING, SUCCEEDED]


# -- jobs from a function ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("workers", "layout"), [(1, {"Master": 1}), (3, {"Master": 1, "Worker": 2})], ids=["one", "three"]
)
def test_a_function_job_is_one_master_and_the_rest_workers(workers: int, layout: dict[str, int]) -> None:
    tmpl = template()
    spec = PLUGIN.function_spec(tmpl, workers, None, {})

    assert spec["runPolicy"] == {}
    assert {k: v["replicas"] for k, v in spec["xgbReplicaSpecs"].items()} == layout
    assert all(v["template"] is tmpl for v in spec["xgbReplicaSpecs"].values())
    assert PLUGIN.function_entrypoint(workers, None) == "python -u"


def test_a_function_job_has_no_processes_per_worker() -> None:
    with pytest.raises(ValueError, match="num_procs_per_worker"):
        PLUGIN.function_spec(template(), 2, 2, {})


# -- through the reconciler: the engine's restarts and the plugin's verdicts together ------------------

NOW = replica_pods.NOW


def running_job(restart: str) -> XGBoostJob:
    """An XGBoostJob as stored after a pass saw it run: written by a user, Created and Running."""
    body = job(restart=restart).to_dict()
    del body["spec"]["xgbReplicaSpecs"]["Master"]["replicas"]  # as users write it; defaulting makes it 1
    return XGBoostJob.model_validate(replica_pods.seen_running(body, "XGBoostJob"))


def observed(owner: XGBoostJob, phases: dict[str, str], exit_code: int = 1) -> Observed:
    return replica_pods.observed(owner, PLUGIN, phases, exit_code)


PHASES = {"master-0": "Running", "worker-0": "Running", "worker-1": "Failed"}


def test_a_failed_worker_under_never_fails_the_job() -> None:
    plan = reconcile(observed(running_job("Never"), PHASES), PLUGIN, ControllerSettings())

    assert plan.status is not None
    assert [(c.type, c.status) for c in plan.status.conditions] == [
        ("Created", "True"),
        ("Running", "False"),
        ("Failed", "True"),
    ]
    assert plan.status.conditions[-1].message == "XGBoostJob iris is failed because 1 Worker replica(s) failed."
    assert plan.status.completion_time == NOW


@pytest.mark.parametrize("policy", ["OnFailure", "ExitCode"])
def test_a_failed_worker_that_restarts_restarts_the_whole_gang(policy: str) -> None:
    # 137 (SIGKILL) is retryable under ExitCode; under OnFailure any exit restarts.
    plan = reconcile(observed(running_job(policy), PHASES, exit_code=137), PLUGIN, ControllerSettings())

    assert plan.status is not None and plan.status.restart_count == 1
    last = plan.status.conditions[-1]
    assert (last.type, last.reason) == ("Restarting", "XGBoostJobRestarting")
    assert last.message is not None and last.message.startswith("XGBoostJob iris is restarting all replicas")
    # Every pod of the old generation is marked for re-creation, not only the failed one.
    assert {e.recreate for e in plan.status.pod_ledger or []} == {True}
    assert len(plan.status.pod_ledger or []) == 3


def test_the_masters_success_is_the_jobs() -> None:
    phases = {"master-0": "Succeeded", "worker-0": "Succeeded", "worker-1": "Running"}
    plan = reconcile(observed(running_job("Never"), phases), PLUGIN, ControllerSettings())

    assert plan.status is not None
    assert [(c.type, c.status, c.reason) for c in plan.status.conditions][-2:] == [
        ("Running", "False", "XGBoostJobRunning"),
        ("Succeeded", "True", "XGBoostJobSucceeded"),
    ]
    assert plan.status.conditions[-1].message == "XGBoostJob iris is successfully completed."
