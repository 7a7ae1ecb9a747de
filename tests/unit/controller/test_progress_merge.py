"""``controller.progress`` (report checks, merge, the early-stopping decision) and what the
reconciler does with it: a policy that fires ends the job Succeeded and stops its running replicas;
``controller.trainingenv``: the env and token volume of the pods it creates."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from job_builders import DNS, NOW, created, env_of, job, replicas, run, stored_status, template

from trainyard.api.common import EarlyStopping
from trainyard.api.kinds import KINDS
from trainyard.controller import ChildRef, ControllerSettings
from trainyard.controller.progress import (
    EARLY_STOPPED,
    TARGET_REACHED,
    InvalidReport,
    audience,
    merge,
    path,
    policy_of,
    report_of,
    stop_decision,
)
from trainyard.frameworks.trainer.status import StatusServer
from trainyard.kit.plans import Event, EventType

T = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
PYTORCH = KINDS["PyTorchJob"]


def es(**fields: Any) -> EarlyStopping:
    return EarlyStopping.model_validate(fields)


# -- routes ---------------------------------------------------------------------------------------


def test_route_and_audience_name_the_job() -> None:
    assert path(PYTORCH, "ns", "mnist") == "/apis/kubeflow.org/v1/namespaces/ns/pytorchjobs/mnist/trainingprogress"
    assert audience(PYTORCH, "ns", "mnist") == "kubeflow.org/v1/namespaces/ns/pytorchjobs/mnist/trainingprogress"


# -- merging --------------------------------------------------------------------------------------


def test_first_report_becomes_the_progress() -> None:
    report = {
        "epoch": 1,
        "totalEpochs": 3,
        "metrics": {"loss": 0.5, "accuracy": 0.7},
        "progressPercentage": 33,
        "estimatedRemainingSeconds": 20,
        "time": "2026-01-01T11:59:59.5+00:00",
    }
    assert merge(None, report, None, T) == {
        "currentEpoch": 1,
        "totalEpochs": 3,
        "metrics": {"loss": 0.5, "accuracy": 0.7},
        "progressPercentage": 33,
        "progress": "33%",
        "estimatedRemainingSeconds": 20,
        "lastUpdateTime": "2026-01-01T11:59:59Z",
    }


def test_later_reports_merge_metrics_by_name_and_keep_the_checkpoint() -> None:
    old = merge(None, {"epoch": 1, "totalEpochs": 4, "metrics": {"loss": 0.5, "lr": "warmup"}}, None, T)
    old = merge(old, {"checkpoint": {"path": "/ckpt/1.pt", "epoch": 1}}, None, T)
    new = merge(old, {"epoch": 2, "metrics": {"loss": 0.25}}, None, T)
    assert new["metrics"] == {"loss": 0.25, "lr": "warmup"}
    assert new["lastCheckpoint"] == {"path": "/ckpt/1.pt", "epoch": 1, "time": "2026-01-01T12:00:00Z"}
    # derived from epochs when the report has no percentage
    assert (new["currentEpoch"], new["progressPercentage"], new["progress"]) == (2, 50, "50%")
    assert new["lastUpdateTime"] == "2026-01-01T12:00:00Z"


def test_steps_decide_the_percentage_before_epochs() -> None:
    new = merge(None, {"epoch": 0, "totalEpochs": 2, "step": 30, "totalSteps": 40}, None, T)
    assert new["progressPercentage"] == 75


def test_a_diverged_metric_is_kept_as_a_string() -> None:
    assert merge(None, {"metrics": {"loss": float("nan")}}, None, T)["metrics"] == {"loss": "nan"}


BAD_REPORTS = [
    ({"epoch": -1}, "report.epoch: must be between 0"),
    ({"epoch": "3"}, "report.epoch: must be an integer, got str"),
    ({"epoch": True}, "report.epoch: must be an integer, got bool"),
    ({"progressPercentage": 101}, "report.progressPercentage: must be between 0 and 100"),
    ({"metrics": [1]}, "report.metrics: must be an object"),
    ({"metrics": {"loss": [1]}}, "report.metrics.loss: must be a number or a string, got list"),
    ({"metrics": {"": 1}}, "report.metrics: names must be strings"),
    ({"metrics": {f"m{i}": i for i in range(300)}}, "report.metrics: at most 256"),
    ({"checkpoint": {"epoch": 1}}, "report.checkpoint.path: must be a string"),
    ({"checkpoint": {"path": "/c", "where": 1}}, "report.checkpoint.where: unknown field"),
    ({"time": "yesterday"}, "report.time: 'yesterday' is not an RFC 3339 date-time"),
    ({"time": "2026-01-01T00:00:00"}, "has no time zone"),
    ({"loss": 0.1}, "report.loss: unknown field"),
    ("everything", "report: must be an object"),
]


@pytest.mark.parametrize(("report", "message"), BAD_REPORTS, ids=[m for _, m in BAD_REPORTS])
def test_bad_reports_are_refused_with_the_field_named(report: Any, message: str) -> None:
    with pytest.raises(InvalidReport, match=None) as caught:
        merge(None, report, None, T)
    assert message in str(caught.value)


@pytest.mark.parametrize("body", [None, [], {"trainerStatus": {}}, {"report": {}, "more": 1}])
def test_the_body_must_hold_only_a_report(body: Any) -> None:
    with pytest.raises(InvalidReport, match="report"):
        report_of(body)


def test_a_job_keeps_a_bounded_number_of_metrics() -> None:
    old = merge(None, {"metrics": {f"a{i}": i for i in range(200)}}, None, T)
    with pytest.raises(InvalidReport, match="at most 256"):
        merge(old, {"metrics": {f"b{i}": i for i in range(100)}}, None, T)


# -- the success policy -----------------------------------------------------------------------------


@pytest.mark.parametrize(("metric", "mode"), [(None, "max"), ("val_loss", "min"), ("top1_error", "min"), ("f1", "max")])
def test_policy_defaults(metric: str | None, mode: str) -> None:
    policy = policy_of(es(metric=metric, patience=2))
    assert policy is not None
    assert (policy.metric, policy.mode, policy.min_delta) == (metric or "accuracy", mode, 0.0)


def reports(values: list[float], spec: EarlyStopping, metric: str = "accuracy") -> dict[str, Any]:
    progress: dict[str, Any] | None = None
    for epoch, value in enumerate(values, start=1):
        progress = merge(progress, {"epoch": epoch, "totalEpochs": 50, "metrics": {metric: value}}, spec, T)
    assert progress is not None
    return progress


def test_best_follows_the_policy_metric() -> None:
    spec = es(patience=3, minDelta=0.01)
    progress = reports([0.5, 0.7, 0.705, 0.69], spec)
    # 0.705 is not better than 0.7 by more than minDelta
    assert progress["best"] == {"metric": "accuracy", "value": 0.7, "epoch": 2}
    assert reports([0.5], es(target=0.9))["best"] == {"metric": "accuracy", "value": 0.5, "epoch": 1}
    assert "best" not in merge(None, {"metrics": {"accuracy": 0.5}}, None, T)


def test_target_reached_for_max_and_min() -> None:
    spec = es(target=0.9)
    assert stop_decision(reports([0.5, 0.8], spec), spec) is None
    stop = stop_decision(reports([0.5, 0.8, 0.91], spec), spec)
    assert stop is not None and stop.reason == TARGET_REACHED
    assert stop.message == "accuracy 0.91 >= target 0.9 at epoch 3"
    loss = es(metric="loss", target=0.1)
    stop = stop_decision(reports([0.3, 0.1], loss, "loss"), loss)
    assert stop is not None and stop.message == "loss 0.1 <= target 0.1 at epoch 2"


def test_patience_counts_completed_epochs_since_the_best() -> None:
    spec = es(patience=2)
    assert stop_decision(reports([0.5, 0.6, 0.55], spec), spec) is None
    stop = stop_decision(reports([0.5, 0.6, 0.55, 0.58], spec), spec)
    assert stop is not None and stop.reason == EARLY_STOPPED
    assert stop.message == (
        "accuracy has not improved on its best 0.6 (epoch 2) for 2 epochs (patience 2); stopped at epoch 4"
    )


def test_no_policy_no_progress_or_a_string_metric_never_stop() -> None:
    spec = es(target=0.5)
    assert stop_decision(reports([0.9], spec), None) is None
    assert stop_decision(None, spec) is None
    assert stop_decision({"metrics": {"accuracy": "nan"}}, spec) is None


# -- through the reconciler ---------------------------------------------------------------------------


def early_job(policy: dict[str, Any], progress: dict[str, Any] | None, clean: str | None = None) -> Any:
    status = stored_status("Created", "Running", **({"trainingProgress": progress} if progress else {}))
    return job(1, 2, clean=clean, status=status, extra_spec={"runPolicy": {"earlyStopping": policy}})


@pytest.mark.parametrize("clean", [None, "None", "All"])
def test_a_policy_that_fires_succeeds_the_job_and_stops_running_replicas(clean: str | None) -> None:
    owner = early_job({"target": 0.9}, {"currentEpoch": 3, "metrics": {"accuracy": 0.93}}, clean)
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Succeeded"]})

    plan = run(owner, pods, services)

    assert plan.status is not None
    succeeded = plan.status.conditions[-1]
    assert (succeeded.type.value, succeeded.status, succeeded.reason) == ("Succeeded", "True", TARGET_REACHED)
    assert succeeded.message == "accuracy 0.93 >= target 0.9 at epoch 3"
    assert plan.status.completion_time == NOW
    # whatever cleanPodPolicy says, the running replicas go (with their grace period: a plain delete);
    # the one that ended already stays unless the policy is All
    stopped = {"mnist-master-0", "mnist-worker-0"} | ({"mnist-worker-1"} if clean == "All" else set())
    assert {r.name for r in plan.delete if r.kind == "Pod"} == stopped
    assert {r for r in plan.delete if r.kind == "Service"} == {ChildRef("Service", s.name) for s in services}
    assert plan.create == ()
    assert Event(EventType.NORMAL, TARGET_REACHED, succeeded.message) in plan.events

    # The next pass sees a finished job: nothing is recreated, cleanPodPolicy takes over.
    finished = job(1, 2, clean=clean, status=plan.status.to_dict(), extra_spec={"runPolicy": {"earlyStopping": {}}})
    later = run(finished, pods[2:], ())
    assert later.create == ()


def test_a_policy_that_has_not_fired_changes_nothing() -> None:
    owner = early_job({"target": 0.9}, {"currentEpoch": 3, "metrics": {"accuracy": 0.5}})
    pods, services = replicas(owner, {"Master": ["Running"], "Worker": ["Running", "Running"]})
    plan = run(owner, pods, services)
    assert plan.delete == () and plan.status is not None
    assert [c.type.value for c in plan.status.conditions] == ["Created", "Running"]


# -- the env of the pods created ------------------------------------------------------------------------

SERVER = StatusServer("https://127.0.0.1:4443/", "-----BEGIN CERTIFICATE-----\nCA\n")


def test_created_pods_carry_the_job_names_and_no_token_without_a_server() -> None:
    pod = created(run(job(1, 0)), "Pod")["mnist-master-0"]
    env = env_of(pod)
    assert (env["TRAINYARD_JOB_NAME"], env["TRAINYARD_JOB_NAMESPACE"], env["TRAINYARD_JOB_KIND"]) == (
        "mnist",
        "team-a",
        "PyTorchJob",
    )
    assert "TRAINYARD_PROGRESS_URL" not in env and "TRAINYARD_RESUME_FROM" not in env
    assert "volumes" not in pod.to_dict()["spec"]


def test_with_a_server_every_container_gets_the_route_the_ca_and_a_token_for_this_job() -> None:
    tmpl = {
        "spec": {
            "containers": [
                {"name": "pytorch", "image": "x", "env": [{"name": "TRAINYARD_PROGRESS_URL", "value": "mine"}]},
                {"name": "sidecar", "image": "y"},
            ]
        }
    }
    settings = ControllerSettings(network_mode=DNS.network_mode, progress_server=SERVER)
    pod = created(run(job(1, 0, tmpl=tmpl), settings=settings), "Pod")["mnist-master-0"].to_dict()
    url = "https://127.0.0.1:4443/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/trainingprogress"
    for container in pod["spec"]["containers"]:
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert [e["name"] for e in container["env"]].count("TRAINYARD_PROGRESS_URL") == 1
        assert env["TRAINYARD_PROGRESS_URL"] == url
        assert env["TRAINYARD_PROGRESS_TOKEN"] == "/var/run/secrets/trainyard/progress/token"
        assert env["TRAINYARD_PROGRESS_CA"] == SERVER.ca_pem
        assert container["volumeMounts"] == [
            {"name": "trainyard-progress-token", "mountPath": "/var/run/secrets/trainyard/progress", "readOnly": True}
        ]
    assert pod["spec"]["volumes"] == [
        {
            "name": "trainyard-progress-token",
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": "kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/trainingprogress",
                            "expirationSeconds": 3600,
                            "path": "token",
                        }
                    }
                ]
            },
        }
    ]


def test_pods_created_after_a_checkpoint_resume_from_it_and_trackers_get_the_job_name() -> None:
    env = [
        {"name": "TRAINYARD_RESUME_FROM", "value": "/from/the/template"},
        {"name": "MLFLOW_TRACKING_URI", "value": "http://mlflow:5000"},
        {"name": "WANDB_PROJECT", "value": "p"},
        {"name": "WANDB_RUN_GROUP", "value": "mine"},
    ]
    progress = {"lastCheckpoint": {"path": "/ckpt/checkpoint-2.pt", "epoch": 2}}
    owner = job(1, 0, tmpl=template(env=env), status=stored_status("Created", "Running", trainingProgress=progress))
    got = env_of(created(run(owner), "Pod")["mnist-master-0"])
    assert got["TRAINYARD_RESUME_FROM"] == "/ckpt/checkpoint-2.pt"
    assert got["MLFLOW_RUN_NAME"] == "mnist"
    assert got["WANDB_RUN_GROUP"] == "mine"
    # before any checkpoint the template's value stands
    fresh = env_of(created(run(job(1, 0, tmpl=template(env=env))), "Pod")["mnist-master-0"])
    assert fresh["TRAINYARD_RESUME_FROM"] == "/from/the/template"
