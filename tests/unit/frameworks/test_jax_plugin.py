"""The JAX plugin: the coordinator env every process gets (reference §3.5), its pods' roles (§4) and
the all-Workers success rule (§8), alone and through the reconciler.

Jobs are written as a user writes them and defaulted as the reconciler does before it asks the
plugin, so ports and replicas are the defaulted ones.
"""

from __future__ import annotations

from typing import Any

import pytest
import running_jobs

from trainyard.api import ConditionType, labels
from trainyard.api.defaults import apply_defaults
from trainyard.api.kubeflow.jax import JAXJOB, JAXJob
from trainyard.controller import ControllerSettings, Observed, reconcile
from trainyard.controller.children import build_pod, required_port_keys
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.jax import JAX
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.registry import function_jobs, plugin_for

PLUGIN = JAX()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST_PORTS = {"worker-0/jaxjob-port": 31000, "worker-1/jaxjob-port": 31001, "worker-2/jaxjob-port": 31002}
HOST = Network(NetworkMode.HOST, HOST_PORTS, node_address="10.1.2.3")


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "jax", "image": "jax:0.10", **container}]}}


def job(workers: int = 3, *, restart: str | None = None, tmpl: dict[str, Any] | None = None) -> JAXJob:
    """A defaulted JAXJob named ``spmd`` in ``team-a``."""
    spec: dict[str, Any] = {"replicas": workers, "template": tmpl or template()}
    if restart is not None:
        spec["restartPolicy"] = restart
    body = {
        "metadata": {"name": "spmd", "namespace": "team-a", "uid": "u"},
        "spec": {"jaxReplicaSpecs": {"Worker": spec}},
    }
    return apply_defaults(JAXJob.model_validate(body), JAXJOB)


def env(owner: JAXJob, index: int, network: Network = DNS) -> list[tuple[str, str | None]]:
    """The variables in order: upstream appends them in a fixed order, so the order is checked too."""
    return [(e.name, e.value) for e in PLUGIN.env(owner, "Worker", index, network)]


def expected(index: int, *, addr: str = "spmd-worker-0", port: str = "6666", world: int = 3) -> list[tuple[str, str]]:
    return [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", port),
        ("COORDINATOR_ADDRESS", addr),
        ("NUM_PROCESSES", str(world)),
        ("PROCESS_ID", str(index)),
    ]


def test_registry_gives_the_jax_plugin_without_function_jobs() -> None:
    assert plugin_for("JAXJob").info is JAXJOB
    assert function_jobs("JAXJob") is None


# -- env (§3.5) ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("index", [0, 1, 2])
def test_cluster_dns_env_names_worker_0s_service_without_a_port(index: int) -> None:
    assert env(job(), index) == expected(index)


@pytest.mark.parametrize("index", [0, 2])
def test_host_env_points_at_the_node_and_worker_0s_allocated_port(index: int) -> None:
    assert env(job(), index, HOST) == expected(index, addr="10.1.2.3", port="31000")


def test_host_mode_allocates_a_port_for_every_worker() -> None:
    assert sorted(required_port_keys(job(), PLUGIN)) == sorted(HOST_PORTS)


def test_the_coordinator_port_is_the_declared_jaxjob_port() -> None:
    custom = template(ports=[{"name": "jaxjob-port", "containerPort": 1234}])
    assert env(job(2, tmpl=custom), 1) == expected(1, port="1234", world=2)


def test_a_single_worker_is_a_world_of_one() -> None:
    assert env(job(1), 0) == expected(0, world=1)


def test_env_follows_the_containers_own_and_reaches_every_container() -> None:
    tmpl = {
        "spec": {
            "containers": [
                {"name": "jax", "image": "jax:0.10", "env": [{"name": "PROCESS_ID", "value": "mine"}]},
                {"name": "sidecar", "image": "busybox"},
            ]
        }
    }
    pod = build_pod(job(tmpl=tmpl), PLUGIN, "Worker", 1, DNS)

    main, sidecar = pod.spec.containers
    assert [(e.name, e.value) for e in main.env or []] == [("PROCESS_ID", "mine"), *expected(1)]
    assert [(e.name, e.value) for e in sidecar.env or []] == expected(1)


# -- pods (§4) -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("index", "role"), [(0, "master"), (1, None)], ids=["worker-0", "worker-1"])
def test_worker_0_has_the_master_role(index: int, role: str | None) -> None:
    pod = build_pod(job(), PLUGIN, "Worker", index, DNS)

    assert pod.metadata.name == f"spmd-worker-{index}"
    pod_labels = pod.metadata.labels or {}
    assert pod_labels[labels.OPERATOR_NAME] == "jaxjob-controller"
    assert pod_labels[labels.REPLICA_TYPE] == "worker"
    assert pod_labels.get(labels.JOB_ROLE) == role
    assert pod.spec.restart_policy == "Never"
    assert pod.spec.init_containers is None


def test_the_world_is_static() -> None:
    assert PLUGIN.is_elastic(job()) is False
    assert PLUGIN.rendezvous_host(job()) is None
    assert list(PLUGIN.children(job())) == []


# -- verdicts (§8) -------------------------------------------------------------------------------------


def counts(active: int = 0, succeeded: int = 0, failed: int = 0, policy: str = "Never") -> ReplicaCounts:
    return ReplicaCounts(replicas=3, active=active, succeeded=succeeded, failed=failed, restart_policy=policy)


RUNNING = Verdict(ConditionType.RUNNING, "JAXJob team-a/spmd is running.")
SUCCEEDED = Verdict(ConditionType.SUCCEEDED, "JAXJob team-a/spmd successfully completed.")

VERDICTS = [
    ("pending", counts(), []),
    ("running", counts(active=3), [RUNNING]),
    ("some-done", counts(active=1, succeeded=2), [RUNNING]),
    ("all-done", counts(succeeded=3), [SUCCEEDED]),
    (
        "failed-Never",
        counts(active=2, failed=1),
        [RUNNING, Verdict(ConditionType.FAILED, "JAXJob spmd is failed because 1 Worker replica(s) failed.")],
    ),
    (
        "failed-OnFailure",
        counts(active=1, failed=2, policy="OnFailure"),
        [RUNNING, Verdict(ConditionType.RESTARTING, "JAXJob spmd is restarting because 2 Worker replica(s) failed.")],
    ),
]


@pytest.mark.parametrize(("worker", "want"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS])
def test_verdicts(worker: ReplicaCounts, want: list[Verdict]) -> None:
    assert list(PLUGIN.verdicts(job(), {"Worker": worker})) == want


# -- through the reconciler ----------------------------------------------------------------------------


def observed(phases: list[str], restart: str = "Never", exit_code: int = 1) -> Observed:
    """A running JAXJob (Created, Running) and its Worker pods in ``phases``, by index."""
    pods = {f"worker-{index}": phase for index, phase in enumerate(phases)}
    return running_jobs.observed(job(len(phases), restart=restart), PLUGIN, pods, exit_code)


def test_every_worker_done_succeeds_the_job_with_a_selector_for_the_scale_subresource() -> None:
    plan = reconcile(observed(["Succeeded", "Succeeded"]), PLUGIN, ControllerSettings())

    assert plan.status is not None
    assert [(c.type, c.status, c.reason) for c in plan.status.conditions][-2:] == [
        ("Running", "False", "JAXJobRunning"),
        ("Succeeded", "True", "JAXJobSucceeded"),
    ]
    assert plan.status.conditions[-1].message == "JAXJob team-a/spmd successfully completed."
    worker = plan.status.replica_statuses["Worker"]
    assert (worker.succeeded, worker.selector) == (
        2,
        "training.kubeflow.org/job-name=spmd,training.kubeflow.org/operator-name=jaxjob-controller,"
        "training.kubeflow.org/replica-type=worker",
    )


def test_worker_0_done_is_not_enough() -> None:
    plan = reconcile(observed(["Succeeded", "Running"]), PLUGIN, ControllerSettings())

    assert plan.status is not None
    assert [(c.type, c.status) for c in plan.status.conditions] == [("Created", "True"), ("Running", "True")]


def test_a_failed_worker_under_never_fails_the_job() -> None:
    plan = reconcile(observed(["Running", "Failed"]), PLUGIN, ControllerSettings())

    assert plan.status is not None
    last = plan.status.conditions[-1]
    assert (last.type, last.reason, last.message) == (
        "Failed",
        "JAXJobFailed",
        "JAXJob spmd is failed because 1 Worker replica(s) failed.",
    )


def test_a_failed_worker_that_restarts_restarts_the_whole_gang() -> None:
    plan = reconcile(observed(["Running", "Failed"], restart="OnFailure"), PLUGIN, ControllerSettings())

    assert plan.status is not None and plan.status.restart_count == 1
    last = plan.status.conditions[-1]
    assert (last.type, last.reason) == ("Restarting", "JAXJobRestarting")
    # worker-0 hosts the coordinator: the survivor is restarted too, not only the failed one.
    assert len(plan.status.pod_ledger or []) == 2 and {e.recreate for e in plan.status.pod_ledger or []} == {True}
