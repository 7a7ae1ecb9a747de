"""Jobs built from a Python function: the manifest's shape, and the replica script run by real bash."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

import local_index
from trainyard.api.kubeflow.pytorch import PyTorchJob
from trainyard.api.kubeflow.tensorflow import TFJOB, TFJob
from trainyard.api.kubeflow.xgboost import XGBOOSTJOB, XGBoostJob
from trainyard.api.validation import validate_job
from trainyard.frameworks.pytorch.plugin import DEFAULT_BASE_IMAGE
from trainyard.frameworks.xgboost.plugin import FUNCTION_IMAGE as XGBOOST_IMAGE
from trainyard.sdk import functions
from trainyard.sdk.errors import AlreadyExistsError, ConflictError, InvalidError, NotFoundError, from_status


def report(parameters: dict[str, Any]) -> None:
    # `$HOME` and backticks must reach Python untouched: the script may not let bash expand them.
    print("got", parameters["lr"], parameters["tag"], "$HOME `true`")


def uses_package() -> None:
    import tinypkg_for_yard  # installed by the replica script from the local index

    print("answer", tinypkg_for_yard.ANSWER)


def run_replica(
    job: dict[str, Any], tmp_path: Path, replica: str = "Master", **operator_env: str
) -> subprocess.CompletedProcess[str]:
    """Run a replica's container command the way the node agent does: the plane's Python first on PATH."""
    (specs,) = (v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))
    container = specs[replica]["template"]["spec"]["containers"][0]
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        **operator_env,
    }
    return subprocess.run(
        [*container["command"], *container["args"]],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


def test_function_job_has_the_kubeflow_shape() -> None:
    job = functions.job_from_function(
        name="fn",
        namespace="team",
        train_func=report,
        parameters={"lr": 0.1, "tag": "a"},
        num_workers=3,
        resources_per_worker={"CPU": 1, "memory": "1Gi", "gpu": 2},
        env_vars={"MODE": "fast"},
        labels={"team": "ml"},
    )
    assert job["kind"] == "PyTorchJob"
    assert job["metadata"] == {"name": "fn", "namespace": "team", "labels": {"team": "ml"}}
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert (specs["Master"]["replicas"], specs["Worker"]["replicas"]) == (1, 2)
    assert job["spec"]["runPolicy"] == {}
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["image"] == DEFAULT_BASE_IMAGE
    assert container["command"] == ["bash", "-c"]
    assert 'exec torchrun "$program_path/' in container["args"][0]
    expected = {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "2"}
    assert container["resources"] == {"requests": expected, "limits": expected}
    assert container["env"] == [{"name": "MODE", "value": "fast"}]
    assert specs["Master"]["template"]["metadata"]["annotations"] == {functions.ISTIO_INJECT: "false"}
    # The server's own model accepts it as it is.
    PyTorchJob.model_validate(job)


def test_one_worker_runs_plain_python_and_procs_per_worker_means_torchrun() -> None:
    single = functions.job_from_function(name="a", namespace="d", train_func=report, num_workers=1)
    assert "Worker" not in single["spec"]["pytorchReplicaSpecs"]
    args = single["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["args"][0]
    assert 'exec python -u "$program_path/' in args
    procs = functions.job_from_function(name="a", namespace="d", train_func=report, num_procs_per_worker=2)
    assert procs["spec"]["nprocPerNode"] == "2"
    assert (
        "exec torchrun"
        in procs["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["args"][0]
    )


def test_replica_script_runs_the_function_with_its_parameters_verbatim(tmp_path: Path) -> None:
    job = functions.job_from_function(name="a", namespace="d", train_func=report, parameters={"lr": 0.5, "tag": "x"})
    result = run_replica(job, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "got 0.5 x $HOME `true`\n"


def test_replica_script_installs_packages_beside_the_program_not_into_the_environment(tmp_path: Path) -> None:
    index = local_index.build(tmp_path / "index", "tinypkg_for_yard", "1.0", "ANSWER = 42\n")
    job = functions.job_from_function(
        name="a",
        namespace="d",
        train_func=uses_package,
        packages_to_install=["tinypkg_for_yard==1.0"],
        pip_index_url=index,
    )
    result = run_replica(job, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("answer 42"), result.stdout
    probe = subprocess.run([sys.executable, "-c", "import tinypkg_for_yard"], capture_output=True, timeout=60)
    assert probe.returncode != 0, "the package leaked into the plane's Python environment"


def leaves_a_process_group() -> None:
    import atexit
    import sys

    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    atexit.register(lambda: print("initialized at exit:", dist.is_initialized(), file=sys.stderr))


def plain() -> None:
    import atexit
    import sys

    atexit.register(lambda: print("torch imported:", "torch" in sys.modules))


def test_the_replica_destroys_a_process_group_the_function_left(tmp_path: Path) -> None:
    # Left to interpreter exit, gloo's process group can abort a replica that did its work (SIGABRT); the
    # restarted replica then reads a dead rank's address from the master's store (connect refused).
    job = functions.job_from_function(name="a", namespace="d", train_func=leaves_a_process_group)
    result = run_replica(job, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "initialized at exit: False" in result.stderr


def test_the_teardown_imports_nothing_for_a_function_without_torch(tmp_path: Path) -> None:
    result = run_replica(functions.job_from_function(name="a", namespace="d", train_func=plain), tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "torch imported: False\n"


def test_a_failing_function_fails_the_replica(tmp_path: Path) -> None:
    def boom() -> None:
        raise SystemExit(3)

    result = run_replica(functions.job_from_function(name="a", namespace="d", train_func=boom), tmp_path)
    assert result.returncode == 3


def test_bad_functions_and_parameters_are_value_errors() -> None:
    with pytest.raises(ValueError, match="lambda"):
        functions.job_from_function(name="a", namespace="d", train_func=lambda: None)
    with pytest.raises(ValueError, match="literals"):
        functions.job_from_function(name="a", namespace="d", train_func=report, parameters={"x": object()})
    with pytest.raises(ValueError, match="at least 1"):
        functions.job_from_function(name="a", namespace="d", train_func=report, num_workers=0)
    with pytest.raises(ValueError, match="same length"):
        functions.job_from_function(name="a", namespace="d", train_func=report, volumes=[{"name": "v"}])


def test_other_clients_models_become_manifests() -> None:
    container = k8s.V1Container(
        name="pytorch",
        image="img",
        env=[k8s.V1EnvVar(name="A", value="1")],
        volume_mounts=[k8s.V1VolumeMount(name="data", mount_path="/data", read_only=True)],
    )
    assert functions.to_manifest({"containers": [container]}) == {
        "containers": [
            {
                "name": "pytorch",
                "image": "img",
                "env": [{"name": "A", "value": "1"}],
                "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": True}],
            }
        ]
    }
    requirements = k8s.V1ResourceRequirements(limits={"cpu": "2"}, requests={"cpu": "1"})
    assert functions.resources(requirements) == {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}


def test_status_bodies_become_typed_errors_with_the_servers_message() -> None:
    from lightkube.models.meta_v1 import Status, StatusCause, StatusDetails

    missing = from_status(Status(code=404, reason="NotFound", message='pytorchjobs.kubeflow.org "x" not found'))
    assert isinstance(missing, NotFoundError) and isinstance(missing, RuntimeError)
    assert str(missing) == 'pytorchjobs.kubeflow.org "x" not found'
    assert isinstance(from_status(Status(code=409, reason="AlreadyExists", message="m")), AlreadyExistsError)
    assert isinstance(from_status(Status(code=409, reason="Conflict", message="m")), ConflictError)
    invalid = from_status(
        Status(
            code=422,
            reason="Invalid",
            message="bad",
            details=StatusDetails(causes=[StatusCause(field="spec.x", reason="FieldValueInvalid", message="no")]),
        )
    )
    assert isinstance(invalid, InvalidError)
    assert [(c.field, c.message) for c in invalid.causes] == [("spec.x", "no")]


# -- XGBoostJob: one Master and num_workers - 1 Workers running the function with plain python ------


def report_rank() -> None:
    import os

    print("rank", os.environ["RANK"], "of", os.environ["WORLD_SIZE"])


def test_an_xgboost_function_job_is_one_master_and_num_workers_minus_one_workers() -> None:
    job = functions.job_from_function(
        name="fn", namespace="team", train_func=report_rank, num_workers=3, env_vars={"MODE": "fast"}, kind="XGBoostJob"
    )

    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "XGBoostJob")
    specs = job["spec"]["xgbReplicaSpecs"]
    assert {k: v["replicas"] for k, v in specs.items()} == {"Master": 1, "Worker": 2}
    assert job["spec"]["runPolicy"] == {}
    for spec in specs.values():
        assert "restartPolicy" not in spec  # the kind's default (Never) applies, as with the Kubeflow SDK
        (container,) = spec["template"]["spec"]["containers"]
        assert (container["name"], container["image"]) == ("xgboost", XGBOOST_IMAGE)
        assert container["command"] == ["bash", "-c"]
        assert 'exec python -u "$program_path/' in container["args"][0]
        assert container["env"] == [{"name": "MODE", "value": "fast"}]
    # Admission takes it as it is.
    assert validate_job(job, XGBOOSTJOB) == []
    XGBoostJob.model_validate(job)


def test_an_xgboost_function_job_of_one_worker_is_a_master_alone() -> None:
    job = functions.job_from_function(name="fn", namespace="d", train_func=report_rank, kind="XGBoostJob")

    assert list(job["spec"]["xgbReplicaSpecs"]) == ["Master"]


def test_xgboost_function_jobs_refuse_processes_per_worker() -> None:
    with pytest.raises(ValueError, match="num_procs_per_worker"):
        functions.job_from_function(
            name="fn", namespace="d", train_func=report_rank, num_procs_per_worker=2, kind="XGBoostJob"
        )


def test_an_xgboost_replica_runs_the_function_with_the_operators_env(tmp_path: Path) -> None:
    job = functions.job_from_function(
        name="fn", namespace="d", train_func=report_rank, num_workers=2, kind="XGBoostJob"
    )
    result = run_replica(job, tmp_path, "Worker", RANK="1", WORLD_SIZE="2")

    assert result.returncode == 0, result.stderr
    assert result.stdout == "rank 1 of 2\n"


# -- TFJob: a Chief and PS when asked, then num_workers Workers, the function under plain python -------


def report_task() -> None:
    import json
    import os

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print(task["type"], task["index"])


def test_a_tfjob_function_job_is_the_kubeflow_sdks_chief_ps_and_workers() -> None:
    job = functions.job_from_function(
        name="fn", namespace="team", train_func=report_task, num_workers=2, kind="TFJob", roles={"Chief": 1, "PS": 1}
    )

    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = job["spec"]["tfReplicaSpecs"]
    assert [(k, v["replicas"]) for k, v in specs.items()] == [("Chief", 1), ("PS", 1), ("Worker", 2)]
    for spec in specs.values():
        assert "restartPolicy" not in spec  # the kind's default (Never) applies, as with the Kubeflow SDK
        (container,) = spec["template"]["spec"]["containers"]
        assert (container["name"], container["image"]) == ("tensorflow", "docker.io/tensorflow/tensorflow:2.9.1")
        assert 'exec python -u "$program_path/' in container["args"][0]
    assert validate_job(job, TFJOB) == []
    TFJob.model_validate(job)


def test_a_tfjob_function_job_of_workers_alone_and_one_asking_for_processes() -> None:
    job = functions.job_from_function(name="fn", namespace="d", train_func=report_task, num_workers=3, kind="TFJob")
    assert list(job["spec"]["tfReplicaSpecs"]) == ["Worker"]
    with pytest.raises(ValueError, match="num_procs_per_worker can't be set for TFJob"):
        functions.job_from_function(
            name="fn", namespace="d", train_func=report_task, num_procs_per_worker=2, kind="TFJob"
        )


def test_a_tfjob_replica_runs_the_function_with_its_tf_config(tmp_path: Path) -> None:
    job = functions.job_from_function(name="fn", namespace="d", train_func=report_task, num_workers=2, kind="TFJob")
    config = {
        "cluster": {"worker": ["a:2222", "b:2222"]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    result = run_replica(job, tmp_path, "Worker", TF_CONFIG=json.dumps(config))

    assert result.returncode == 0, result.stderr
    assert result.stdout == "worker 1\n"
