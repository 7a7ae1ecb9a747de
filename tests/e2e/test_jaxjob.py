"""JAXJob end to end: the example's two Workers join one ``jax.distributed`` runtime in the real jax
environment, gather every process id and train data-parallel; a replica type other than Worker is
refused at admission with upstream's words and field path.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from conftest import Plane
from framework_envs import register
from trainyard.sdk import InvalidError, TrainingClient

pytestmark = pytest.mark.e2e

EXAMPLE = "examples/jax-allreduce/jaxjob.yaml"


@pytest.fixture(scope="module")
def sdk(plane: Plane) -> TrainingClient:
    register(plane, "jax")
    return TrainingClient(plane.kubeconfig, namespace="default")


def test_the_example_gathers_every_process_and_trains_on_both(plane: Plane, sdk: TrainingClient) -> None:
    plane.yard("delete", "jaxjob", "jax-allreduce", "--ignore-not-found")
    run = plane.yard("run", "-f", EXAMPLE, "--timeout", "120", check=False)
    out = run.stdout
    assert run.returncode == 0, f"{out}\n{run.stderr}"

    accuracies = []
    for rank in (0, 1):
        replica = f"[worker-{rank}]"
        assert f"{replica} process {rank}/2: 2 devices in the job, 1 here" in out, out
        # Only a collective every process took part in yields both ids.
        assert f"{replica} process {rank}: gathered process ids [0, 1]" in out, out
        assert f"{replica} process {rank}: training shard of 673 rows" in out, out
        found = re.findall(
            rf"\[worker-{rank}\] process {rank}: test accuracy ([\d.]+) on 450 rows after 100 steps", out
        )
        assert len(found) == 1, out
        accuracies.append(float(found[0]))
    # Averaged gradients keep the replicated parameters identical: both score the same.
    assert accuracies[0] == accuracies[1] and accuracies[0] > 0.9, out

    job = sdk.get_job("jax-allreduce", job_kind="JAXJob")
    last = job["status"]["conditions"][-1]
    assert (last["type"], last["status"], last["reason"]) == ("Succeeded", "True", "JAXJobSucceeded")
    assert last["message"] == "JAXJob default/jax-allreduce successfully completed."
    assert job["status"]["replicaStatuses"]["Worker"]["succeeded"] == 2
    events = json.loads(plane.yard("get", "events", "-o", "json").stdout)["items"]
    assert any('runs in local environment "jax"' in e["message"] for e in events), events
    sdk.delete_job("jax-allreduce", job_kind="JAXJob")


def test_a_replica_type_other_than_worker_is_refused_with_its_field_path(sdk: TrainingClient) -> None:
    replica: dict[str, Any] = {"template": {"spec": {"containers": [{"name": "jax", "image": "python:3.11"}]}}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": "jax-master"},
        "spec": {"jaxReplicaSpecs": {"Master": replica, "Worker": replica}},
    }
    with pytest.raises(InvalidError) as invalid:
        sdk.create_job(job)
    assert invalid.value.code == 422
    assert [(c.field, c.message) for c in invalid.value.causes] == [
        ("spec.jaxReplicaSpecs.Master", 'Unsupported value: "Master": supported values: "Worker"')
    ]
    assert str(invalid.value) == (
        'JAXJob.kubeflow.org "jax-master" is invalid: '
        'spec.jaxReplicaSpecs.Master: Unsupported value: "Master": supported values: "Worker"'
    )
