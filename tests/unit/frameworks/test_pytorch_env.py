"""The PyTorch plugin: the env every replica gets (reference §3.1) and the success/failure rule (§8).

Jobs are written as a user writes them and defaulted as the reconciler does before it asks the
plugin, so ports, replicas and ``nprocPerNode`` are the defaulted ones.
"""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api import PYTORCHJOB, ConditionType, PyTorchJob
from trainyard.api.defaults import apply_defaults
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode, replica_name
from trainyard.frameworks.pytorch import PyTorch
from trainyard.frameworks.registry import plugin_for

PLUGIN = PyTorch()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST_PORTS = {
    "master-0/pytorchjob-port": 31000,
    "worker-0/pytorchjob-port": 31001,
    "worker-1/pytorchjob-port": 31002,
    "rdzv/c10d": 31009,
}
HOST = Network(NetworkMode.HOST, HOST_PORTS, node_address="10.1.2.3")


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "pytorch", "image": "pytorch:2", **container}]}}


def job(
    master: int = 1,
    workers: int = 2,
    *,
    nproc: str | None = None,
    elastic: dict[str, Any] | None = None,
    restart: str = "OnFailure",
    tmpl: dict[str, Any] | None = None,
) -> PyTorchJob:
    """A defaulted PyTorchJob named ``mnist`` in ``team-a``; ``master=0`` leaves Master out."""
    specs: dict[str, Any] = {}
    if master:
        specs["Master"] = {"restartPolicy": restart, "template": tmpl or template()}
    if workers:
        specs["Worker"] = {"replicas": workers, "restartPolicy": restart, "template": tmpl or template()}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": specs}
    if nproc is not None:
        spec["nprocPerNode"] = nproc
    if elastic is not None:
        spec["elasticPolicy"] = elastic
    raw = PyTorchJob.model_validate({"metadata": {"name": "mnist", "namespace": "team-a", "uid": "u"}, "spec": spec})
    return apply_defaults(raw, PYTORCHJOB)


def env(owner: PyTorchJob, rtype: str, index: int, network: Network = DNS) -> dict[str, str | None]:
    out = PLUGIN.env(owner, rtype, index, network)
    names = [e.name for e in out]
    assert len(names) == len(set(names)), f"duplicate variables: {names}"
    return {e.name: e.value for e in out}


def test_registry_gives_the_pytorch_plugin() -> None:
    assert plugin_for("PyTorchJob").info is PYTORCHJOB
    with pytest.raises(LookupError, match="TrainJob"):
        plugin_for("TrainJob")


# -- Master + Workers ----------------------------------------------------------------------------------


def with_master(rank: str, *, addr: str = "mnist-master-0", port: str = "23456", world: str = "3") -> dict[str, str]:
    return {
        "PYTHONUNBUFFERED": "1",
        "MASTER_ADDR": addr,
        "PET_MASTER_ADDR": addr,
        "MASTER_PORT": port,
        "PET_MASTER_PORT": port,
        "WORLD_SIZE": world,
        "RANK": rank,
        "PET_NODE_RANK": rank,
        "PET_NPROC_PER_NODE": "auto",
        "PET_NNODES": "3",
    }


MASTER_ENV = [
    ("cluster-dns-master-0", "Master", 0, DNS, with_master("0")),
    ("cluster-dns-worker-0", "Worker", 0, DNS, with_master("1")),
    ("cluster-dns-worker-1", "Worker", 1, DNS, with_master("2")),
    ("host-master-0", "Master", 0, HOST, with_master("0", addr="10.1.2.3", port="31000")),
    ("host-worker-1", "Worker", 1, HOST, with_master("2", addr="10.1.2.3", port="31000")),
    (
        "host-master-port-not-allocated-yet",
        "Worker",
        0,
        Network(NetworkMode.HOST),
        with_master("1", addr="127.0.0.1", port="23456"),
    ),
]


@pytest.mark.parametrize(
    ("rtype", "index", "network", "expected"), [c[1:] for c in MASTER_ENV], ids=[c[0] for c in MASTER_ENV]
)
def test_master_and_workers(rtype: str, index: int, network: Network, expected: dict[str, str]) -> None:
    assert env(job(1, 2), rtype, index, network) == expected


def test_master_port_is_the_declared_pytorchjob_port() -> None:
    custom = template(ports=[{"name": "pytorchjob-port", "containerPort": 29500}])

    assert env(job(1, 1, tmpl=custom), "Worker", 0)["MASTER_PORT"] == "29500"


# -- worker-only jobs and nprocPerNode -------------------------------------------------------------------

WORKER_ONLY = {"PYTHONUNBUFFERED": "1", "PET_NPROC_PER_NODE": "auto", "PET_NNODES": "3"}


@pytest.mark.parametrize("index", [0, 1, 2], ids=["worker-0", "worker-1", "worker-2"])
@pytest.mark.parametrize("network", [DNS, HOST], ids=["cluster-dns", "host"])
def test_worker_only_job_gets_no_master_variables_and_no_rank(index: int, network: Network) -> None:
    assert env(job(0, 3), "Worker", index, network) == WORKER_ONLY


NPROC = [
    # id, nprocPerNode, master, workers, WORLD_SIZE, PET_NPROC_PER_NODE
    ("integer-4", "4", 1, 1, "8", "4"),
    ("integer-2-three-nodes", "2", 1, 2, "6", "2"),
    ("auto-counts-as-1", "auto", 1, 3, "4", "auto"),
    ("gpu-counts-as-1", "gpu", 1, 1, "2", "gpu"),
    ("cpu-counts-as-1", "cpu", 1, 1, "2", "cpu"),
    ("default-is-auto", None, 1, 1, "2", "auto"),
]


@pytest.mark.parametrize(
    ("nproc", "masters", "workers", "world", "pet_nproc"), [c[1:] for c in NPROC], ids=[c[0] for c in NPROC]
)
def test_world_size_counts_processes_per_node(
    nproc: str | None, masters: int, workers: int, world: str, pet_nproc: str
) -> None:
    got = env(job(masters, workers, nproc=nproc), "Worker", 0)

    assert got["WORLD_SIZE"] == world
    assert got["PET_NPROC_PER_NODE"] == pet_nproc
    assert got["PET_NNODES"] == str(masters + workers)


# -- elasticPolicy -------------------------------------------------------------------------------------

FULL_ELASTIC = {
    "minReplicas": 1,
    "maxReplicas": 4,
    "maxRestarts": 3,
    "rdzvId": "mnist-run-7",
    "rdzvConf": [{"key": "k1", "value": "v1"}, {"key": "k2", "value": "v2"}],
    "standalone": True,
}


def test_elastic_block_in_upstream_order() -> None:
    out = PLUGIN.env(job(0, 2, elastic=FULL_ELASTIC), "Worker", 1, DNS)

    assert [(e.name, e.value) for e in out] == [
        ("PYTHONUNBUFFERED", "1"),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_RDZV_ENDPOINT", "mnist-worker-0:23456"),
        ("PET_RDZV_BACKEND", "c10d"),
        ("PET_NNODES", "1:4"),
        ("PET_MAX_RESTARTS", "3"),
        ("PET_RDZV_ID", "mnist-run-7"),
        ("PET_RDZV_CONF", "k1=v1,k2=v2"),
        ("PET_STANDALONE", ""),
    ]


DEFAULT_CONF = "is_host=false,last_call_timeout=3,keep_alive_interval=1,keep_alive_max_attempt=5"

ELASTIC = [
    # id, workers, elasticPolicy, network, expected subset of the env, names that must be absent
    (
        "minimal-defaults-use-the-operator-rendezvous-host",
        2,
        {},
        DNS,
        {
            "PET_RDZV_ENDPOINT": "mnist-rdzv:29400",
            "PET_RDZV_BACKEND": "c10d",
            "PET_NNODES": "2:2",
            "PET_RDZV_CONF": DEFAULT_CONF,
            "TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1",
        },
        ["PET_MAX_RESTARTS", "PET_RDZV_ID", "PET_STANDALONE", "MASTER_ADDR", "RANK"],
    ),
    (
        "rdzv-conf-merged-the-users-keys-win",
        2,
        {"rdzvConf": [{"key": "last_call_timeout", "value": "10"}, {"key": "join_timeout", "value": "60"}]},
        DNS,
        {
            "PET_RDZV_CONF": "last_call_timeout=10,join_timeout=60,is_host=false,"
            "keep_alive_interval=1,keep_alive_max_attempt=5"
        },
        [],
    ),
    (
        "users-is-host-wins",
        2,
        {"rdzvConf": [{"key": "is_host", "value": "true"}]},
        DNS,
        {"PET_RDZV_CONF": "is_host=true,last_call_timeout=3,keep_alive_interval=1,keep_alive_max_attempt=5"},
        [],
    ),
    (
        "rdzv-port-without-host-is-the-rendezvous-hosts-port",
        2,
        {"rdzvPort": 29500},
        HOST,
        {"PET_RDZV_ENDPOINT": "10.1.2.3:29500"},
        [],
    ),
    (
        "explicit-rdzv-host-is-upstreams-behaviour",
        2,
        {"rdzvHost": "store.example"},
        DNS,
        {"PET_RDZV_ENDPOINT": "store.example:23456"},
        ["PET_RDZV_CONF", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"],
    ),
    (
        "standalone-has-no-host",
        2,
        {"standalone": True},
        DNS,
        {"PET_RDZV_ENDPOINT": "mnist-worker-0:23456"},
        ["PET_RDZV_CONF", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"],
    ),
    ("only-max", 1, {"maxReplicas": 4}, DNS, {"PET_NNODES": "4:4"}, []),
    ("only-min", 3, {"minReplicas": 2}, DNS, {"PET_NNODES": "2:2"}, []),
    (
        "host-port-host-backend-override",
        2,
        {"rdzvHost": "rdzv.example", "rdzvPort": 2379, "rdzvBackend": "etcd-v2"},
        DNS,
        {"PET_RDZV_ENDPOINT": "rdzv.example:2379", "PET_RDZV_BACKEND": "etcd-v2"},
        ["PET_RDZV_CONF", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"],
    ),
    (
        "etcd-backend-has-no-host",
        2,
        {"rdzvBackend": "etcd-v2"},
        DNS,
        {"PET_RDZV_ENDPOINT": "mnist-worker-0:23456"},
        ["PET_RDZV_CONF"],
    ),
    (
        "host-network-uses-the-rendezvous-hosts-allocated-port",
        2,
        {"minReplicas": 1, "maxReplicas": 2},
        HOST,
        {"PET_RDZV_ENDPOINT": "10.1.2.3:31009", "PET_NNODES": "1:2"},
        [],
    ),
    ("empty-rdzv-conf", 1, {"rdzvConf": []}, DNS, {"PET_RDZV_CONF": DEFAULT_CONF}, []),
    ("standalone-false", 1, {"standalone": False}, DNS, {}, ["PET_STANDALONE"]),
    (
        "deprecated-nProcPerNode",
        2,
        {"nProcPerNode": 8},
        DNS,
        {"PET_NPROC_PER_NODE": "8"},
        [],
    ),
]


@pytest.mark.parametrize(
    ("workers", "policy", "network", "expected", "absent"), [c[1:] for c in ELASTIC], ids=[c[0] for c in ELASTIC]
)
def test_elastic_policy(
    workers: int, policy: dict[str, Any], network: Network, expected: dict[str, str], absent: list[str]
) -> None:
    got = env(job(0, workers, elastic=policy), "Worker", 0, network)

    assert {k: got.get(k) for k in expected} == expected
    assert [name for name in absent if name in got] == []


def test_a_containers_own_variable_wins_over_the_operators_default() -> None:
    tmpl = template(env=[{"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"}])
    got = env(job(0, 2, elastic={}, tmpl=tmpl), "Worker", 0)

    assert "TORCH_DISABLE_SHARE_RDZV_TCP_STORE" not in got  # the container's own "0" stays the only one


def test_rendezvous_host_is_asked_for_only_by_operator_hosted_c10d() -> None:
    hosted = PLUGIN.rendezvous_host(job(0, 3, elastic={"minReplicas": 2, "maxReplicas": 4}))
    assert hosted is not None
    assert (hosted.replica_type, hosted.port, hosted.allocate, hosted.port_name) == ("Worker", 29400, True, "c10d")
    assert hosted.command[:2] == ("python", "-c") and "TCPStore" in hosted.command[2]
    assert "$(" not in hosted.command[2]  # pod commands get $(VAR) expansion
    fixed = PLUGIN.rendezvous_host(job(0, 3, elastic={"rdzvPort": 29500}))
    assert fixed is not None and (fixed.port, fixed.allocate) == (29500, False)
    for policy in ({"rdzvHost": "h"}, {"rdzvBackend": "etcd"}, {"standalone": True}):
        assert PLUGIN.rendezvous_host(job(0, 3, elastic=policy)) is None, policy
    assert PLUGIN.rendezvous_host(job(1, 2)) is None


def test_elastic_job_with_a_master_also_gets_the_master_variables() -> None:
    got = env(job(1, 2, elastic={"minReplicas": 1, "maxReplicas": 2}), "Worker", 0)

    assert (got["MASTER_ADDR"], got["RANK"], got["WORLD_SIZE"]) == ("mnist-master-0", "1", "3")
    assert got["PET_NNODES"] == "1:2"


# -- master role and names -------------------------------------------------------------------------------

MASTER_ROLE = [
    ("with-master:Master-0", 1, "Master", 0, True),
    ("with-master:Worker-0", 1, "Worker", 0, False),
    ("no-master:Worker-0", 0, "Worker", 0, True),
    ("no-master:Worker-1", 0, "Worker", 1, False),
]


@pytest.mark.parametrize(
    ("masters", "rtype", "index", "expected"), [c[1:] for c in MASTER_ROLE], ids=[c[0] for c in MASTER_ROLE]
)
def test_master_role(masters: int, rtype: str, index: int, expected: bool) -> None:
    assert PLUGIN.is_master_role(job(masters, 2), rtype, index) is expected


@pytest.mark.parametrize(
    ("rtype", "index", "name"),
    [("Master", 0, "mnist-master-0"), ("Worker", 11, "mnist-worker-11"), ("a/b", 1, "mnist-a-b-1")],
    ids=["master", "worker-11", "slash-replaced"],
)
def test_replica_name(rtype: str, index: int, name: str) -> None:
    assert replica_name("mnist", rtype, index) == name


# -- verdicts (§8) ---------------------------------------------------------------------------------------


def counts(replicas: int, active: int = 0, succeeded: int = 0, failed: int = 0, policy: str = "OnFailure") -> Any:
    return ReplicaCounts(replicas=replicas, active=active, succeeded=succeeded, failed=failed, restart_policy=policy)


RUNNING = Verdict(ConditionType.RUNNING, "PyTorchJob mnist is running.")
SUCCEEDED = Verdict(ConditionType.SUCCEEDED, "PyTorchJob mnist is successfully completed.")
RUNNING_NS = Verdict(ConditionType.RUNNING, "PyTorchJob team-a/mnist is running.")
SUCCEEDED_NS = Verdict(ConditionType.SUCCEEDED, "PyTorchJob team-a/mnist successfully completed.")


def restarting(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.RESTARTING, f"PyTorchJob mnist is restarting because {n} {rtype} replica(s) failed.")


def failed(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.FAILED, f"PyTorchJob mnist is failed because {n} {rtype} replica(s) failed.")


WITH_MASTER = [
    ("all-pending", counts(1), counts(2), []),
    ("master-running", counts(1, active=1), counts(2, active=2), [RUNNING]),
    ("only-workers-running", counts(1), counts(2, active=2), []),
    ("master-succeeded", counts(1, succeeded=1), counts(2, active=2), [SUCCEEDED]),
    ("master-succeeded-workers-pending", counts(1, succeeded=1), counts(2), [SUCCEEDED]),
    (
        "master-succeeded-beats-a-failed-worker",
        counts(1, succeeded=1),
        counts(2, active=1, failed=1, policy="Never"),
        [SUCCEEDED],
    ),
    ("worker-failed-OnFailure", counts(1, active=1), counts(2, active=1, failed=1), [RUNNING, restarting(1, "Worker")]),
    (
        "worker-failed-ExitCode",
        counts(1, active=1),
        counts(2, active=1, failed=1, policy="ExitCode"),
        [RUNNING, restarting(1, "Worker")],
    ),
    (
        "worker-failed-Never",
        counts(1, active=1),
        counts(2, active=1, failed=1, policy="Never"),
        [RUNNING, failed(1, "Worker")],
    ),
    (
        "two-workers-failed-Never",
        counts(1, active=1),
        counts(3, active=1, failed=2, policy="Never"),
        [RUNNING, failed(2, "Worker")],
    ),
    ("master-failed-Never", counts(1, failed=1, policy="Never"), counts(2, active=2), [failed(1, "Master")]),
    ("master-failed-OnFailure", counts(1, failed=1), counts(2, active=2), [restarting(1, "Master")]),
    (
        "failed-pod-but-replicas-covered",
        counts(1, active=1),
        counts(2, active=2, failed=1, policy="Never"),
        [RUNNING],
    ),
]


@pytest.mark.parametrize(
    ("master", "worker", "expected"), [c[1:] for c in WITH_MASTER], ids=[c[0] for c in WITH_MASTER]
)
def test_verdicts_with_master(master: ReplicaCounts, worker: ReplicaCounts, expected: list[Verdict]) -> None:
    assert list(PLUGIN.verdicts(job(1, worker.replicas), {"Master": master, "Worker": worker})) == expected


WITHOUT_MASTER = [
    ("pending", False, counts(3), []),
    ("running", False, counts(3, active=3), [RUNNING_NS]),
    ("some-succeeded", False, counts(3, active=2, succeeded=1), [RUNNING_NS]),
    ("all-succeeded", False, counts(3, succeeded=3), [SUCCEEDED_NS]),
    ("elastic-one-succeeded", True, counts(3, active=2, succeeded=1), [SUCCEEDED_NS]),
    ("elastic-running", True, counts(3, active=3), [RUNNING_NS]),
    ("failed-Never", False, counts(3, active=2, failed=1, policy="Never"), [RUNNING_NS, failed(1, "Worker")]),
    ("failed-OnFailure", False, counts(3, active=2, failed=1), [RUNNING_NS, restarting(1, "Worker")]),
    ("all-failed-Never", False, counts(2, failed=2, policy="Never"), [failed(2, "Worker")]),
]


@pytest.mark.parametrize(
    ("elastic", "worker", "expected"), [c[1:] for c in WITHOUT_MASTER], ids=[c[0] for c in WITHOUT_MASTER]
)
def test_verdicts_without_master(elastic: bool, worker: ReplicaCounts, expected: list[Verdict]) -> None:
    owner = job(0, worker.replicas, elastic={} if elastic else None)

    assert list(PLUGIN.verdicts(owner, {"Worker": worker})) == expected
