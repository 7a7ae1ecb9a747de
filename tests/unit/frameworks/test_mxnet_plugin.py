"""The MXNet plugin (Training Operator v1.7's MXJob): ``MX_CONFIG`` and the ``DMLC_*`` env of every role,
the Servers' master-role label and the leader's success rule, alone and through the reconciler.

Jobs are written as a user writes them and defaulted as the reconciler does before it asks the
plugin, so ports and replicas are the defaulted ones.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import running_jobs

from trainyard.api import ConditionType, labels
from trainyard.api.defaults import apply_defaults
from trainyard.api.kubeflow.mxnet import MXJOB, MXJob
from trainyard.controller import ControllerSettings, Observed, reconcile
from trainyard.controller.children import build_pod, required_port_keys
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.mxnet import MXNet
from trainyard.frameworks.mxnet.plugin import go_json, leader
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.registry import function_jobs, plugin_for

PLUGIN = MXNet()
DNS = Network(NetworkMode.CLUSTER_DNS)
HOST_PORTS = {
    "scheduler-0/mxjob-port": 31000,
    "server-0/mxjob-port": 31001,
    "worker-0/mxjob-port": 31002,
    "worker-1/mxjob-port": 31003,
}
HOST = Network(NetworkMode.HOST, HOST_PORTS, node_address="10.1.2.3")


def template(annotations: dict[str, str] | None = None, **container: Any) -> dict[str, Any]:
    tmpl: dict[str, Any] = {"spec": {"containers": [{"name": "mxnet", "image": "mxjob/mxnet:gpu", **container}]}}
    if annotations:
        tmpl["metadata"] = {"annotations": annotations}
    return tmpl


def job(restart: str | None = None, mode: str = "MXTrain", **replicas: int) -> MXJob:
    """A defaulted MXJob ``mx`` in ``team-a``; by default a Scheduler, a Server and two Workers."""
    counts = replicas or {"Scheduler": 1, "Server": 1, "Worker": 2}
    specs: dict[str, Any] = {}
    for rtype, n in counts.items():
        specs[rtype] = {"replicas": n, "template": template()}
        if restart is not None:
            specs[rtype]["restartPolicy"] = restart
    body = {
        "metadata": {"name": "mx", "namespace": "team-a", "uid": "u"},
        "spec": {"jobMode": mode, "mxReplicaSpecs": specs},
    }
    return apply_defaults(MXJob.model_validate(body), MXJOB)


def env(owner: MXJob, rtype: str, index: int, network: Network = DNS) -> list[tuple[str, str | None]]:
    """The variables in order: v1.7 appends them in a fixed order, so the order is checked too."""
    return [(e.name, e.value) for e in PLUGIN.env(owner, rtype, index, network)]


def test_registry_gives_the_mxnet_plugin_without_function_jobs() -> None:
    assert plugin_for("MXJob").info is MXJOB
    assert function_jobs("MXJob") is None


# -- env -----------------------------------------------------------------------------------------------

CLUSTER = (
    '{"scheduler":[{"url":"mx-scheduler-0","port":9091}],'
    '"server":[{"url":"mx-server-0","port":9091}],'
    '"worker":[{"url":"mx-worker-0","port":9091},{"url":"mx-worker-1","port":9091}]}'
)
LABELS = '{"scheduler":"","server":"","worker":""}'


def dmlc(role: str, *, uri: str = "mx-scheduler-0", port: str = "9091") -> list[tuple[str, str]]:
    return [
        ("DMLC_PS_ROOT_PORT", port),
        ("DMLC_PS_ROOT_URI", uri),
        ("DMLC_NUM_SERVER", "1"),
        ("DMLC_NUM_WORKER", "2"),
        ("DMLC_ROLE", role),
        ("DMLC_USE_KUBERNETES", "1"),
    ]


@pytest.mark.parametrize(
    ("rtype", "index", "extra"),
    [("Scheduler", 0, []), ("Server", 0, []), ("Worker", 1, [("DMLC_WORKER_ID", "1")])],
    ids=["scheduler", "server", "worker-1"],
)
def test_every_role_gets_mx_config_then_the_dmlc_variables(
    rtype: str, index: int, extra: list[tuple[str, str]]
) -> None:
    # Byte for byte what v1.7's json.Marshal wrote: compact, map keys sorted, struct fields in order.
    task = f'{{"type":"{rtype.lower()}","index":{index}}}'
    mx_config = f'{{"cluster":{CLUSTER},"labels":{LABELS},"task":{task}}}'

    assert env(job(), rtype, index) == [("MX_CONFIG", mx_config), *dmlc(rtype.lower()), *extra]


def test_host_env_points_at_the_node_and_every_replicas_allocated_port() -> None:
    got = env(job(), "Worker", 0, HOST)
    config = json.loads(str(got[0][1]))

    assert config["cluster"] == {
        "scheduler": [{"url": "10.1.2.3", "port": 31000}],
        "server": [{"url": "10.1.2.3", "port": 31001}],
        "worker": [{"url": "10.1.2.3", "port": 31002}, {"url": "10.1.2.3", "port": 31003}],
    }
    assert got[1:] == [*dmlc("worker", uri="10.1.2.3", port="31000"), ("DMLC_WORKER_ID", "0")]


def test_host_mode_allocates_a_port_for_every_replica() -> None:
    assert sorted(required_port_keys(job(), PLUGIN)) == sorted(HOST_PORTS)


def test_declared_ports_and_the_tuner_server_key_annotation_reach_mx_config() -> None:
    body = job(mode="MXTune", TunerTracker=1, TunerServer=2, Tuner=1).to_dict()
    specs = body["spec"]["mxReplicaSpecs"]
    specs["TunerServer"]["template"] = template({"tuner-server-key": "2080ti"})
    specs["TunerTracker"]["template"] = template(ports=[{"name": "mxjob-port", "containerPort": 9190}])
    owner = apply_defaults(MXJob.model_validate(body), MXJOB)

    got = env(owner, "TunerServer", 1)
    config = json.loads(str(got[0][1]))
    assert list(config["cluster"]) == ["tuner", "tunerserver", "tunertracker"]
    assert config["cluster"]["tunertracker"] == [{"url": "mx-tunertracker-0", "port": 9190}]
    assert config["labels"] == {"tuner": "", "tunerserver": "2080ti", "tunertracker": ""}
    assert config["task"] == {"type": "tunerserver", "index": 1}
    # No Scheduler, Server or Worker: the root is empty and the counts are zero, as v1.7 wrote them.
    assert got[1:] == [
        ("DMLC_PS_ROOT_PORT", "0"),
        ("DMLC_PS_ROOT_URI", ""),
        ("DMLC_NUM_SERVER", "0"),
        ("DMLC_NUM_WORKER", "0"),
        ("DMLC_ROLE", "tunerserver"),
        ("DMLC_USE_KUBERNETES", "1"),
    ]


def test_go_json_escapes_as_go_does() -> None:
    assert go_json({"k": "<a & b> é \u2028"}) == '{"k":"\\u003ca \\u0026 b\\u003e é \\u2028"}'


def test_env_reaches_every_container_after_its_own() -> None:
    tmpl = template(env=[{"name": "DMLC_ROLE", "value": "mine"}])
    tmpl["spec"]["containers"].append({"name": "sidecar", "image": "busybox"})
    body = job().to_dict()
    body["spec"]["mxReplicaSpecs"]["Server"]["template"] = tmpl
    pod = build_pod(apply_defaults(MXJob.model_validate(body), MXJOB), PLUGIN, "Server", 0, DNS)

    main, sidecar = pod.spec.containers
    names = [e.name for e in main.env or []]
    assert names[0] == "DMLC_ROLE" and names[1] == "MX_CONFIG" and "PYTHONUNBUFFERED" not in names
    assert [e.name for e in sidecar.env or []] == names[1:]


# -- pods ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rtype", "role"),
    [("Scheduler", None), ("Server", "master"), ("Worker", None)],
    ids=["scheduler", "server", "worker"],
)
def test_the_servers_have_the_master_role_as_in_v1_7(rtype: str, role: str | None) -> None:
    pod = build_pod(job(), PLUGIN, rtype, 0, DNS)

    assert pod.metadata.name == f"mx-{rtype.lower()}-0"
    pod_labels = pod.metadata.labels or {}
    assert pod_labels[labels.OPERATOR_NAME] == "mxjob-controller"
    assert pod_labels[labels.REPLICA_TYPE] == rtype.lower()
    assert pod_labels.get(labels.JOB_ROLE) == role
    assert pod.spec.restart_policy == "Never"


def test_the_world_is_static() -> None:
    assert PLUGIN.is_elastic(job()) is False
    assert PLUGIN.rendezvous_host(job()) is None
    assert list(PLUGIN.children(job())) == []


# -- verdicts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "lead"),
    [
        ({"Scheduler": 1, "Server": 1, "Worker": 2}, "Scheduler"),
        ({"Worker": 1}, "Worker"),
        ({"Worker": 1, "Tuner": 1}, "Worker"),
        ({"TunerTracker": 1, "TunerServer": 1, "Tuner": 1}, "Tuner"),
        ({"Worker": 3}, "Worker"),
        ({"Server": 1, "Worker": 1}, "Worker"),
        ({"Server": 2}, None),
    ],
    ids=["train", "single-worker", "single-worker-with-tuner", "tune", "workers", "server-and-worker", "servers-only"],
)
def test_the_leader(replicas: dict[str, int], lead: str | None) -> None:
    assert leader(job(**replicas)) == lead


def counts(
    replicas: int = 1, active: int = 0, succeeded: int = 0, failed: int = 0, policy: str = "Never"
) -> ReplicaCounts:
    return ReplicaCounts(replicas=replicas, active=active, succeeded=succeeded, failed=failed, restart_policy=policy)


RUNNING = Verdict(ConditionType.RUNNING, "MXJob mx is running.")
SUCCEEDED = Verdict(ConditionType.SUCCEEDED, "MXJob mx is successfully completed.")


def failed(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.FAILED, f"mxjob mx is failed because {n} {rtype} replica(s) failed.")


def restarting(n: int, rtype: str) -> Verdict:
    return Verdict(ConditionType.RESTARTING, f"mxjob mx is restarting because {n} {rtype} replica(s) failed.")


VERDICTS = [
    ("pending", counts(), counts(), counts(2), []),
    ("only-workers-running", counts(), counts(active=1), counts(2, active=2), []),
    ("scheduler-running", counts(active=1), counts(active=1), counts(2, active=2), [RUNNING]),
    ("scheduler-done", counts(succeeded=1), counts(active=1), counts(2, active=1), [SUCCEEDED]),
    ("scheduler-done-beats-a-failure", counts(succeeded=1), counts(), counts(2, failed=1), [SUCCEEDED]),
    ("workers-done-scheduler-running", counts(active=1), counts(active=1), counts(2, succeeded=2), [RUNNING]),
    (
        "worker-failed-Never",
        counts(active=1),
        counts(active=1),
        counts(2, active=1, failed=1),
        [RUNNING, failed(1, "Worker")],
    ),
    ("server-failed-Never", counts(active=1), counts(failed=1), counts(2, active=2), [RUNNING, failed(1, "Server")]),
    ("scheduler-failed-first", counts(failed=1), counts(), counts(2, failed=2), [failed(1, "Scheduler")]),
    (
        "worker-failed-ExitCode",
        counts(active=1),
        counts(active=1),
        counts(2, active=1, failed=1, policy="ExitCode"),
        [restarting(1, "Worker")],
    ),
    (
        "restarting-then-failed",
        counts(active=1),
        counts(failed=1, policy="OnFailure"),
        counts(2, failed=1),
        [RUNNING, failed(1, "Worker")],
    ),
]


@pytest.mark.parametrize(
    ("scheduler", "server", "worker", "expected"), [c[1:] for c in VERDICTS], ids=[c[0] for c in VERDICTS]
)
def test_verdicts(
    scheduler: ReplicaCounts, server: ReplicaCounts, worker: ReplicaCounts, expected: list[Verdict]
) -> None:
    observed = {"Scheduler": scheduler, "Server": server, "Worker": worker}
    assert list(PLUGIN.verdicts(job(), observed)) == expected


def test_a_tune_job_succeeds_with_its_tuner_where_v1_7s_never_did() -> None:
    owner = job(mode="MXTune", TunerTracker=1, TunerServer=1, Tuner=1)
    observed = {"TunerTracker": counts(active=1), "TunerServer": counts(active=1), "Tuner": counts(succeeded=1)}

    assert list(PLUGIN.verdicts(owner, observed)) == [SUCCEEDED]


def test_a_single_worker_succeeds_alone() -> None:
    assert list(PLUGIN.verdicts(job(Worker=1), {"Worker": counts(active=1)})) == [RUNNING]
    assert list(PLUGIN.verdicts(job(Worker=1), {"Worker": counts(succeeded=1)})) == [SUCCEEDED]


# -- through the reconciler ----------------------------------------------------------------------------


def observed(phases: dict[str, str], restart: str = "Never", exit_code: int = 1) -> Observed:
    """A running MXJob (Created, Running) and its pods in ``phases``."""
    return running_jobs.observed(job(restart), PLUGIN, phases, exit_code)


def test_the_schedulers_success_is_the_jobs() -> None:
    phases = {"scheduler-0": "Succeeded", "server-0": "Running", "worker-0": "Succeeded", "worker-1": "Succeeded"}
    plan = reconcile(observed(phases), PLUGIN, ControllerSettings())

    assert plan.status is not None
    assert [(c.type, c.status, c.reason) for c in plan.status.conditions][-2:] == [
        ("Running", "False", "MXJobRunning"),
        ("Succeeded", "True", "MXJobSucceeded"),
    ]
    assert plan.status.conditions[-1].message == "MXJob mx is successfully completed."


def test_a_failed_server_under_never_fails_the_job_in_v1_7s_words() -> None:
    phases = {"scheduler-0": "Running", "server-0": "Failed", "worker-0": "Running", "worker-1": "Running"}
    plan = reconcile(observed(phases), PLUGIN, ControllerSettings())

    assert plan.status is not None
    last = plan.status.conditions[-1]
    assert (last.type, last.reason, last.message) == (
        "Failed",
        "MXJobFailed",
        "mxjob mx is failed because 1 Server replica(s) failed.",
    )


def test_a_failed_worker_under_exit_code_restarts_the_whole_gang() -> None:
    phases = {"scheduler-0": "Running", "server-0": "Running", "worker-0": "Running", "worker-1": "Failed"}
    plan = reconcile(observed(phases, restart="ExitCode", exit_code=137), PLUGIN, ControllerSettings())

    assert plan.status is not None and plan.status.restart_count == 1
    assert (plan.status.conditions[-1].type, plan.status.conditions[-1].reason) == ("Restarting", "MXJobRestarting")
    assert len(plan.status.pod_ledger or []) == 4 and {e.recreate for e in plan.status.pod_ledger or []} == {True}
