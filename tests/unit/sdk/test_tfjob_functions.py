"""TFJobs built from a Python function, as the Kubeflow SDK builds them: the manifest, and a replica's
script run by real bash with the ``TF_CONFIG`` the operator gives it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainyard.api.kubeflow.tensorflow import TFJOB, TFJob
from trainyard.api.validation import validate_job
from trainyard.sdk import functions


def report_task() -> None:
    import json
    import os

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print(task["type"], task["index"])


def tfjob(**kwargs: Any) -> dict[str, Any]:
    return functions.job_from_function(name="fn", namespace="team", train_func=report_task, kind="TFJob", **kwargs)


def test_a_function_tfjob_has_the_sdks_chief_ps_and_workers() -> None:
    job = tfjob(num_workers=2, roles={"Chief": 1, "PS": 1}, env_vars={"MODE": "fast"})

    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "TFJob")
    specs = job["spec"]["tfReplicaSpecs"]
    assert [(k, v["replicas"]) for k, v in specs.items()] == [("Chief", 1), ("PS", 1), ("Worker", 2)]
    assert job["spec"]["runPolicy"] == {}
    for spec in specs.values():
        assert "restartPolicy" not in spec  # the kind's default (Never) applies, as with the Kubeflow SDK
        (container,) = spec["template"]["spec"]["containers"]
        assert (container["name"], container["image"]) == ("tensorflow", "docker.io/tensorflow/tensorflow:2.9.1")
        assert container["command"] == ["bash", "-c"]
        assert 'exec python -u "$program_path/' in container["args"][0]
        assert container["env"] == [{"name": "MODE", "value": "fast"}]
    # Admission takes it as it is.
    assert validate_job(job, TFJOB) == []
    TFJob.model_validate(job)


def test_a_function_tfjob_of_workers_alone_and_one_that_asks_for_processes() -> None:
    assert list(tfjob(num_workers=3)["spec"]["tfReplicaSpecs"]) == ["Worker"]
    with pytest.raises(ValueError, match="num_procs_per_worker can't be set for TFJob"):
        tfjob(num_workers=2, num_procs_per_worker=2)


def test_a_replica_runs_the_function_with_its_tf_config(tmp_path: Path) -> None:
    job = tfjob(num_workers=2)
    (container,) = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    config = {
        "cluster": {"worker": ["a:2222", "b:2222"]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }
    env = {
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)]),
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),
        "TF_CONFIG": json.dumps(config),
    }
    result = subprocess.run(
        [*container["command"], *container["args"]],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == "worker 1\n"
