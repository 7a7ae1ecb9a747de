"""TrainingJob compiled to its owned v1 job, and the seed's state machine read from that job. Pure."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainyard.api.trainingjob import default
from trainyard.controller.trainingjob import TrainingJobObserved, reconcile
from trainyard.frameworks.trainingjob import build

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "trainingjob"
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def example(name: str) -> dict[str, Any]:
    obj = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    obj["metadata"].setdefault("namespace", "default")
    obj["metadata"]["uid"] = "u1"
    default(obj)
    return obj


def container(job: dict[str, Any], rtype: str = "Master") -> dict[str, Any]:
    specs = next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    return specs[rtype]["template"]["spec"]["containers"][0]


def env(c: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value") for e in c["env"]}


def test_basic_example_is_a_master_and_a_worker_running_the_stand_in() -> None:
    job = build(example("mnist-training"))
    assert (job["kind"], job["metadata"]["name"]) == ("PyTorchJob", "mnist-training")
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 1}
    assert specs["Worker"]["template"]["metadata"]["labels"] == {"training-job": "mnist-training"}
    c = container(job, "Worker")
    assert c["command"] == ["python", "-m", "trainyard.standins.train"]
    assert c["args"][:4] == ["--model", "cnn", "--dataset", "mnist"]
    assert "--epochs" in c["args"] and "--learning-rate" in c["args"]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
    values = env(c)
    assert (values["EPOCHS"], values["BATCH_SIZE"], values["LEARNING_RATE"]) == ("10", "64", "0.001")
    assert json.loads(values["TRAINYARD_HYPERPARAMETERS"]) == {"learningRate": 0.001, "batchSize": 64, "epochs": 10}


def test_advanced_example_passes_everything_through() -> None:
    job = build(example("advanced-training"))
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["replicas"] == 7 and specs["Master"]["restartPolicy"] == "OnFailure"
    c = container(job)
    assert c["command"] == ["python", "-m", "torch.distributed.run"] and c["args"] == ["--nproc_per_node=4", "train.py"]
    assert c["image"] == "nvcr.io/nvidia/pytorch:23.10-py3"
    assert c["ports"][0] == {"name": "pytorchjob-port", "containerPort": 29500}
    assert "ports" not in container(job, "Worker") or all(
        p["name"] != "pytorchjob-port" for p in container(job, "Worker")["ports"]
    )
    values = env(c)
    assert values["NCCL_DEBUG"] == "INFO" and values["NCCL_IB_DISABLE"] == "1"  # the user's value first
    assert values["OPTIMIZER"] == "adamw" and values["MIXED_PRECISION"] == "true"
    # S3: one prefix per job, and a directory CheckpointManager writes (TRAINYARD_CHECKPOINT_DIR)
    assert values["TRAINYARD_CHECKPOINT_URI"] == "s3://ml-checkpoints/advanced-training"
    assert values["TRAINYARD_CHECKPOINT_DIR"] == "s3://ml-checkpoints/advanced-training"
    assert values["TRAINYARD_CHECKPOINT_KEEP"] == "10" and values["TRAINYARD_CHECKPOINT_FREQUENCY"] == "5"
    assert values["TRAINYARD_RESUME_FROM"] == "s3://ml-checkpoints/resnet152/checkpoint-epoch-50"
    assert values["MLFLOW_TRACKING_URI"].startswith("http://mlflow") and values["WANDB_PROJECT"] == "advanced-training"
    assert values["TRAINYARD_DIST_BACKEND"] == "nccl"
    pod = specs["Master"]["template"]["spec"]
    assert pod["priorityClassName"] == "high-priority" and pod["nodeSelector"]["node-type"] == "gpu-large"
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu" and "podAntiAffinity" in pod["affinity"]
    policy = job["spec"]["runPolicy"]
    assert policy["backoffLimit"] == 3 and policy["activeDeadlineSeconds"] == 86400
    assert policy["schedulingPolicy"] == {"priorityClass": "high-priority"}
    assert policy["earlyStopping"] == {"metric": "accuracy", "mode": "max", "target": 0.95, "patience": 5}


@pytest.mark.parametrize(
    ("framework", "kind", "field"), [("tensorflow", "TFJob", "tfReplicaSpecs"), ("jax", "JAXJob", "jaxReplicaSpecs")]
)
def test_other_frameworks_have_workers_only(framework: str, kind: str, field: str) -> None:
    tjob = example("mnist-training")
    tjob["spec"]["framework"] = framework
    job = build(tjob)
    assert job["kind"] == kind and {k: v["replicas"] for k, v in job["spec"][field].items()} == {"Worker": 2}


def test_local_checkpoints_mount_a_volume() -> None:
    tjob = example("mnist-training")
    tjob["spec"]["checkpoint"] = {"enabled": True, "storage": {"type": "pvc", "pvcName": "ckpt"}, "retention": 2}
    job = build(tjob)
    c = container(job)
    assert env(c)["TRAINYARD_CHECKPOINT_DIR"] == "/checkpoints/mnist-training"
    assert c["volumeMounts"] == [{"name": "checkpoints", "mountPath": "/checkpoints"}]
    volume = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["volumes"][0]
    assert volume["persistentVolumeClaim"] == {"claimName": "ckpt"}


def owned(tjob: dict[str, Any], *, conditions: tuple[str, ...] = (), active: int = 0, **status: Any) -> dict[str, Any]:
    job = build(tjob)
    job["metadata"]["resourceVersion"] = "7"
    job["status"] = {
        "conditions": [{"type": t, "status": "True", "reason": f"Job{t}", "message": f"job {t}"} for t in conditions],
        "replicaStatuses": {"Master": {"active": min(active, 1)}, "Worker": {"active": max(active - 1, 0)}},
        **status,
    }
    return job


def step(tjob: dict[str, Any], job: dict[str, Any] | None) -> tuple[dict[str, Any], Any]:
    plan = reconcile(TrainingJobObserved(trainingjob=tjob, job=job, now=NOW))
    if plan.status is not None:
        tjob["status"] = plan.status
    return tjob, plan


def test_state_machine_pending_initializing_running_completed() -> None:
    tjob = example("mnist-training")
    tjob, plan = step(tjob, None)
    assert tjob["status"]["state"] == "Pending" and plan.apply[0]["kind"] == "PyTorchJob"
    tjob, plan = step(tjob, owned(tjob, conditions=("Created",)))
    assert tjob["status"]["state"] == "Initializing" and plan.apply == ()
    assert [e.reason for e in plan.events] == ["Initializing"]
    tjob, _ = step(tjob, owned(tjob, conditions=("Created", "Running"), active=1))
    assert tjob["status"]["state"] == "Initializing"  # one of two workers runs
    progress = {
        "progressPercentage": 40,
        "currentEpoch": 4,
        "totalEpochs": 10,
        "metrics": {"loss": 0.3, "accuracy": 0.9},
    }
    tjob, plan = step(tjob, owned(tjob, conditions=("Created", "Running"), active=2, trainingProgress=progress))
    status = tjob["status"]
    assert (status["state"], status["progress"], status["currentEpoch"], status["totalEpochs"]) == (
        "Running",
        "40%",
        4,
        10,
    )
    assert status["metrics"] == {"loss": 0.3, "accuracy": 0.9} and status["workers"]["active"] == 2
    done = owned(
        tjob,
        conditions=("Created", "Succeeded"),
        startTime="2026-01-01T11:00:00Z",
        completionTime="2026-01-01T11:02:05Z",
        restartCount=1,
    )
    tjob, plan = step(tjob, done)
    status = tjob["status"]
    assert (status["state"], status["duration"], status["restartCount"]) == ("Completed", "2m5s", 1)
    truths = {c["type"]: c["status"] for c in status["conditions"]}
    assert truths == {"Created": "True", "Running": "False", "Succeeded": "True"}
    _, again = step(copy.deepcopy(tjob), done)
    assert again.status is None and again.events == ()  # idempotent


def test_failed_and_suspended() -> None:
    tjob = example("mnist-training")
    step(tjob, None)
    failed = owned(tjob, conditions=("Created", "Failed"))
    failed["status"]["conditions"][1].update(reason="BackoffLimitExceeded", message="restarted 3 times")
    tjob, plan = step(tjob, failed)
    assert tjob["status"]["state"] == "Failed"
    assert tjob["status"]["failureReason"] == "BackoffLimitExceeded: restarted 3 times"
    assert plan.events[0].type.value == "Warning"
    other = example("mnist-training")
    other["spec"]["suspend"] = True
    other, plan = step(other, None)
    assert other["status"]["state"] == "Suspended" and plan.apply[0]["spec"]["runPolicy"]["suspend"] is True
    running = owned(example("mnist-training"), conditions=("Created", "Running"), active=2)
    other, plan = step(other, running)
    assert plan.apply[0]["spec"]["runPolicy"]["suspend"] is True  # the running job is suspended


def test_gcs_checkpoints_are_said_to_be_remote_once_and_s3_ones_are_written() -> None:
    tjob = example("gpt-resume")
    _, plan = step(tjob, None)
    assert not [e for e in plan.events if e.reason == "CheckpointStorageNotLocal"]
    values = env(container(plan.apply[0]))
    assert values["TRAINYARD_CHECKPOINT_DIR"] == "s3://ml-checkpoints/gpt-resume"
    assert values["TRAINYARD_RESUME_FROM"] == "s3://checkpoints/gpt-training/checkpoint-epoch-10"
    tjob = example("gpt-resume")
    tjob["spec"]["checkpoint"]["storage"] = {"type": "gcs", "gcsBucket": "ml-checkpoints", "path": "runs/gpt"}
    _, plan = step(tjob, None)
    assert [e.reason for e in plan.events if e.reason == "CheckpointStorageNotLocal"] == ["CheckpointStorageNotLocal"]
    values = env(container(plan.apply[0]))
    assert values["TRAINYARD_CHECKPOINT_URI"] == "gcs://ml-checkpoints/runs/gpt"
    assert "TRAINYARD_CHECKPOINT_DIR" not in values
