"""MPIJob's training progress, decided purely: the training env of its workers and launcher, and
``runPolicy.earlyStopping`` ending the job Succeeded with its launcher Job suspended and its
workers deleted (the launched pass's ``lifecycle.succeed_early``)."""

from __future__ import annotations

from typing import Any

import pytest
from test_launched import NOW, PLUGIN, conditions, launcher_job, launcher_pod, mpijob, worker

from trainyard.api.core import Pod
from trainyard.api.meta import TypedObject
from trainyard.controller import ChildRef, ControllerSettings, Observed, Plan, reconcile
from trainyard.controller.progress import EARLY_STOPPED, TARGET_REACHED
from trainyard.frameworks.trainer.status import StatusServer

SERVER = StatusServer("https://127.0.0.1:4443/", "-----BEGIN CERTIFICATE-----\nCA\n")
ROUTE = "https://127.0.0.1:4443/apis/kubeflow.org/v2beta1/namespaces/default/mpijobs/pi/trainingprogress"
RUNNING = {
    "conditions": [
        {"type": "Created", "status": "True", "reason": "MPIJobCreated"},
        {"type": "Running", "status": "True", "reason": "MPIJobRunning"},
    ],
    "startTime": "2026-01-01T00:00:00Z",
}


def run(job: Any, *objects: dict[str, Any], server: StatusServer | None = SERVER) -> Plan:
    pods = tuple(Pod.model_validate(p) for p in objects if p["kind"] == "Pod")
    owned = tuple(TypedObject.model_validate(o) for o in objects if o["kind"] != "Pod")
    observed = Observed(job, pods, (), NOW, other_children=owned, key_pairs=lambda: ("private", "public"))
    return reconcile(observed, PLUGIN, ControllerSettings(progress_server=server))


def reported(accuracy: float, epoch: int, **status: Any) -> dict[str, Any]:
    progress = {"currentEpoch": epoch, "metrics": {"accuracy": accuracy}, "progress": f"{epoch}%"}
    return {**RUNNING, "trainingProgress": progress, **status}


def env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def test_workers_and_the_launchers_template_get_the_progress_route_and_a_token_for_this_job() -> None:
    plan = run(mpijob())
    launcher = next(o for o in plan.apply if o.kind == "Job").to_dict()["spec"]["template"]["spec"]
    workers = [p.to_dict()["spec"] for p in plan.create if isinstance(p, Pod)]
    assert len(workers) == 2
    for spec in (launcher, *workers):
        [container] = spec["containers"]
        got = env(container)
        assert got["TRAINYARD_PROGRESS_URL"] == ROUTE
        assert got["TRAINYARD_PROGRESS_TOKEN"] == "/var/run/secrets/trainyard/progress/token"
        assert got["TRAINYARD_PROGRESS_CA"] == SERVER.ca_pem
        assert (got["TRAINYARD_JOB_NAME"], got["TRAINYARD_JOB_KIND"]) == ("pi", "MPIJob")
        mount = next(m for m in container["volumeMounts"] if m["name"] == "trainyard-progress-token")
        assert mount["mountPath"] == "/var/run/secrets/trainyard/progress"
        volume = next(v for v in spec["volumes"] if v["name"] == "trainyard-progress-token")
        token = volume["projected"]["sources"][0]["serviceAccountToken"]
        assert token["audience"] == "kubeflow.org/v2beta1/namespaces/default/mpijobs/pi/trainingprogress"
    # the kind's own env and mounts stay: the SSH keys, the hostfile, the role
    assert env(launcher["containers"][0])["K_MPI_JOB_ROLE"] == "launcher"
    assert {"ssh-auth", "mpi-job-config"} <= {v["name"] for v in launcher["volumes"]}
    assert env(workers[0]["containers"][0])["K_MPI_JOB_ROLE"] == "worker"


def test_without_a_status_server_only_the_job_names_are_given() -> None:
    plan = run(mpijob(), server=None)
    [container] = next(o for o in plan.apply if o.kind == "Job").to_dict()["spec"]["template"]["spec"]["containers"]
    assert "TRAINYARD_PROGRESS_URL" not in env(container) and env(container)["TRAINYARD_JOB_NAME"] == "pi"
    assert "trainyard-progress-token" not in str(container.get("volumeMounts"))


def test_workers_created_after_a_checkpoint_resume_from_it() -> None:
    status = {**RUNNING, "trainingProgress": {"lastCheckpoint": {"path": "/ckpt/e2.pt", "epoch": 2}}}
    plan = run(mpijob(status=status), launcher_job(status={"active": 1}), launcher_pod(), worker(0))
    [created] = [p for p in plan.create if isinstance(p, Pod)]
    assert created.name == "pi-worker-1"
    assert env(created.to_dict()["spec"]["containers"][0])["TRAINYARD_RESUME_FROM"] == "/ckpt/e2.pt"


def test_a_target_reached_succeeds_the_job_suspends_its_launcher_and_deletes_its_workers() -> None:
    job = mpijob(status=reported(0.96, 3), runPolicy={"earlyStopping": {"target": 0.95}})
    plan = run(job, launcher_job(status={"active": 1}), launcher_pod(), worker(0), worker(1))

    assert conditions(plan)[-2:] == [("Running", "False", "MPIJobRunning"), ("Succeeded", "True", TARGET_REACHED)]
    assert plan.status is not None
    assert plan.status.conditions[-1].message == "accuracy 0.96 >= target 0.95 at epoch 3"
    assert plan.status.completion_time == NOW
    statuses = {k: (v.active, v.succeeded) for k, v in plan.status.replica_statuses.items()}
    assert statuses == {"Launcher": (0, 1), "Worker": (0, 2)}
    # the launcher Job is suspended (its controller deletes its pod with the pod's grace, never
    # replacing it), not deleted; the workers are deleted (with their grace) whatever cleanPodPolicy
    [launcher] = plan.apply
    assert (launcher.kind, launcher.name, launcher.to_dict()["spec"]["suspend"]) == ("Job", "pi-launcher", True)
    assert launcher.metadata.resource_version == "7"  # replaced as read: a newer one conflicts
    assert set(plan.delete) == {ChildRef("Pod", "pi-worker-0"), ChildRef("Pod", "pi-worker-1")}
    assert plan.create == ()
    assert (TARGET_REACHED, "accuracy 0.96 >= target 0.95 at epoch 3") in [(e.reason, e.message) for e in plan.events]


def test_patience_stops_the_job_early_too() -> None:
    progress = {
        "currentEpoch": 5,
        "metrics": {"accuracy": 0.8},
        "best": {"metric": "accuracy", "value": 0.9, "epoch": 2},
    }
    job = mpijob(status={**RUNNING, "trainingProgress": progress}, runPolicy={"earlyStopping": {"patience": 3}})
    plan = run(job, launcher_job(status={"active": 1}), launcher_pod(), worker(0), worker(1))
    assert conditions(plan)[-1] == ("Succeeded", "True", EARLY_STOPPED)
    assert plan.status is not None and "(patience 3); stopped at epoch 5" in (plan.status.conditions[-1].message or "")


def test_once_stopped_the_next_pass_only_cleans_up_and_never_recreates_anything() -> None:
    policy = {"earlyStopping": {"target": 0.95}}
    first = run(
        mpijob(status=reported(0.96, 3), runPolicy=policy),
        launcher_job(status={"active": 1}),
        launcher_pod(),
        worker(0),
    )
    assert first.status is not None
    stored = first.status.to_dict()
    # the launcher suspended, its pod and the workers gone
    again = run(mpijob(status=stored, runPolicy=policy), launcher_job(suspend=True, status={"active": 0}))
    assert again.create == () and again.apply == () and again.delete == ()
    assert again.status is None


@pytest.mark.parametrize(
    ("spec", "launcher_status"),
    [
        ({"earlyStopping": {"target": 0.99}}, {"active": 1}),  # not reached
        ({}, {"active": 1}),  # no policy
        ({"earlyStopping": {"target": 0.95}, "suspend": True}, {"active": 1}),  # suspended first
    ],
)
def test_a_policy_that_has_not_fired_stops_nothing(spec: dict[str, Any], launcher_status: dict[str, Any]) -> None:
    job = mpijob(status=reported(0.96, 3), runPolicy=spec)
    plan = run(job, launcher_job(status=launcher_status), launcher_pod(), worker(0), worker(1))
    assert plan.status is None or all(c[2] not in (TARGET_REACHED, EARLY_STOPPED) for c in conditions(plan))
    assert not any(o.kind == "Job" and o.to_dict()["spec"].get("suspend") for o in plan.apply) or spec.get("suspend")


def test_a_launcher_that_already_completed_decides_the_outcome() -> None:
    job = mpijob(status=reported(0.96, 3), runPolicy={"earlyStopping": {"target": 0.95}})
    done = {"conditions": [{"type": "Complete", "status": "True"}], "completionTime": "2026-01-01T00:01:00Z"}
    plan = run(job, launcher_job(status=done), launcher_pod("Succeeded"), worker(0), worker(1))
    assert conditions(plan)[-1] == ("Succeeded", "True", "MPIJobSucceeded")
    assert not any(o.kind == "Job" for o in plan.apply)


def test_an_evicted_worker_keeps_its_failure() -> None:
    job = mpijob(status=reported(0.96, 3), runPolicy={"earlyStopping": {"target": 0.95}})
    plan = run(
        job, launcher_job(status={"active": 1}), launcher_pod(), worker(0), worker(1, "Failed", reason="Evicted")
    )
    assert conditions(plan)[-1] == ("Failed", "True", "MPIJobEvicted")
    assert not any(o.kind == "Job" for o in plan.apply)
