"""The Paddle plugin: the env every replica gets (reference §3.4) and the success/failure rule (§8).

Jobs are written as a user writes them and defaulted as the reconciler does before it asks the
plugin. In host network mode each replica also gets ``PADDLE_RANK`` (every address is the node's,
so the launcher's own election could make any replica rank 0).
"""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api import ConditionType
from trainyard.api.defaults import apply_defaults
from trainyard.api.kubeflow.paddle import PADDLEJOB, PaddleJob
from trainyard.frameworks.base import ReplicaCounts
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.paddle import Paddle
from trainyard.frameworks.registry import plugin_for

PLUGIN = Paddle()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST = Network(
    NetworkMode.HOST,
    {"master-0/master": 31000, "worker-0/master": 31001, "worker-1/master": 31002, "worker-2/master": 31003},
    node_address="10.1.2.3",
)
POD_IP = {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "paddle", "image": "paddle:3", **container}]}}


def job(
    master: int = 0, workers: int = 2, *, restart: str = "OnFailure", tmpl: dict[str, Any] | None = None
) -> PaddleJob:
    """A defaulted PaddleJob named ``ocr`` in ``team-a``; ``master=0`` is collective mode."""
    specs: dict[str, Any] = {}
    if master:
        specs["Master"] = {"replicas": master, "restartPolicy": restart, "template": tmpl or template()}
    if workers:
        specs["Worker"] = {"replicas": workers, "restartPolicy": restart, "template": tmpl or template()}
    raw = PaddleJob.model_validate(
        {"metadata": {"name": "ocr", "namespace": "team-a", "uid": "u"}, "spec": {"paddleReplicaSpecs": specs}}
    )
    return apply_defaults(raw, PADDLEJOB)


def env(owner: PaddleJob, rtype: str, index: int, network: Network = DNS) -> list[tuple[str, Any]]:
    """The variables in order, ``valueFrom`` as a dict where there is one."""
    out = [e.to_dict() for e in PLUGIN.env(owner, rtype, index, network)]
    return [(e["name"], e["value"] if "value" in e else e["valueFrom"]) for e in out]


def test_registry_gives_the_paddle_plugin_with_upstreams_names() -> None:
    assert plugin_for("PaddleJob").info is PADDLEJOB
    assert (PADDLEJOB.controller_name, PADDLEJOB.framework, PADDLEJOB.short_names) == (
        "paddlejob-controller",
        "paddle",
        (),
    )


COMMON = [("PYTHONUNBUFFERED", "1"), ("PADDLE_JOB_ID", "ocr"), ("PADDLE_NNODES", "3")]
HOSTS_ITSELF = [("POD_IP_DUMMY", POD_IP)]

ENV = [
    # id, masters, workers, replica, network, expected (after COMMON)
    (
        "collective-dns-worker-0",
        0,
        3,
        ("Worker", 0),
        DNS,
        [*HOSTS_ITSELF, ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543")],
    ),
    ("collective-dns-worker-2", 0, 3, ("Worker", 2), DNS, [("PADDLE_MASTER", "ocr-worker-0:36543")]),
    (
        "collective-host-worker-0",
        0,
        3,
        ("Worker", 0),
        HOST,
        [*HOSTS_ITSELF, ("PADDLE_MASTER", "$(POD_IP_DUMMY):31001"), ("PADDLE_RANK", "0")],
    ),
    (
        "collective-host-worker-2",
        0,
        3,
        ("Worker", 2),
        HOST,
        [("PADDLE_MASTER", "10.1.2.3:31001"), ("PADDLE_RANK", "2")],
    ),
    (
        "ps-dns-master-0",
        1,
        2,
        ("Master", 0),
        DNS,
        [*HOSTS_ITSELF, ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"), ("PADDLE_SERVER_NUM", "1")],
    ),
    (
        "ps-dns-worker-0",
        1,
        2,
        ("Worker", 0),
        DNS,
        [("PADDLE_MASTER", "ocr-master-0:36543"), ("PADDLE_TRAINER_NUM", "1")],
    ),
    (
        "ps-host-master-0",
        1,
        2,
        ("Master", 0),
        HOST,
        [*HOSTS_ITSELF, ("PADDLE_MASTER", "$(POD_IP_DUMMY):31000"), ("PADDLE_SERVER_NUM", "1"), ("PADDLE_RANK", "0")],
    ),
    (
        "ps-host-worker-1",
        1,
        2,
        ("Worker", 1),
        HOST,
        [("PADDLE_MASTER", "10.1.2.3:31000"), ("PADDLE_TRAINER_NUM", "1"), ("PADDLE_RANK", "2")],
    ),
    (
        "ps-two-masters-host-master-1",
        2,
        1,
        ("Master", 1),
        HOST,
        [("PADDLE_MASTER", "10.1.2.3:31000"), ("PADDLE_SERVER_NUM", "1"), ("PADDLE_RANK", "1")],
    ),
    (
        "host-port-not-allocated-yet",
        0,
        3,
        ("Worker", 1),
        Network(NetworkMode.HOST),
        [("PADDLE_MASTER", "127.0.0.1:36543"), ("PADDLE_RANK", "1")],
    ),
]


@pytest.mark.parametrize(
    ("masters", "workers", "replica", "network", "expected"), [c[1:] for c in ENV], ids=[c[0] for c in ENV]
)
def test_env_in_upstream_order(
    masters: int, workers: int, replica: tuple[str, int], network: Network, expected: list[tuple[str, Any]]
) -> None:
    assert env(job(masters, workers), *replica, network) == [*COMMON, *expected]


def test_the_master_port_is_the_host_types_declared_master_port() -> None:
    custom = template(ports=[{"name": "master", "containerPort": 37777}])

    assert ("PADDLE_MASTER", "ocr-worker-0:37777") in env(job(0, 2, tmpl=custom), "Worker", 1)
    assert ("PADDLE_MASTER", "ocr-master-0:37777") in env(job(1, 2, tmpl=custom), "Worker", 0)


def test_a_paddle_world_is_static_and_owns_nothing_else() -> None:
    owner = job(0, 2)
    raw = owner.to_dict()
    with_policy = PaddleJob.model_validate({**raw, "spec": {**raw["spec"], "elasticPolicy": {}}})

    # upstream acts on none of elasticPolicy, and the launcher's PADDLE_NNODES is one number
    assert PLUGIN.is_elastic(owner) is False and PLUGIN.is_elastic(with_policy) is False
    assert list(PLUGIN.children(owner)) == [] and PLUGIN.rendezvous_host(owner) is None
    assert list(PLUGIN.init_containers(owner, "Worker", 1, DNS)) == []


MASTER_ROLE = [
    ("ps:Master-0", 1, "Master", 0, True),
    ("ps:Worker-0", 1, "Worker", 0, False),
    ("collective:Worker-0", 0, "Worker", 0, False),
]


@pytest.mark.parametrize(
    ("masters", "rtype", "index", "expected"), [c[1:] for c in MASTER_ROLE], ids=[c[0] for c in MASTER_ROLE]
)
def test_master_role_is_the_master_only(masters: int, rtype: str, index: int, expected: bool) -> None:
    assert PLUGIN.is_master_role(job(masters, 2), rtype, index) is expected


# -- verdicts (§8) ---------------------------------------------------------------------------------------


def observed(policy: str = "OnFailure", **types: tuple[int, int, int, int]) -> dict[str, ReplicaCounts]:
    """Counts per type as (replicas, active, succeeded, failed), every type under ``policy``."""
    return {
        rtype: ReplicaCounts(replicas=r, active=a, succeeded=s, failed=f, restart_policy=policy)
        for rtype, (r, a, s, f) in types.items()
    }


VERDICTS = [
    # id, counts, the conditions as "Type: message"
    ("ps-pending", observed(Master=(1, 0, 0, 0), Worker=(2, 0, 0, 0)), []),
    ("ps-workers-alone-are-not-running", observed(Master=(1, 0, 0, 0), Worker=(2, 2, 0, 0)), []),
    ("ps-master-running", observed(Master=(1, 1, 0, 0), Worker=(2, 2, 0, 0)), ["Running: PaddleJob ocr is running."]),
    (
        "ps-workers-done-master-still-running",
        observed(Master=(1, 1, 0, 0), Worker=(2, 0, 2, 0)),
        ["Running: PaddleJob ocr is running."],
    ),
    (
        "ps-master-done-ends-it-despite-a-failed-worker",
        observed("Never", Master=(1, 0, 1, 0), Worker=(2, 1, 0, 1)),
        ["Succeeded: PaddleJob ocr is successfully completed."],
    ),
    (
        "ps-master-failed-Never",
        observed("Never", Master=(1, 0, 0, 1), Worker=(2, 2, 0, 0)),
        ["Failed: PaddleJob ocr is failed because 1 Master replica(s) failed."],
    ),
    (
        "ps-master-failed-ExitCode",
        observed("ExitCode", Master=(1, 0, 0, 1), Worker=(2, 2, 0, 0)),
        ["Restarting: PaddleJob ocr is restarting because 1 Master replica(s) failed."],
    ),
    ("collective-pending", observed(Worker=(3, 0, 0, 0)), []),
    ("collective-running", observed(Worker=(3, 2, 1, 0)), ["Running: PaddleJob team-a/ocr is running."]),
    ("collective-all-done", observed(Worker=(3, 0, 3, 0)), ["Succeeded: PaddleJob team-a/ocr successfully completed."]),
    (
        "collective-worker-failed-OnFailure",
        observed(Worker=(3, 2, 0, 1)),
        [
            "Running: PaddleJob team-a/ocr is running.",
            "Restarting: PaddleJob ocr is restarting because 1 Worker replica(s) failed.",
        ],
    ),
    (
        "collective-workers-failed-Never",
        observed("Never", Worker=(2, 0, 0, 2)),
        ["Failed: PaddleJob ocr is failed because 2 Worker replica(s) failed."],
    ),
    (
        "collective-failed-pod-already-replaced",
        observed("Never", Worker=(2, 2, 0, 1)),
        ["Running: PaddleJob team-a/ocr is running."],
    ),
]


@pytest.mark.parametrize(("types", "expected"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS])
def test_verdicts(types: dict[str, ReplicaCounts], expected: list[str]) -> None:
    owner = job(1 if "Master" in types else 0, types["Worker"].replicas)

    assert [f"{v.type.value}: {v.message}" for v in PLUGIN.verdicts(owner, types)] == expected


def test_an_elastic_policy_does_not_make_one_worker_enough() -> None:
    # Unlike PyTorchJob's rule: upstream's Paddle rule ignores elasticPolicy
    raw = job(0, 3).to_dict()
    raw["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    owner = PaddleJob.model_validate(raw)

    assert [v.type for v in PLUGIN.verdicts(owner, observed(Worker=(3, 2, 1, 0)))] == [ConditionType.RUNNING]
