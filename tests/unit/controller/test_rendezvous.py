"""An elastic c10d PyTorchJob's rendezvous host ``<job>-rdzv``: built, kept, and removed by the pure
reconciler; never counted as a replica (``trainyard.controller.rendezvous``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from job_builders import (
    HOST,
    HOST_PORTS,
    JOB_NAME,
    NAME,
    NAMESPACE,
    OPERATOR_NAME,
    World,
    apply,
    job,
    owner_references,
    replicas,
    run,
    template,
)

from trainyard.api import Pod, PyTorchJob, Service
from trainyard.controller import ChildRef, Plan
from trainyard.controller.children import is_rendezvous

RDZV = f"{NAME}-rdzv"
RDZV_LABELS = {OPERATOR_NAME: "pytorchjob-controller", JOB_NAME: NAME, "trainyard.dev/rendezvous": "c10d"}
ELASTIC = {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "maxRestarts": 10}
IMAGE = "docker.io/kubeflowkatib/pytorch-mnist:v1beta1"


def elastic_job(policy: dict[str, Any] | None = None, *, workers: int = 3, **kw: Any) -> PyTorchJob:
    return job(0, workers, extra_spec={"elasticPolicy": ELASTIC if policy is None else policy}, **kw)


def with_ports(owner: PyTorchJob, ports: dict[str, int]) -> PyTorchJob:
    body = owner.to_dict()
    body["metadata"]["annotations"] = {HOST_PORTS: json.dumps(ports)}
    return PyTorchJob.model_validate(body)


def rdzv_pods(plan: Plan) -> list[Pod]:
    return [o for o in plan.create if isinstance(o, Pod) and is_rendezvous(o)]


def rdzv_services(plan: Plan) -> list[Service]:
    return [o for o in plan.create if isinstance(o, Service) and is_rendezvous(o)]


def rdzv_pod(owner: PyTorchJob, *, phase: str = "Running", restarts: int = 0, deleting: bool = False) -> Pod:
    """The host as the API server returns it once the kubelet reported ``phase``."""
    plan = run(owner)
    (built,) = rdzv_pods(plan)
    raw = built.to_dict()
    raw["metadata"]["uid"] = "rdzv-uid"
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    raw["status"] = {
        "phase": phase,
        "containerStatuses": [{"name": "rendezvous", "restartCount": restarts, "state": {"running": {}}}],
    }
    return Pod.model_validate(raw)


def rdzv_service(owner: PyTorchJob) -> Service:
    (built,) = rdzv_services(run(owner))
    return built


def test_cluster_dns_first_pass_creates_the_host_pod_and_its_headless_service() -> None:
    tmpl = template(
        container={"imagePullPolicy": "Always"},
        spec={"nodeSelector": {"pool": "gpu"}, "imagePullSecrets": [{"name": "regcred"}], "volumes": [{"name": "v"}]},
    )
    owner = elastic_job(tmpl=tmpl)

    plan = run(owner)

    (pod,) = rdzv_pods(plan)
    body = pod.to_dict()
    assert body["metadata"] == {
        "name": RDZV,
        "namespace": NAMESPACE,
        "labels": RDZV_LABELS,
        "ownerReferences": owner_references(owner),
    }
    spec = body["spec"]
    (container,) = spec["containers"]
    assert container["name"] == "rendezvous" and container["image"] == IMAGE
    assert container["imagePullPolicy"] == "Always"
    assert container["command"][:2] == ["python", "-c"] and container["command"][-1] == "29400"
    assert "TCPStore" in container["command"][2]
    assert container["ports"] == [{"containerPort": 29400, "name": "c10d", "protocol": "TCP"}]
    assert spec["restartPolicy"] == "Always"
    assert spec["nodeSelector"] == {"pool": "gpu"} and spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert "volumes" not in spec and "hostNetwork" not in spec
    (svc,) = rdzv_services(plan)
    assert svc.to_dict() == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": RDZV,
            "namespace": NAMESPACE,
            "labels": RDZV_LABELS,
            "ownerReferences": owner_references(owner),
        },
        "spec": {
            "clusterIP": "None",
            "selector": RDZV_LABELS,
            "ports": [{"name": "c10d", "port": 29400, "targetPort": 29400, "protocol": "TCP"}],
        },
    }
    # the workers point at it, with the operator's defaults
    workers = [o for o in plan.create if isinstance(o, Pod) and not is_rendezvous(o)]
    assert len(workers) == 3
    env = {e.name: e.value for e in workers[0].spec.containers[0].env or []}
    assert env["PET_RDZV_ENDPOINT"] == f"{RDZV}:29400"
    assert (env["PET_RDZV_CONF"] or "").startswith("is_host=false,")


def test_host_mode_asks_for_a_port_first_then_runs_the_host_on_it_without_a_service() -> None:
    owner = elastic_job()

    first = run(owner, settings=HOST)

    assert "rdzv/c10d" in first.allocate_ports and not first.create
    ports = {f"worker-{i}/pytorchjob-port": 30100 + i for i in range(3)} | {"rdzv/c10d": 30999}
    plan = run(with_ports(owner, ports), settings=HOST)
    (pod,) = rdzv_pods(plan)
    assert pod.spec.containers[0].command is not None and pod.spec.containers[0].command[-1] == "30999"
    assert pod.to_dict()["spec"]["hostNetwork"] is True
    assert rdzv_services(plan) == []
    worker = next(o for o in plan.create if isinstance(o, Pod) and not is_rendezvous(o))
    env = {e.name: e.value for e in worker.spec.containers[0].env or []}
    assert env["PET_RDZV_ENDPOINT"] == "127.0.0.1:30999"


def test_a_user_fixed_rdzv_port_needs_no_allocation() -> None:
    owner = elastic_job({**ELASTIC, "rdzvPort": 29555}, workers=2)
    ports = {"worker-0/pytorchjob-port": 30100, "worker-1/pytorchjob-port": 30101}

    assert "rdzv/c10d" not in run(owner, settings=HOST).allocate_ports
    (pod,) = rdzv_pods(run(with_ports(owner, ports), settings=HOST))
    assert pod.spec.containers[0].command is not None and pod.spec.containers[0].command[-1] == "29555"


@pytest.mark.parametrize(
    "policy",
    [None, {**ELASTIC, "rdzvHost": "store.example"}, {**ELASTIC, "rdzvBackend": "etcd-v2"}, {"standalone": True}],
    ids=["not-elastic", "explicit-rdzv-host", "etcd", "standalone"],
)
def test_no_host_unless_the_operator_hosts_the_rendezvous(policy: dict[str, Any] | None) -> None:
    owner = job(0, 2) if policy is None else elastic_job(policy, workers=2)

    plan = run(owner)

    assert rdzv_pods(plan) == [] and rdzv_services(plan) == []


def test_the_host_is_not_a_replica_nor_a_restart() -> None:
    owner = elastic_job()
    pods, services = replicas(owner, {"Worker": ["Running"] * 3})
    host = rdzv_pod(owner, restarts=4)

    plan = run(owner, [*pods, host], [*services, rdzv_service(owner)])

    assert plan.create == () and plan.delete == ()
    assert plan.status is not None
    worker = plan.status.replica_statuses["Worker"]
    assert (worker.active, worker.succeeded, worker.failed) == (3, 0, 0)
    assert set(plan.status.replica_statuses) == {"Worker"}
    assert not plan.status.restart_count and not plan.status.pod_ledger


def test_a_deleted_host_is_recreated_and_an_ended_one_replaced() -> None:
    owner = elastic_job()
    pods, services = replicas(owner, {"Worker": ["Running"] * 3})
    svc = rdzv_service(owner)

    again = run(owner, pods, [*services, svc])
    assert [p.name for p in rdzv_pods(again)] == [RDZV] and rdzv_services(again) == []

    ended = run(owner, [*pods, rdzv_pod(owner, phase="Failed")], [*services, svc])
    assert ChildRef("Pod", RDZV) in ended.delete and rdzv_pods(ended) == []

    going = run(owner, [*pods, rdzv_pod(owner, deleting=True)], [*services, svc])
    assert rdzv_pods(going) == [] and ChildRef("Pod", RDZV) not in going.delete  # recreated once it is gone


def test_a_lost_worker_is_recreated_while_the_host_stays() -> None:
    owner = elastic_job()
    pods, services = replicas(owner, {"Worker": ["Running", "Running", "Running"]})
    survivors = [p for p in pods if p.name != f"{NAME}-worker-0"]

    plan = run(owner, [*survivors, rdzv_pod(owner)], [*services, rdzv_service(owner)])

    assert [o.name for o in plan.create] == [f"{NAME}-worker-0"]
    assert plan.delete == ()


@pytest.mark.parametrize("ending", ["succeeded", "suspended"])
def test_the_host_goes_when_the_job_finishes_or_is_suspended(ending: str) -> None:
    owner = elastic_job()
    host, host_service = rdzv_pod(owner), rdzv_service(owner)
    phases = ["Succeeded"] * 3 if ending == "succeeded" else ["Running"] * 3
    if ending == "suspended":
        body = owner.to_dict()
        body["spec"]["runPolicy"] = {"suspend": True}
        owner = PyTorchJob.model_validate(body)
    pods, services = replicas(owner, {"Worker": phases})

    plan = run(owner, [*pods, host], [*services, host_service])

    assert ChildRef("Pod", RDZV) in plan.delete and ChildRef("Service", RDZV) in plan.delete
    assert rdzv_pods(plan) == []
    # and a finished job's next pass deletes nothing more once they are gone
    world = apply(World(owner, (*pods, host), (*services, host_service)), plan)
    assert [p for p in world.pods if is_rendezvous(p)] == []
    assert not any(ref.name == RDZV for ref in run(world.job, world.pods, world.services).delete)


def test_a_succeeded_job_keeps_its_host_while_replicas_still_run() -> None:
    owner = elastic_job()
    host, host_service = rdzv_pod(owner), rdzv_service(owner)
    pods, services = replicas(owner, {"Worker": ["Succeeded", "Running", "Succeeded"]})

    plan = run(owner, [*pods, host], [*services, host_service])

    assert plan.status is not None and any(c.type == "Succeeded" for c in plan.status.conditions)
    assert ChildRef("Pod", RDZV) not in plan.delete and ChildRef("Service", RDZV) not in plan.delete
    assert rdzv_pods(plan) == [] and rdzv_services(plan) == []  # nor recreated
