"""TFJob end to end: both examples train for real in the tensorflow environment (MultiWorkerMirroredStrategy
with a Chief and two Workers; ParameterServerStrategy with a PS, a Worker, a Chief and a side-car
Evaluator), every pod's ``TF_CONFIG`` is upstream's, the PS job's never-exiting tasks are stopped once
the chief succeeds, ``successPolicy: AllWorkers`` waits for every worker, a bad manifest gets a 422
with upstream's field paths, and ``TrainingClient.create_job(job_kind="TFJob", train_func=...)``
runs a function on a Chief, a PS and Workers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from conftest import Plane, eventually
from framework_envs import register
from trainyard.api import labels
from trainyard.sdk import InvalidError, TrainingClient

pytestmark = pytest.mark.e2e

KIND = "TFJob"


@pytest.fixture(scope="module")
def sdk(plane: Plane) -> TrainingClient:
    register(plane, "tensorflow")
    return TrainingClient(plane.kubeconfig, namespace="default")


def run_example(plane: Plane, sdk: TrainingClient, name: str) -> str:
    plane.yard("delete", "tfjob", name, "--ignore-not-found")
    eventually(lambda: not sdk.get_job_pod_names(name), what=f"the pods of an earlier {name}")
    run = plane.yard("run", "-f", f"examples/{name}/tfjob.yaml", "--timeout", "150", check=False)
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    return run.stdout


def check_tf_config(sdk: TrainingClient, name: str, types: list[str]) -> None:
    """Every pod still there got upstream's dense TF_CONFIG: the whole cluster, each task at this node
    and the port allocated for it, its own task, ``environment: cloud``, in Go's key order."""
    job = sdk.get_job(name, job_kind=KIND)
    ports = json.loads(job["metadata"]["annotations"][labels.HOST_PORTS])
    cluster = {t: [f"127.0.0.1:{ports[f'{t}-{i}/tfjob-port']}" for i in range(n)] for t, n in types_of(job).items()}
    assert list(cluster) == types
    pods = sdk.get_job_pods(name)
    assert pods
    for pod in pods:
        meta = pod["metadata"]["labels"]
        (container,) = pod["spec"]["containers"]
        raw = next(e["value"] for e in container["env"] if e["name"] == "TF_CONFIG")
        task = {"type": meta[labels.REPLICA_TYPE], "index": int(meta[labels.REPLICA_INDEX])}
        assert raw == json.dumps({"cluster": cluster, "task": task, "environment": "cloud"}, separators=(",", ":"))


def types_of(job: dict[str, Any]) -> dict[str, int]:
    return {
        t.lower(): s["replicas"] for t, s in sorted(job["spec"]["tfReplicaSpecs"].items(), key=lambda i: i[0].lower())
    }


def final_accuracy(out: str, replica: str) -> float:
    found = re.findall(rf"\[{replica}\]\s+\S+ final test accuracy ([\d.]+)", out)
    assert found, out
    return float(found[0])


def last_condition(sdk: TrainingClient, name: str) -> tuple[str, str, str]:
    last = sdk.get_job(name, job_kind=KIND)["status"]["conditions"][-1]
    return last["type"], last["reason"], last["message"]


def test_mwms_trains_one_model_across_the_chief_and_two_workers(plane: Plane, sdk: TrainingClient) -> None:
    out = run_example(plane, sdk, "tensorflow-mwms")

    for replica in ("chief-0", "worker-0", "worker-1"):
        assert re.search(rf"\[{replica}\]\s+{replica}: 3 replicas in sync", out), out
    epochs = re.findall(r"\[chief-0\]\s+chief-0: epoch (\d): loss [\d.]+, test accuracy [\d.]+", out)
    assert epochs == ["0", "1", "2", "3", "4"], out
    assert final_accuracy(out, "chief-0") > 0.9
    assert last_condition(sdk, "tensorflow-mwms") == (
        "Succeeded",
        "TFJobSucceeded",
        "TFJob default/tensorflow-mwms successfully completed.",
    )
    check_tf_config(sdk, "tensorflow-mwms", ["chief", "worker"])
    events = json.loads(plane.yard("get", "events", "-o", "json").stdout)["items"]
    assert any('runs in local environment "tensorflow"' in e["message"] for e in events), events
    sdk.delete_job("tensorflow-mwms", job_kind=KIND)


def test_parameter_servers_train_and_the_evaluator_checks_the_chiefs_checkpoints(
    plane: Plane, sdk: TrainingClient
) -> None:
    out = run_example(plane, sdk, "tensorflow-ps")

    assert re.search(r"\[chief-0\]\s+chief: coordinating 1 worker\(s\) and 1 parameter server\(s\)", out), out
    assert re.search(r"\[ps-0\]\s+ps-0: serving grpc://127\.0\.0\.1:\d+", out), out
    assert final_accuracy(out, "chief-0") > 0.9
    evaluated = re.findall(r"\[evaluator-0\]\s+evaluator: checkpoint of epoch (\d): test accuracy ([\d.]+)", out)
    assert [e for e, _ in evaluated] == ["0", "1", "2", "3"], out
    reported = re.findall(r"\[chief-0\]\s+chief: the evaluator found test accuracy ([\d.]+) at epoch 3", out)
    assert reported == [evaluated[-1][1]], out
    assert last_condition(sdk, "tensorflow-ps")[:2] == ("Succeeded", "TFJobSucceeded")

    # The PS and the Worker never exit: cleanPodPolicy Running stopped them, and every Service went.
    # The evaluator exits as soon as it has told the chief its last result, so the chief and it end
    # within the same instant: when the evaluator's pod still read Running as the job succeeded, it
    # was a running pod and cleanPodPolicy Running deleted it too, as upstream would (seen under load).
    def left() -> list[str] | None:
        names = sorted(sdk.get_job_pod_names("tensorflow-ps"))
        done = names in (["tensorflow-ps-chief-0", "tensorflow-ps-evaluator-0"], ["tensorflow-ps-chief-0"])
        return names if done else None

    eventually(left, what="only the chief's and the evaluator's pods left")
    events = json.loads(plane.yard("get", "events", "-o", "json").stdout)["items"]
    deleted = {e["message"] for e in events if e["reason"] == "SuccessfulDeletePod"}
    assert {"Deleted pod: tensorflow-ps-ps-0", "Deleted pod: tensorflow-ps-worker-0"} <= deleted
    check_tf_config(sdk, "tensorflow-ps", ["chief", "evaluator", "ps", "worker"])
    sdk.delete_job("tensorflow-ps", job_kind=KIND)


# -- cheap jobs in the plane's own Python: AllWorkers, admission, a function ----------------------------

# Worker 0 ends at once; worker 1 waits for a file the test writes (TF_CONFIG says which worker runs).
WAITING_WORKER = (
    "import json, os, pathlib, sys, time\n"
    "if json.loads(os.environ['TF_CONFIG'])['task']['index'] == 1:\n"
    "    while not pathlib.Path(sys.argv[1]).exists(): time.sleep(0.1)\n"
)


def test_all_workers_waits_for_every_worker(sdk: TrainingClient, tmp_path: Path) -> None:
    go = tmp_path / "go"
    container = {"name": "tensorflow", "image": "python:3.11", "command": ["python", "-c", WAITING_WORKER, str(go)]}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": KIND,
        "metadata": {"name": "tf-all-workers"},
        "spec": {
            "successPolicy": "AllWorkers",
            "tfReplicaSpecs": {"Worker": {"replicas": 2, "template": {"spec": {"containers": [container]}}}},
        },
    }
    sdk.create_job(job)

    def worker_0_done() -> dict[str, Any] | None:
        found = sdk.get_job("tf-all-workers", job_kind=KIND)
        worker = (found.get("status", {}).get("replicaStatuses") or {}).get("Worker") or {}
        return found if worker.get("succeeded") == 1 and worker.get("active") == 1 else None

    # Worker 0 alone would have been enough under the default policy; here the job keeps running.
    running = eventually(worker_0_done, what="worker 0 done, worker 1 running")
    assert running["status"]["conditions"][-1]["type"] == "Running"
    go.touch()
    sdk.wait_for_job_conditions("tf-all-workers", job_kind=KIND, wait_timeout=60, polling_interval=0.5)
    assert last_condition(sdk, "tf-all-workers")[:2] == ("Succeeded", "TFJobSucceeded")
    sdk.delete_job("tf-all-workers", job_kind=KIND)


def test_a_bad_tfjob_gets_a_422_with_upstreams_paths(sdk: TrainingClient) -> None:
    container = {"name": "tensorflow", "image": "python:3.11"}
    replica = {"template": {"spec": {"containers": [container]}}}
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": KIND,
        "metadata": {"name": "tf-bad"},
        "spec": {"tfReplicaSpecs": {"Chief": replica, "Master": replica, "Workers": replica}},
    }
    with pytest.raises(InvalidError) as refused:
        sdk.create_job(job)

    assert [(c.field, c.message) for c in refused.value.causes] == [
        (
            "spec.tfReplicaSpecs.Workers",
            'Unsupported value: "Workers": supported values: "Chief", "Evaluator", "Master", "PS", "Worker"',
        ),
        ("spec.tfReplicaSpecs", "Forbidden: must not have more than 1 Chief or Master role"),
    ]


def report_task() -> None:
    import importlib.util
    import json
    import os

    config = json.loads(os.environ["TF_CONFIG"])
    task, types = config["task"], ",".join(config["cluster"])
    have = "tensorflow" if importlib.util.find_spec("tensorflow") else "no tensorflow"
    print(task["type"], task["index"], types, have, flush=True)


def test_a_function_runs_on_a_chief_a_ps_and_workers(sdk: TrainingClient) -> None:
    sdk.create_job(
        name="tf-fn", job_kind=KIND, train_func=report_task, num_workers=2, num_chief_replicas=1, num_ps_replicas=1
    )
    sdk.wait_for_job_conditions("tf-fn", job_kind=KIND, wait_timeout=60, polling_interval=0.5)

    def all_done() -> bool:
        pods = sdk.get_job_pods("tf-fn")
        return len(pods) == 4 and all(p["status"]["phase"] == "Succeeded" for p in pods)

    eventually(all_done, what="every replica done")
    logs, _ = sdk.get_job_logs("tf-fn", job_kind=KIND, is_master=False)
    # The Kubeflow SDK's default image, tensorflow/tensorflow, runs in the tensorflow environment.
    assert {pod: text.strip() for pod, text in logs.items()} == {
        "tf-fn-chief-0": "chief 0 chief,ps,worker tensorflow",
        "tf-fn-ps-0": "ps 0 chief,ps,worker tensorflow",
        "tf-fn-worker-0": "worker 0 chief,ps,worker tensorflow",
        "tf-fn-worker-1": "worker 1 chief,ps,worker tensorflow",
    }
    assert last_condition(sdk, "tf-fn")[:2] == ("Succeeded", "TFJobSucceeded")
    sdk.delete_job("tf-fn", job_kind=KIND)
