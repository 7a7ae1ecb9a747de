"""The PaddleJob plugin and kind: ``PADDLE_*`` env in both modes (reference §3.4), admission (§2.2 and
the elasticPolicy rules upstream lacks), defaults (§1.2) and the success/failure rule (§8)."""

from __future__ import annotations

from typing import Any

import pytest

from trainyard.api import ConditionType
from trainyard.api.defaults import apply_defaults
from trainyard.api.field_errors import ErrorType
from trainyard.api.kubeflow.paddle import PADDLEJOB, PaddleJob
from trainyard.api.validation import validate_job
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.paddle import Paddle
from trainyard.frameworks.registry import plugin_for

PLUGIN = Paddle()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST = Network(NetworkMode.HOST, {"worker-0/master": 31000, "master-0/master": 32000}, node_address="10.0.0.9")
POD_IP = {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "paddle", "image": "paddle:3", **container}]}}


def body(workers: int = 2, master: int = 0, **spec: Any) -> dict[str, Any]:
    specs: dict[str, Any] = {}
    if master:
        specs["Master"] = {"replicas": master, "template": template()}
    if workers:
        specs["Worker"] = {"replicas": workers, "template": template()}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PaddleJob",
        "metadata": {"name": "digits", "namespace": "ml"},
        "spec": {"paddleReplicaSpecs": specs, **spec},
    }


def job(workers: int = 2, master: int = 0, **spec: Any) -> PaddleJob:
    return apply_defaults(PaddleJob.model_validate(body(workers, master, **spec)), PADDLEJOB)


def env(owner: PaddleJob, rtype: str, index: int, network: Network = DNS) -> list[tuple[str, Any]]:
    return [
        (e.name, e.value if e.value is not None else e.model_extra) for e in PLUGIN.env(owner, rtype, index, network)
    ]


def test_registry_and_upstream_constants() -> None:
    assert plugin_for("PaddleJob") is not None and plugin_for("PaddleJob").info is PADDLEJOB
    assert (PADDLEJOB.default_container, PADDLEJOB.default_port_name, PADDLEJOB.default_port) == (
        "paddle",
        "master",
        36543,
    )
    assert PADDLEJOB.default_restart_policy.value == "OnFailure" and PADDLEJOB.framework == "paddle"


def test_collective_worker_0_hosts_the_master_at_its_own_pod_ip() -> None:
    assert env(job(), "Worker", 0) == [
        ("PYTHONUNBUFFERED", "1"),
        ("PADDLE_JOB_ID", "digits"),
        ("PADDLE_NNODES", "2"),
        ("POD_IP_DUMMY", {"valueFrom": POD_IP}),
        ("PADDLE_MASTER", "$(POD_IP_DUMMY):36543"),
    ]
    assert env(job(), "Worker", 1)[-1] == ("PADDLE_MASTER", "digits-worker-0:36543")


def test_ps_mode_the_master_hosts_it_and_roles_are_counted() -> None:
    owner = job(workers=2, master=1)
    master = dict(env(owner, "Master", 0))
    assert master["PADDLE_MASTER"] == "$(POD_IP_DUMMY):36543" and master["PADDLE_SERVER_NUM"] == "1"
    assert master["PADDLE_NNODES"] == "3"
    worker = dict(env(owner, "Worker", 1))
    assert worker["PADDLE_MASTER"] == "digits-master-0:36543" and worker["PADDLE_TRAINER_NUM"] == "1"
    assert "POD_IP_DUMMY" not in worker and "PADDLE_SERVER_NUM" not in worker


def test_host_mode_points_at_the_node_and_the_allocated_port() -> None:
    assert dict(env(job(), "Worker", 0, HOST))["PADDLE_MASTER"] == "$(POD_IP_DUMMY):31000"
    assert dict(env(job(), "Worker", 1, HOST))["PADDLE_MASTER"] == "10.0.0.9:31000"
    assert dict(env(job(master=1), "Worker", 0, HOST))["PADDLE_MASTER"] == "10.0.0.9:32000"


def test_a_declared_master_port_is_used() -> None:
    ported = body()
    for spec in ported["spec"]["paddleReplicaSpecs"].values():
        spec["template"] = template(ports=[{"name": "master", "containerPort": 40000}])
    owner = apply_defaults(PaddleJob.model_validate(ported), PADDLEJOB)
    assert dict(env(owner, "Worker", 1))["PADDLE_MASTER"] == "digits-worker-0:40000"


def test_elastic_policy_defaults_as_upstream() -> None:
    assert job(elasticPolicy={}).spec.elastic_policy.model_dump(exclude_none=True) == {  # type: ignore[union-attr]
        "min_replicas": 2,
        "max_replicas": 2,
    }
    policy = job(elasticPolicy={"maxReplicas": 4}).spec.elastic_policy
    assert policy is not None and (policy.min_replicas, policy.max_replicas) == (4, 4)
    assert not PLUGIN.is_elastic(job(elasticPolicy={})), "upstream acts on none of it: the world is static"


@pytest.mark.parametrize(
    ("spec", "errors"),
    [
        (
            {"elasticPolicy": {"minReplicas": 3, "maxReplicas": 2}},
            [(ErrorType.INVALID, "spec.elasticPolicy.maxReplicas", "2: must not be less than minReplicas (3)")],
        ),
        (
            {"elasticPolicy": {"minReplicas": 0}},
            [(ErrorType.INVALID, "spec.elasticPolicy.minReplicas", "0: must be at least 1")],
        ),
        (
            {"elasticPolicy": {"maxRestarts": -1}},
            [(ErrorType.INVALID, "spec.elasticPolicy.maxRestarts", "-1: must be non-negative")],
        ),
    ],
)
def test_elastic_policy_mistakes_are_refused_with_their_paths(spec: dict[str, Any], errors: list[Any]) -> None:
    got = validate_job(body(**spec), PADDLEJOB)
    assert [(e.type, e.field, e.detail) for e in got] == errors


def test_elastic_policy_needs_a_worker_and_types_are_master_and_worker() -> None:
    no_worker = body(workers=0, master=1, elasticPolicy={})
    assert [(e.type, e.field) for e in validate_job(no_worker, PADDLEJOB)] == [
        (ErrorType.REQUIRED, "spec.paddleReplicaSpecs.Worker")
    ]
    wrong = body()
    wrong["spec"]["paddleReplicaSpecs"]["PS"] = {"replicas": 1, "template": template()}
    assert [(e.type, e.field) for e in validate_job(wrong, PADDLEJOB)] == [
        (ErrorType.NOT_SUPPORTED, "spec.paddleReplicaSpecs.PS")
    ]


def test_the_container_name_is_quoted_as_upstreams_webhook_does() -> None:
    unnamed = body()
    unnamed["spec"]["paddleReplicaSpecs"]["Worker"]["template"] = {
        "spec": {"containers": [{"name": "x", "image": "i"}]}
    }
    (error,) = validate_job(unnamed, PADDLEJOB)
    assert error.detail == 'must have at least one container with name "paddle"'


def counts(replicas: int, active: int = 0, succeeded: int = 0, failed: int = 0, policy: str = "Never") -> ReplicaCounts:
    return ReplicaCounts(replicas, active, succeeded, failed, policy)


def test_verdicts_without_a_master_all_workers_decide() -> None:
    owner = job()
    assert PLUGIN.verdicts(owner, {"Worker": counts(2, active=2)}) == [
        Verdict(ConditionType.RUNNING, "PaddleJob ml/digits is running.")
    ]
    assert PLUGIN.verdicts(owner, {"Worker": counts(2, active=1, succeeded=1)})[-1].type is ConditionType.RUNNING
    assert PLUGIN.verdicts(owner, {"Worker": counts(2, succeeded=2)}) == [
        Verdict(ConditionType.SUCCEEDED, "PaddleJob ml/digits successfully completed.")
    ]
    assert PLUGIN.verdicts(owner, {"Worker": counts(2, active=1, failed=1)})[-1] == Verdict(
        ConditionType.FAILED, "PaddleJob digits is failed because 1 Worker replica(s) failed."
    )
    assert PLUGIN.verdicts(owner, {"Worker": counts(2, active=1, failed=1, policy="OnFailure")})[-1] == Verdict(
        ConditionType.RESTARTING, "PaddleJob digits is restarting because 1 Worker replica(s) failed."
    )


def test_verdicts_with_a_master_it_decides() -> None:
    owner = job(master=1)
    got = PLUGIN.verdicts(owner, {"Master": counts(1, succeeded=1), "Worker": counts(2, active=2)})
    assert got == [Verdict(ConditionType.SUCCEEDED, "PaddleJob digits is successfully completed.")]
    assert PLUGIN.is_master_role(owner, "Master", 0) and not PLUGIN.is_master_role(owner, "Worker", 0)
