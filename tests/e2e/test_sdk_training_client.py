"""``trainyard.TrainingClient`` against a real plane: Kubeflow's methods, jobs from functions, typed errors."""

from __future__ import annotations

import copy
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import local_index
import trainyard
from conftest import Plane, eventually, free_port
from trainyard.api.kubeflow.pytorch import PyTorchJob
from trainyard.sdk import (
    AlreadyExistsError,
    ConflictError,
    ConnectError,
    InvalidError,
    JobFailedError,
    NotFoundError,
    TrainingClient,
)

pytestmark = pytest.mark.e2e

SAY_RANK = "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], flush=True)"


def manifest(name: str, command: list[str], *, worker: bool = True, policy: str = "OnFailure") -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "python:3.11", "command": command}]}}
    replicas = {"Master": {"replicas": 1, "restartPolicy": policy, "template": template}}
    if worker:
        replicas["Worker"] = {"replicas": 1, "restartPolicy": policy, "template": copy.deepcopy(template)}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": replicas},
    }


def ddp_train(parameters: dict[str, Any]) -> None:
    # Runs in each replica under torchrun, which took its rendezvous from the operator's PET_* env.
    import tinypkg_for_yard
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    print(
        parameters["greeting"],
        "rank",
        dist.get_rank(),
        "world",
        dist.get_world_size(),
        "sum",
        value.item(),
        "pkg",
        tinypkg_for_yard.ANSWER,
        flush=True,
    )
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def sdk(plane: Plane) -> TrainingClient:
    return TrainingClient(plane.kubeconfig, namespace="default")


def test_default_kubeconfig_is_the_planes_from_trainyard_home(plane: Plane, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINYARD_HOME", str(plane.home))
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    client = trainyard.TrainingClient()
    assert client.kubeconfig == plane.kubeconfig
    assert client.server == plane.url
    assert isinstance(client.list_jobs(), list)


def test_any_kubeconfig_with_its_context_and_namespace(
    plane: Plane, sdk: TrainingClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = yaml.safe_load(plane.kubeconfig.read_text())
    context = copy.deepcopy(config["contexts"][0])
    context["name"] = "team-a"
    context["context"]["namespace"] = "team-a"
    config["contexts"].append(context)
    other = tmp_path / "config"
    other.write_text(yaml.safe_dump(config))
    monkeypatch.delenv("TRAINYARD_HOME", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(other))
    assert TrainingClient(context="team-a").namespace == "team-a"
    assert TrainingClient(config_file=other).namespace == sdk.namespace
    # The namespace must exist for a job to be created in it.
    from lightkube.resources.core_v1 import Namespace

    from trainyard.client.resources import build

    sdk.client.create(build(Namespace, {"metadata": {"name": "team-a"}}))
    team = TrainingClient(context="team-a")
    created = team.create_job(manifest("ctx-job", ["true"], worker=False))
    assert created["metadata"]["namespace"] == "team-a"
    assert [j["metadata"]["name"] for j in team.list_jobs()] == ["ctx-job"]
    assert "ctx-job" not in [j["metadata"]["name"] for j in sdk.list_jobs()]
    team.delete_job("ctx-job")


@pytest.mark.timeout(600)
def test_job_from_a_dict_runs_and_is_inspected_like_kubeflow(sdk: TrainingClient) -> None:
    name = "sdk-dict"
    created = sdk.create_job(manifest(name, ["python", "-c", SAY_RANK]))
    assert created["metadata"]["uid"] and created["metadata"]["namespace"] == "default"
    eventually(lambda: sdk.is_job_created(name), timeout=60, what="Created")
    seen: list[str] = []
    done = sdk.wait_for_job_conditions(
        name, wait_timeout=300, polling_interval=0.5, callback=lambda j: seen.append(str(j["metadata"]["name"]))
    )
    assert sdk.is_job_succeeded(job=done) and seen and set(seen) == {name}
    assert not sdk.is_job_failed(name) and not sdk.is_job_restarting(name)
    conditions = {c["type"]: c["status"] for c in sdk.get_job_conditions(name)}
    # A replica that finishes between two passes is never seen Running (as upstream): Running is
    # then absent; when it was recorded, finishing flipped it to False.
    assert {"Created", "Succeeded"} <= set(conditions) and conditions.get("Running", "False") == "False", conditions
    assert name in [j["metadata"]["name"] for j in sdk.list_jobs()]

    assert sdk.get_job_pod_names(name) == [f"{name}-master-0", f"{name}-worker-0"]
    assert sdk.get_job_pod_names(name, is_master=True) == [f"{name}-master-0"]
    assert sdk.get_job_pod_names(name, replica_type="Worker", replica_index=0) == [f"{name}-worker-0"]
    with pytest.raises(ValueError, match="master, worker"):
        sdk.get_job_pods(name, replica_type="chief")

    logs, events = sdk.get_job_logs(name)
    assert (logs, events) == ({f"{name}-master-0": "rank 0 of 2\n"}, {})
    logs, events = sdk.get_job_logs(name, is_master=False, verbose=True)
    assert logs == {f"{name}-master-0": "rank 0 of 2\n", f"{name}-worker-0": "rank 1 of 2\n"}
    assert any("is successfully completed" in e for e in events[f"pytorchjob/{name}"]), events
    assert f"pod/{name}-worker-0" in events, events
    followed = list(sdk.get_job_logs(name, replica_type="worker", follow=True, is_master=False))
    assert followed == [(f"{name}-worker-0", "rank 1 of 2")]

    job = sdk.get_job(name)
    job["metadata"]["labels"] = {"reviewed": "yes"}
    updated = sdk.update_job(job)
    assert updated["metadata"]["labels"]["reviewed"] == "yes"
    job["metadata"]["labels"] = {"reviewed": "again"}  # still carries the old resourceVersion
    with pytest.raises(ConflictError):
        sdk.update_job(job)

    sdk.delete_job(name)
    missing = eventually(lambda: _not_found(sdk, name), timeout=60, what="job gone")
    assert str(missing) == f'pytorchjobs.kubeflow.org "{name}" not found'
    assert missing.code == 404 and isinstance(missing, RuntimeError)


def _not_found(sdk: TrainingClient, name: str) -> NotFoundError | None:
    try:
        sdk.get_job(name)
    except NotFoundError as exc:
        return exc
    return None


def test_job_from_a_yaml_file_and_from_a_typed_object(sdk: TrainingClient, tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    body = manifest("sdk-yaml", ["true"], worker=False)
    body["spec"]["runPolicy"] = {"suspend": True}  # stored only: no pods needed here
    path.write_text(yaml.safe_dump(body))
    assert sdk.create_job(path)["metadata"]["name"] == "sdk-yaml"
    typed = PyTorchJob.model_validate({**body, "metadata": {"name": "sdk-typed"}})
    stored = sdk.create_job(typed, labels={"origin": "model"})
    assert stored["metadata"]["labels"] == {"origin": "model"}
    assert stored["spec"]["runPolicy"]["suspend"] is True
    with pytest.raises(AlreadyExistsError, match='"sdk-yaml" already exists'):
        sdk.create_job(str(path))
    with pytest.raises(ValueError, match="only namespace, labels, annotations and queue_name"):
        sdk.create_job(path, num_procs_per_worker=2)
    for name in ("sdk-yaml", "sdk-typed"):
        sdk.delete_job(name)


@pytest.mark.timeout(600)
def test_job_from_a_function_runs_torchrun_on_every_replica(
    sdk: TrainingClient, tmp_path_factory: pytest.TempPathFactory
) -> None:
    index = local_index.build(tmp_path_factory.mktemp("index"), "tinypkg_for_yard", "1.0", "ANSWER = 42\n")
    name = "sdk-func"
    sdk.create_job(
        name=name,
        train_func=ddp_train,
        parameters={"greeting": "hello"},
        num_workers=2,
        num_procs_per_worker=1,  # the operator's default is "auto": one process per CPU
        resources_per_worker={"cpu": "500m", "memory": "2Gi"},
        packages_to_install=["tinypkg_for_yard==1.0"],
        pip_index_url=index,
        env_vars={"OMP_NUM_THREADS": "1"},
    )
    # Followed from before the pods exist: it waits for both, streams them, and ends when both end.
    followed = list(sdk.get_job_logs(name, is_master=False, follow=True))
    done = sdk.wait_for_job_conditions(name, wait_timeout=300, polling_interval=1)
    assert sdk.is_job_succeeded(job=done)
    by_pod: dict[str, list[str]] = {}
    for pod, line in followed:
        by_pod.setdefault(pod, []).append(line)
    assert "hello rank 0 world 2 sum 3.0 pkg 42" in by_pod[f"{name}-master-0"], followed
    assert "hello rank 1 world 2 sum 3.0 pkg 42" in by_pod[f"{name}-worker-0"], followed

    worker = sdk.get_job_pods(name, replica_type="worker")[0]
    container = worker["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["PET_NNODES"] == "2" and env["PET_NODE_RANK"] == "1" and env["PET_NPROC_PER_NODE"] == "1"
    assert env["OMP_NUM_THREADS"] == "1"
    assert "PET_MASTER_ADDR" in env and "PET_MASTER_PORT" in env
    assert container["resources"]["limits"] == {"cpu": "500m", "memory": "2Gi"}
    assert 'exec torchrun "$program_path/' in container["args"][0]
    sdk.delete_job(name)


@pytest.mark.timeout(300)
def test_waiting_on_a_failing_job_fails_fast_with_its_message(sdk: TrainingClient) -> None:
    name = "sdk-fails"
    sdk.create_job(manifest(name, ["python", "-c", "raise SystemExit(3)"], worker=False, policy="Never"))
    start = time.monotonic()
    with pytest.raises(JobFailedError) as failed:
        sdk.wait_for_job_conditions(name, wait_timeout=250, polling_interval=0.5)
    assert time.monotonic() - start < 120
    condition = next(c for c in sdk.get_job_conditions(name) if c["type"] == "Failed")
    assert condition["message"] in str(failed.value) and failed.value.reason == condition["reason"]
    assert isinstance(failed.value, RuntimeError)
    assert sdk.is_job_failed(name)
    assert sdk.wait_for_job_conditions(name, expected_conditions={"Failed"}, polling_interval=0.5)
    sdk.delete_job(name)


def test_errors_are_typed_and_carry_the_servers_message(sdk: TrainingClient, plane: Plane, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=re.escape('pytorchjobs.kubeflow.org "nope" not found')):
        sdk.get_job("nope")
    bad = manifest("sdk-bad", ["true"], worker=False)
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(InvalidError) as invalid:
        sdk.create_job(bad)
    assert invalid.value.code == 422
    assert "spec.pytorchReplicaSpecs.Master.replicas" in [c.field for c in invalid.value.causes], invalid.value.causes
    assert "spec.pytorchReplicaSpecs.Master.replicas" in str(invalid.value)
    with pytest.raises(ValueError, match="unknown job kind 'TrainJob'"):
        sdk.list_jobs(job_kind="TrainJob")
    with pytest.raises(ValueError, match="subset"):
        sdk.wait_for_job_conditions("nope", expected_conditions={"Done"})

    # A kubeconfig whose server does not answer: a ConnectError naming it, not a raw transport error.
    config = yaml.safe_load(plane.kubeconfig.read_text())
    dead = f"http://127.0.0.1:{free_port()}"
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = dead
    path = tmp_path / "dead"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ConnectError, match=f"cannot reach the API server at {dead}"):
        TrainingClient(path, request_timeout=5).get_job("x")
    with pytest.raises(FileNotFoundError, match="yard up"):
        TrainingClient(tmp_path / "missing")
