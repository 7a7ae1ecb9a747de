"""The official Kubeflow training SDK (``kubeflow-training`` 1.9.x) driving every other v1 kind.

Run like ``kubeflow_training_scenario.py`` (a subprocess with the SDK's own environment first on
``PYTHONPATH``): ``kubeflow_training_kinds_scenario.py KUBECONFIG NAMESPACE``. For TFJob,
XGBoostJob, PaddleJob and JAXJob it creates a job from the SDK's typed model, waits with
``wait_for_job_conditions(job_kind=...)`` and reads the replicas' logs with ``get_job_logs``; the
replicas print what the operator injected for their kind, so the logs prove the wiring. Then a
TFJob from a ``train_func``. The replicas run ``python -c`` (no framework import: what is checked is
the SDK's and the operator's side, not the framework's). The last line printed is ``SCENARIO OK``.
"""

from __future__ import annotations

import sys

import kubernetes
from kubeflow.training import TrainingClient, models
from scenario_steps import check, eventually

KUBECONFIG, NAMESPACE = sys.argv[1], sys.argv[2]
client = TrainingClient(config_file=KUBECONFIG, namespace=NAMESPACE)


def replica(container: str, printed: str, replicas: int = 1) -> models.KubeflowOrgV1ReplicaSpec:
    command = ["python", "-c", f"import json, os; print({printed}, flush=True)"]
    spec = kubernetes.client.V1PodSpec(
        containers=[
            kubernetes.client.V1Container(name=container, image="docker.io/library/python:3.11", command=command)
        ]
    )
    return models.KubeflowOrgV1ReplicaSpec(
        replicas=replicas, restart_policy="Never", template=kubernetes.client.V1PodTemplateSpec(spec=spec)
    )


def meta(name: str) -> kubernetes.client.V1ObjectMeta:
    return kubernetes.client.V1ObjectMeta(name=name, namespace=NAMESPACE)


def run(job, kind: str) -> dict[str, str]:
    """Create ``job`` through the SDK, wait for it to succeed, and return every replica's log."""
    name = job.metadata.name
    client.create_job(job)
    check(f"{kind} is_job_created", eventually(lambda: client.is_job_created(name, job_kind=kind)))
    done = client.wait_for_job_conditions(name, job_kind=kind, wait_timeout=300, polling_interval=1)
    check(f"{kind} wait_for_job_conditions -> Succeeded", client.is_job_succeeded(name, job_kind=kind))
    check(f"{kind} wait returns the job", done.metadata.name == name, done)
    check(f"{kind} list_jobs", name in [j.metadata.name for j in client.list_jobs(job_kind=kind)])
    # A job can succeed before every replica has (XGBoostJob and TFJob on their master or chief, as
    # upstream's), and get_job_logs skips a pod still Pending: on a busy machine a worker's process
    # may start, or its phase reach the API, after the master's has ended. Wait for every replica.
    replicas = sum(spec.replicas for spec in replica_specs(job).values())
    check(
        f"{kind} every replica Succeeded",
        eventually(lambda: [p.status.phase for p in client.get_job_pods(name)] == ["Succeeded"] * replicas),
        [(p.metadata.name, p.status.phase) for p in client.get_job_pods(name)],
    )
    logs, _ = client.get_job_logs(name, job_kind=kind, is_master=False)
    return logs


def replica_specs(job) -> dict[str, models.KubeflowOrgV1ReplicaSpec]:
    """The ``*_replica_specs`` of any kind's typed spec (``tf_replica_specs``, ``xgb_replica_specs``, ...)."""
    spec = job.spec
    return next(getattr(spec, a) for a in spec.attribute_map if a.endswith("replica_specs") and getattr(spec, a))


# --- TFJob: TF_CONFIG names the task of each replica ------------------------------------------
# A prefix: the kubernetes client json-decodes a log that is one JSON value (and returns its repr).
task = "'task', json.dumps(json.loads(os.environ['TF_CONFIG'])['task'], sort_keys=True)"
tf = models.KubeflowOrgV1TFJob(
    api_version="kubeflow.org/v1",
    kind="TFJob",
    metadata=meta("kf-tf"),
    spec=models.KubeflowOrgV1TFJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
        tf_replica_specs={
            "Chief": replica("tensorflow", task),
            "Worker": replica("tensorflow", task),
        },
    ),
)
logs = run(tf, "TFJob")
check(
    "TFJob TF_CONFIG tasks",
    logs
    == {
        "kf-tf-chief-0": 'task {"index": 0, "type": "chief"}\n',
        "kf-tf-worker-0": 'task {"index": 0, "type": "worker"}\n',
    },
    logs,
)
check(
    "TFJob master pod is the chief",
    client.get_job_pod_names("kf-tf", is_master=True) == ["kf-tf-chief-0"],
)

# --- XGBoostJob: RANK and WORLD_SIZE ------------------------------------------------------------
rank = "os.environ['RANK'], os.environ['WORLD_SIZE']"
xgb = models.KubeflowOrgV1XGBoostJob(
    api_version="kubeflow.org/v1",
    kind="XGBoostJob",
    metadata=meta("kf-xgb"),
    spec=models.KubeflowOrgV1XGBoostJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
        xgb_replica_specs={"Master": replica("xgboost", rank), "Worker": replica("xgboost", rank, replicas=2)},
    ),
)
logs = run(xgb, "XGBoostJob")
check(
    "XGBoostJob ranks",
    logs == {"kf-xgb-master-0": "0 3\n", "kf-xgb-worker-0": "1 3\n", "kf-xgb-worker-1": "2 3\n"},
    logs,
)

# --- PaddleJob: PADDLE_NNODES and PADDLE_JOB_ID -------------------------------------------------
paddle = models.KubeflowOrgV1PaddleJob(
    api_version="kubeflow.org/v1",
    kind="PaddleJob",
    metadata=meta("kf-paddle"),
    spec=models.KubeflowOrgV1PaddleJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
        paddle_replica_specs={
            "Worker": replica("paddle", "os.environ['PADDLE_NNODES'], os.environ['PADDLE_JOB_ID']", 2)
        },
    ),
)
logs = run(paddle, "PaddleJob")
check("PaddleJob env", logs == {f"kf-paddle-worker-{i}": "2 kf-paddle\n" for i in range(2)}, logs)

# --- JAXJob: PROCESS_ID and NUM_PROCESSES -------------------------------------------------------
jax = models.KubeflowOrgV1JAXJob(
    api_version="kubeflow.org/v1",
    kind="JAXJob",
    metadata=meta("kf-jax"),
    spec=models.KubeflowOrgV1JAXJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
        jax_replica_specs={"Worker": replica("jax", "os.environ['PROCESS_ID'], os.environ['NUM_PROCESSES']", 2)},
    ),
)
logs = run(jax, "JAXJob")
check("JAXJob env", logs == {"kf-jax-worker-0": "0 2\n", "kf-jax-worker-1": "1 2\n"}, logs)


# --- TFJob from a train_func: the SDK's Chief/Worker/PS layout --------------------------------
def tf_train_func():
    # The SDK pastes this source into an unquoted bash here-document: no dollar sign or backquote.
    import json
    import os

    print("tf task", json.dumps(json.loads(os.environ["TF_CONFIG"])["task"], sort_keys=True), flush=True)


client.create_job(
    name="kf-tf-func",
    job_kind="TFJob",
    train_func=tf_train_func,
    num_workers=2,
    num_chief_replicas=1,
    num_ps_replicas=1,
)
done = client.wait_for_job_conditions("kf-tf-func", job_kind="TFJob", wait_timeout=300, polling_interval=1)
check("TFJob train_func Succeeded", client.is_job_succeeded("kf-tf-func", job_kind="TFJob"))
names = sorted(client.get_job_pod_names("kf-tf-func"))
check(
    "TFJob train_func pods",
    names == ["kf-tf-func-chief-0", "kf-tf-func-ps-0", "kf-tf-func-worker-0", "kf-tf-func-worker-1"],
    names,
)
logs, _ = client.get_job_logs("kf-tf-func", job_kind="TFJob")
check("TFJob train_func chief log", logs == {"kf-tf-func-chief-0": 'tf task {"index": 0, "type": "chief"}\n'}, logs)
print("SCENARIO OK")
