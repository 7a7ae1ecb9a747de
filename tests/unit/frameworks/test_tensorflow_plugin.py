"""The TensorFlow plugin: ``TF_CONFIG`` (reference §3.2), its pods' roles (§4), the success/failure
rule (§8), the world it restarts, and the job it lays out for a Python function.

Jobs are written as a user writes them and defaulted as the reconciler does before it asks the
plugin, so ports and replicas are the defaulted ones. ``TF_CONFIG`` is compared as the exact
string upstream's ``json.Marshal`` writes: key order and separators included.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import replica_pods
from trainyard.api import ConditionType, Pod, labels
from trainyard.api.defaults import apply_defaults
from trainyard.api.kubeflow.tensorflow import TFJOB, TFJob
from trainyard.controller import ControllerSettings, Observed, reconcile
from trainyard.controller.children import build_pod, required_port_keys
from trainyard.controller.restarts import whole_job
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.registry import function_jobs, plugin_for
from trainyard.frameworks.tensorflow import TensorFlow

PLUGIN = TensorFlow()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST_PORTS = {"chief-0/tfjob-port": 31000, "ps-0/tfjob-port": 31001, "worker-0/tfjob-port": 31002}
HOST = Network(NetworkMode.HOST, HOST_PORTS, node_address="10.1.2.3")


def template(**container: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "tensorflow", "image": "tf:2", **container}]}}


def job(
    *,
    restart: str = "Never",
    policy: str | None = None,
    dynamic: bool | None = None,
    tmpl: dict[str, Any] | None = None,
    **replicas: int | None,
) -> TFJob:
    """A defaulted TFJob named ``mnist`` in ``team-a`` with ``replicas`` per type (None: unset)."""
    specs = {
        rtype: {"restartPolicy": restart, "template": tmpl or template()}
        | ({} if count is None else {"replicas": count})
        for rtype, count in replicas.items()
    }
    spec: dict[str, Any] = {"tfReplicaSpecs": specs}
    if policy is not None:
        spec["successPolicy"] = policy
    if dynamic is not None:
        spec["enableDynamicWorker"] = dynamic
    body = {"metadata": {"name": "mnist", "namespace": "team-a", "uid": "u"}, "spec": spec}
    return apply_defaults(TFJob.model_validate(body), TFJOB)


def tf_config(owner: TFJob, rtype: str, index: int, network: Network = DNS) -> str | None:
    out = list(PLUGIN.env(owner, rtype, index, network))
    assert [e.name for e in out] in ([], ["TF_CONFIG"]), out
    return out[0].value if out else None


def test_registry_gives_the_tensorflow_plugin_with_function_jobs() -> None:
    assert plugin_for("TFJob").info is TFJOB
    assert function_jobs("TFJob") is plugin_for("TFJob")


# -- TF_CONFIG, dense (§3.2) ---------------------------------------------------------------------------

CLUSTER = (
    '{"chief":["mnist-chief-0.team-a.svc:2222"],'
    '"ps":["mnist-ps-0.team-a.svc:2222"],'
    '"worker":["mnist-worker-0.team-a.svc:2222","mnist-worker-1.team-a.svc:2222"]}'
)


@pytest.mark.parametrize(
    ("rtype", "index"), [("Chief", 0), ("PS", 0), ("Worker", 0), ("Worker", 1)], ids=["chief", "ps", "w0", "w1"]
)
def test_every_task_gets_the_whole_cluster_and_its_own_task(rtype: str, index: int) -> None:
    config = tf_config(job(Chief=1, PS=1, Worker=2), rtype, index)

    assert (
        config == f'{{"cluster":{CLUSTER},"task":{{"type":"{rtype.lower()}","index":{index}}},"environment":"cloud"}}'
    )


def test_every_type_is_listed_evaluator_included_keys_sorted_as_go_writes_a_map() -> None:
    owner = job(Worker=2, PS=2, Master=1, Evaluator=1)

    cluster = json.loads(tf_config(owner, "Evaluator", 0) or "")["cluster"]
    assert list(cluster) == ["evaluator", "master", "ps", "worker"]
    assert cluster["evaluator"] == ["mnist-evaluator-0.team-a.svc:2222"]
    assert cluster["ps"] == ["mnist-ps-0.team-a.svc:2222", "mnist-ps-1.team-a.svc:2222"]


def test_the_operators_cluster_domain_follows_svc() -> None:
    domain = Network(NetworkMode.CLUSTER_DNS, cluster_domain="cluster.local")

    cluster = json.loads(tf_config(job(Chief=1, Worker=1), "Worker", 0, domain) or "")["cluster"]
    assert cluster == {
        "chief": ["mnist-chief-0.team-a.svc.cluster.local:2222"],
        "worker": ["mnist-worker-0.team-a.svc.cluster.local:2222"],
    }


def test_each_types_port_is_its_declared_tfjob_port() -> None:
    owner = job(Chief=1, Worker=1)
    ported = job(Chief=1, Worker=1, tmpl=template(ports=[{"name": "tfjob-port", "containerPort": 2300}]))
    owner.spec.tf_replica_specs["Worker"] = ported.spec.tf_replica_specs["Worker"]

    cluster = json.loads(tf_config(owner, "Chief", 0) or "")["cluster"]
    assert cluster == {"chief": ["mnist-chief-0.team-a.svc:2222"], "worker": ["mnist-worker-0.team-a.svc:2300"]}


def test_host_mode_points_every_task_at_the_node_and_its_allocated_port() -> None:
    owner = job(Chief=1, PS=1, Worker=1)

    assert required_port_keys(owner, PLUGIN) == list(HOST_PORTS)
    assert tf_config(owner, "PS", 0, HOST) == (
        '{"cluster":{"chief":["10.1.2.3:31000"],"ps":["10.1.2.3:31001"],"worker":["10.1.2.3:31002"]},'
        '"task":{"type":"ps","index":0},"environment":"cloud"}'
    )
    # before the ports are allocated (no pod exists yet then), the declared ones stand in
    unallocated = Network(NetworkMode.HOST)
    assert json.loads(tf_config(owner, "PS", 0, unallocated) or "")["cluster"]["ps"] == ["127.0.0.1:2222"]


# -- TF_CONFIG, sparse (enableDynamicWorker) -----------------------------------------------------------

SPARSE = [
    # id, type, index, the cluster that task sees
    ("worker-1", "Worker", 1, '{"worker":{"1":"mnist-worker-1.team-a.svc:2222"},"ps":["mnist-ps-0.team-a.svc:2222"]}'),
    ("ps", "PS", 0, '{"worker":{},"ps":["mnist-ps-0.team-a.svc:2222"]}'),
    ("chief", "Chief", 0, '{"worker":{},"ps":[]}'),
    ("evaluator", "Evaluator", 0, '{"worker":{},"ps":[]}'),
]


@pytest.mark.parametrize(("rtype", "index", "cluster"), [c[1:] for c in SPARSE], ids=[c[0] for c in SPARSE])
def test_dynamic_workers_get_the_sparse_form_without_environment(rtype: str, index: int, cluster: str) -> None:
    owner = job(Chief=1, PS=1, Worker=2, Evaluator=1, dynamic=True)

    expected = f'{{"cluster":{cluster},"task":{{"type":"{rtype.lower()}","index":{index}}}}}'
    assert tf_config(owner, rtype, index) == expected


def test_a_dynamic_worker_without_parameter_servers_gets_an_empty_ps_list() -> None:
    # upstream writes "ps":null here, which tf.train.ClusterSpec refuses
    assert tf_config(job(Worker=2, dynamic=True), "Worker", 0) == (
        '{"cluster":{"worker":{"0":"mnist-worker-0.team-a.svc:2222"},"ps":[]},"task":{"type":"worker","index":0}}'
    )


# -- no TF_CONFIG for a job that is not distributed ------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "distributed"),
    [
        ({"Worker": 1}, False),
        ({"Chief": None}, False),
        ({"Worker": None}, False),
        ({"Worker": 2}, True),
        ({"Chief": 1, "Evaluator": 1}, True),
    ],
    ids=["one-worker", "chief-count-unset", "worker-count-unset", "two-workers", "chief-and-evaluator"],
)
def test_tf_config_only_for_a_distributed_job(replicas: dict[str, int | None], distributed: bool) -> None:
    owner = job(**replicas)
    rtype = next(iter(replicas))

    assert (tf_config(owner, rtype, 0) is not None) is distributed


def test_tf_config_goes_into_the_tensorflow_container_alone_after_its_own_env() -> None:
    sidecar = {"name": "sidecar", "image": "busybox", "env": [{"name": "A", "value": "1"}]}
    main = {"name": "tensorflow", "image": "tf:2", "env": [{"name": "B", "value": "2"}]}
    owner = job(Chief=1, Worker=1, tmpl={"spec": {"containers": [sidecar, main]}})

    pod = build_pod(owner, PLUGIN, "Worker", 0, DNS)

    side, tensorflow = pod.spec.containers
    assert [e.name for e in side.env or []] == ["A"]
    assert [e.name for e in tensorflow.env or []] == ["B", "TF_CONFIG"]
    # upstream adds no PYTHONUNBUFFERED to a TFJob's containers


# -- roles and restarts (§4, §7) -----------------------------------------------------------------------

ROLES = [
    # id, the job's replicas, the pod, its job-role label
    ("chief", {"Chief": 1, "Worker": 2}, ("Chief", 0), "master"),
    ("worker-0-beside-a-chief", {"Chief": 1, "Worker": 2}, ("Worker", 0), None),
    ("master", {"Master": 1, "Worker": 2}, ("Master", 0), "master"),
    ("worker-0-without-a-chief", {"PS": 1, "Worker": 2}, ("Worker", 0), "master"),
    ("worker-1", {"PS": 1, "Worker": 2}, ("Worker", 1), None),
    ("ps", {"PS": 1, "Worker": 2}, ("PS", 0), None),
]


@pytest.mark.parametrize(("replicas", "pod", "role"), [c[1:] for c in ROLES], ids=[c[0] for c in ROLES])
def test_the_chief_or_master_else_worker_0_has_the_master_role(
    replicas: dict[str, int], pod: tuple[str, int], role: str | None
) -> None:
    built = build_pod(job(**replicas), PLUGIN, *pod, DNS)

    pod_labels = built.metadata.labels or {}
    assert pod_labels[labels.OPERATOR_NAME] == "tfjob-controller"
    assert pod_labels.get(labels.JOB_ROLE) == role
    assert built.spec.restart_policy == "Never"
    assert built.spec.init_containers is None


def test_a_static_world_restarts_as_a_gang_and_dynamic_workers_one_by_one() -> None:
    static, dynamic = job(Chief=1, Worker=2), job(PS=1, Worker=2, dynamic=True)

    assert (PLUGIN.is_elastic(static), whole_job(static, PLUGIN)) == (False, True)
    assert (PLUGIN.is_elastic(dynamic), whole_job(dynamic, PLUGIN)) == (True, False)
    assert PLUGIN.rendezvous_host(static) is None
    assert list(PLUGIN.children(static)) == []


# -- verdicts (§8) -------------------------------------------------------------------------------------


def counts(
    replicas: int,
    active: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    policy: str = "Never",
    done: frozenset[int] = frozenset(),
) -> ReplicaCounts:
    return ReplicaCounts(replicas, active, succeeded, failed, policy, done or frozenset(range(succeeded)))


RUNNING = Verdict(ConditionType.RUNNING, "TFJob team-a/mnist is running.")
SUCCEEDED = Verdict(ConditionType.SUCCEEDED, "TFJob team-a/mnist successfully completed.")


def restarting(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.RESTARTING, f"TFJob team-a/mnist is restarting because {n} {rtype} replica(s) failed.")


def failed(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.FAILED, f"TFJob team-a/mnist has failed because {n} {rtype} replica(s) failed.")


VERDICTS: list[tuple[str, dict[str, Any], dict[str, ReplicaCounts], list[Verdict]]] = [
    # id, job options, counts per type, the verdicts in order
    ("all-pending", {}, {"Chief": counts(1), "Worker": counts(2)}, []),
    ("chief-running", {}, {"Chief": counts(1, active=1), "Worker": counts(2)}, [RUNNING]),
    ("workers-running-chief-not-yet", {}, {"Chief": counts(1), "Worker": counts(2, active=2)}, []),
    ("chief-succeeded", {}, {"Chief": counts(1, succeeded=1), "Worker": counts(2, active=2)}, [SUCCEEDED]),
    ("master-succeeded", {}, {"Master": counts(1, succeeded=1), "Worker": counts(2, active=2)}, [SUCCEEDED]),
    (
        "success-is-final-even-with-a-failed-worker",
        {},
        {"Chief": counts(1, succeeded=1), "Worker": counts(2, active=1, failed=1)},
        [SUCCEEDED],
    ),
    (
        "workers-done-chief-running",
        {},
        {"Chief": counts(1, active=1), "Worker": counts(2, succeeded=2)},
        [RUNNING],
    ),
    (
        "worker-failed-Never",
        {},
        {"Chief": counts(1, active=1), "Worker": counts(2, active=1, failed=1)},
        [RUNNING, failed(1, "Worker")],
    ),
    (
        "ps-failed-Never",
        {},
        {"Chief": counts(1, active=1), "PS": counts(1, failed=1), "Worker": counts(2, active=2)},
        [RUNNING, failed(1, "PS")],
    ),
    (
        "evaluator-before-ps",
        {},
        {"Chief": counts(1), "Evaluator": counts(1, failed=1), "PS": counts(2, failed=2)},
        [failed(1, "Evaluator")],
    ),
    ("chief-failed-Never", {}, {"Chief": counts(1, failed=1), "Worker": counts(2, active=2)}, [failed(1, "Chief")]),
    (
        "worker-failed-OnFailure-no-Running-beside",
        {},
        {"Chief": counts(1, active=1), "Worker": counts(2, active=1, failed=1, policy="OnFailure")},
        [restarting(1, "Worker")],
    ),
    (
        "worker-failed-ExitCode",
        {},
        {"Chief": counts(1, active=1), "Worker": counts(2, failed=1, policy="ExitCode")},
        [restarting(1, "Worker")],
    ),
    # without a Chief or Master, worker 0 decides
    ("worker-0-succeeded", {}, {"Worker": counts(2, active=1, succeeded=1, done=frozenset({0}))}, [SUCCEEDED]),
    ("worker-1-succeeded-only", {}, {"Worker": counts(2, active=1, succeeded=1, done=frozenset({1}))}, [RUNNING]),
    ("every-worker-succeeded", {}, {"Worker": counts(2, succeeded=2)}, [SUCCEEDED]),
    ("workers-running", {}, {"PS": counts(1, active=1), "Worker": counts(2, active=2)}, [RUNNING]),
    ("ps-running-alone-is-not-running", {}, {"PS": counts(1, active=1), "Worker": counts(2)}, []),
    (
        "all-workers-waits-for-worker-1",
        {"policy": "AllWorkers"},
        {"Worker": counts(2, active=1, succeeded=1, done=frozenset({0}))},
        [RUNNING],
    ),
    ("all-workers-succeeded", {"policy": "AllWorkers"}, {"Worker": counts(2, succeeded=2)}, [SUCCEEDED]),
    (
        "worker-only-failed-Never",
        {},
        {"Worker": counts(2, active=1, failed=1)},
        [RUNNING, failed(1, "Worker")],
    ),
    ("no-worker-no-chief-never-succeeds", {}, {"PS": counts(1, succeeded=1)}, []),
    # enableDynamicWorker: a worker that failed for good is let go
    (
        "dynamic-worker-failed-Never",
        {"dynamic": True},
        {"PS": counts(1, active=1), "Worker": counts(2, active=1, failed=1, done=frozenset())},
        [RUNNING],
    ),
    (
        "dynamic-worker-failed-OnFailure",
        {"dynamic": True},
        {"PS": counts(1, active=1), "Worker": counts(2, active=1, failed=1, policy="OnFailure")},
        [restarting(1, "Worker")],
    ),
    (
        "dynamic-ps-failed-Never",
        {"dynamic": True},
        {"PS": counts(1, failed=1), "Worker": counts(2, active=2)},
        [RUNNING, failed(1, "PS")],
    ),
]


@pytest.mark.parametrize(("options", "by_type", "expected"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS])
def test_verdicts(options: dict[str, Any], by_type: dict[str, ReplicaCounts], expected: list[Verdict]) -> None:
    owner = job(**{rtype: c.replicas for rtype, c in by_type.items()}, **options)

    assert list(PLUGIN.verdicts(owner, by_type)) == expected


# -- jobs from a function ------------------------------------------------------------------------------


def test_a_function_job_is_the_sdks_chief_ps_and_workers() -> None:
    tmpl = template()
    spec = PLUGIN.function_spec(tmpl, 2, None, {"Chief": 1, "PS": 1})

    assert spec["runPolicy"] == {}
    assert [(k, v["replicas"]) for k, v in spec["tfReplicaSpecs"].items()] == [("Chief", 1), ("PS", 1), ("Worker", 2)]
    assert all(v["template"] is tmpl for v in spec["tfReplicaSpecs"].values())
    assert PLUGIN.function_entrypoint(2, None) == "python -u"
    assert dict(PLUGIN.function_roles) == {"num_chief_replicas": "Chief", "num_ps_replicas": "PS"}
    assert PLUGIN.function_image == "docker.io/tensorflow/tensorflow:2.9.1"


def test_a_function_job_leaves_out_roles_of_no_replicas_and_has_no_processes_per_worker() -> None:
    assert list(PLUGIN.function_spec(template(), 1, None, {"Chief": 0})["tfReplicaSpecs"]) == ["Worker"]
    with pytest.raises(ValueError, match="num_procs_per_worker can't be set for TFJob"):
        PLUGIN.function_spec(template(), 2, 2, {})


# -- through the reconciler: counts from pods, the engine's restarts and the plugin's verdicts ----------


def stored(owner: TFJob) -> TFJob:
    """``owner`` as stored after a pass saw it run."""
    return TFJob.model_validate(replica_pods.seen_running(owner.to_dict(), "TFJob"))


def observed(owner: TFJob, phases: dict[str, str], exit_code: int = 1) -> Observed:
    return replica_pods.observed(stored(owner), PLUGIN, phases, exit_code)


def conditions(owner: TFJob, phases: dict[str, str], exit_code: int = 1) -> list[tuple[str, str, str]]:
    seen = observed(owner, phases, exit_code)
    status = reconcile(seen, PLUGIN, ControllerSettings()).status or seen.job.status  # None: unchanged
    return [(c.type, c.status, c.message or "") for c in status.conditions]


def test_worker_0_succeeding_is_the_jobs_success_by_default() -> None:
    phases = {"ps-0": "Running", "worker-0": "Succeeded", "worker-1": "Running"}

    assert conditions(job(PS=1, Worker=2), phases)[-1] == (
        "Succeeded",
        "True",
        "TFJob team-a/mnist successfully completed.",
    )


def test_all_workers_waits_for_every_worker() -> None:
    phases = {"worker-0": "Succeeded", "worker-1": "Running"}
    owner = job(Worker=2, policy="AllWorkers")

    assert [c[:2] for c in conditions(owner, phases)] == [("Created", "True"), ("Running", "True")]
    done = conditions(owner, {"worker-0": "Succeeded", "worker-1": "Succeeded"})
    assert done[-1][:2] == ("Succeeded", "True")


def test_a_failed_worker_under_never_fails_the_job_with_upstreams_words() -> None:
    phases = {"chief-0": "Running", "worker-0": "Running", "worker-1": "Failed"}

    assert conditions(job(Chief=1, Worker=2), phases)[-2:] == [
        ("Running", "False", ""),
        ("Failed", "True", "TFJob team-a/mnist has failed because 1 Worker replica(s) failed."),
    ]


def test_a_failed_worker_that_restarts_restarts_the_whole_static_gang() -> None:
    phases = {"chief-0": "Running", "worker-0": "Running", "worker-1": "Failed"}
    plan = reconcile(observed(job(Chief=1, Worker=2, restart="OnFailure"), phases), PLUGIN, ControllerSettings())

    assert plan.status is not None and plan.status.restart_count == 1
    last = plan.status.conditions[-1]
    assert (last.type, last.reason) == ("Restarting", "TFJobRestarting")
    assert {e.name for e in plan.status.pod_ledger or [] if e.recreate} == {
        "mnist-chief-0",
        "mnist-worker-0",
        "mnist-worker-1",
    }


def test_a_failed_dynamic_worker_restarts_alone() -> None:
    phases = {"ps-0": "Running", "worker-0": "Running", "worker-1": "Failed"}
    owner = job(PS=1, Worker=2, restart="OnFailure", dynamic=True)
    plan = reconcile(observed(owner, phases), PLUGIN, ControllerSettings())

    assert plan.status is not None and plan.status.restart_count == 1
    assert {e.name for e in plan.status.pod_ledger or [] if e.recreate} == {"mnist-worker-1"}
    last = plan.status.conditions[-1]
    assert (last.type, last.message) == (
        "Restarting",
        "TFJob team-a/mnist is restarting because 1 Worker replica(s) failed.",
    )


def test_a_dynamic_worker_that_failed_for_good_leaves_the_job_running() -> None:
    phases = {"ps-0": "Running", "worker-0": "Running", "worker-1": "Failed"}
    plan = reconcile(observed(job(PS=1, Worker=2, dynamic=True), phases), PLUGIN, ControllerSettings())

    assert plan.status is None or plan.status.conditions[-1].type == "Running"
    # its pod stays, failed: neither deleted nor created again
    assert not any(isinstance(c, Pod) for c in plan.create)
    assert plan.delete == ()
