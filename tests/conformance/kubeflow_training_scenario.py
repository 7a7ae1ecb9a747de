"""The official Kubeflow training SDK (``kubeflow-training`` 1.9.x) driving a trainyard plane.

Run as a subprocess with the SDK's own environment first on ``PYTHONPATH`` (it pins
``kubernetes<36``, which cannot share the project's venv):
``kubeflow_training_scenario.py KUBECONFIG NAMESPACE``. Every step asserts what the SDK returns;
the last line printed is ``SCENARIO OK``.
"""

from __future__ import annotations

import os
import sys
import time
from importlib import metadata

import kubeflow.training
import kubernetes
from kubeflow.training import TrainingClient, models
from scenario_steps import check, eventually

KUBECONFIG, NAMESPACE = sys.argv[1], sys.argv[2]
print(f"kubeflow-training {metadata.version('kubeflow-training')} from {kubeflow.training.__file__}")
print(f"kubernetes {kubernetes.__version__} from {kubernetes.__file__}")


def train_func():
    # Runs in each replica under torchrun. The SDK pastes this source into an unquoted bash here-document
    # (<< EOM), so bash runs command substitution on it: no dollar sign or backquote in here.
    import os

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    # Local ranks share the pod's stdout: one write per line, so lines cannot interleave.
    line = f"kubeflow-sdk ddp rank {dist.get_rank()} world {dist.get_world_size()} sum {value.item()}\n"
    os.write(1, line.encode())
    dist.destroy_process_group()


def replica(command: list[str], cpu: str | None = None) -> models.KubeflowOrgV1ReplicaSpec:
    container = kubernetes.client.V1Container(name="pytorch", image="docker.io/library/python:3.11", command=command)
    if cpu is not None:
        container.resources = kubernetes.client.V1ResourceRequirements(requests={"cpu": cpu}, limits={"cpu": cpu})
    return models.KubeflowOrgV1ReplicaSpec(
        replicas=1,
        restart_policy="OnFailure",
        template=kubernetes.client.V1PodTemplateSpec(spec=kubernetes.client.V1PodSpec(containers=[container])),
    )


client = TrainingClient(config_file=KUBECONFIG, namespace=NAMESPACE)

# --- 1. a PyTorchJob from a typed object: 1 Master + 1 Worker ----------------------------------
say = ["python", "-c", "import os; print('rank', os.environ['RANK'], 'of', os.environ['WORLD_SIZE'], flush=True)"]
job = models.KubeflowOrgV1PyTorchJob(
    api_version="kubeflow.org/v1",
    kind="PyTorchJob",
    metadata=kubernetes.client.V1ObjectMeta(name="kf-object", namespace=NAMESPACE),
    spec=models.KubeflowOrgV1PyTorchJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(clean_pod_policy="None"),
        pytorch_replica_specs={"Master": replica(say), "Worker": replica(say)},
    ),
)
client.create_job(job)
check("is_job_created", eventually(lambda: client.is_job_created("kf-object")))
done = client.wait_for_job_conditions("kf-object", wait_timeout=300, polling_interval=1)
check("wait_for_job_conditions -> Succeeded", client.is_job_succeeded(job=done))
# A replica that finishes between two operator passes is never seen Running (as upstream), so
# Running may be absent; when it was recorded, finishing flipped it to False.
conditions = {c.type: c.status for c in client.get_job_conditions("kf-object")}
check(
    "conditions Created, Succeeded (Running, if recorded, now False)",
    {"Created", "Succeeded"} <= set(conditions) and conditions.get("Running", "False") == "False",
    conditions,
)
fetched = client.get_job("kf-object")
check("get_job is the SDK's model", isinstance(fetched, models.KubeflowOrgV1PyTorchJob), type(fetched))
check("list_jobs", "kf-object" in [j.metadata.name for j in client.list_jobs()])
names = client.get_job_pod_names("kf-object")
check("get_job_pod_names", sorted(names) == ["kf-object-master-0", "kf-object-worker-0"], names)
check("is_master", client.get_job_pod_names("kf-object", is_master=True) == ["kf-object-master-0"])
check(
    "replica_type/index",
    client.get_job_pod_names("kf-object", replica_type="worker", replica_index=0) == ["kf-object-worker-0"],
)
logs, events = client.get_job_logs("kf-object")
check("master log", logs == {"kf-object-master-0": "rank 0 of 2\n"}, logs)
logs, _ = client.get_job_logs("kf-object", is_master=False)
check("all logs", logs.get("kf-object-worker-0") == "rank 1 of 2\n", logs)
_, events = client.get_job_logs("kf-object", verbose=True)
job_events = events.get("pytorchjob/kf-object", [])
check("verbose events of the job", any("kf-object-master-0" in e for e in job_events), events)
# Follow mode prints `[Pod ...]: line` and returns once the server closes each finished pod's stream.
followed, _ = client.get_job_logs("kf-object", is_master=False, follow=True)
check("follow returns for finished pods", set(followed) == {"kf-object-master-0", "kf-object-worker-0"}, followed)

current = client.get_job("kf-object")
current.metadata.labels = {"reviewed": "yes"}
client.update_job(current, "kf-object")
check("update_job (merge patch, whole object)", client.get_job("kf-object").metadata.labels.get("reviewed") == "yes")
client.delete_job("kf-object")

# --- 2. a PyTorchJob from a train_func: torchrun with the operator's PET_* env ------------------
client.create_job(name="kf-func", train_func=train_func, num_workers=2)
done = client.wait_for_job_conditions("kf-func", wait_timeout=420, polling_interval=1)
check("train_func job Succeeded", client.is_job_succeeded(job=done))
spec = client.get_job_pods("kf-func", is_master=True)[0].spec.containers[0]
env = {e.name: e.value for e in spec.env or []}
check("torchrun entrypoint", "torchrun" in spec.args[0], spec.args)
check("PET_* env", env.get("PET_NNODES") == "2" and env.get("PET_NODE_RANK") == "0" and "PET_MASTER_PORT" in env, env)
logs, _ = client.get_job_logs("kf-func", is_master=False)
master = logs.get("kf-func-master-0", "")
worker = logs.get("kf-func-worker-0", "")
# No num_procs_per_worker: nprocPerNode defaults to "auto", which torchrun reads as one process per CPU.
nproc = os.cpu_count() or 1
world = 2 * nproc
total = float(world * (world + 1) // 2)


def ranks_line(rank: int) -> str:
    return f"kubeflow-sdk ddp rank {rank} world {world} sum {total}"


# Every local rank of each pod printed its whole line (the master holds ranks 0..nproc-1).
check("all_reduce on the master", all(ranks_line(r) in master.splitlines() for r in range(nproc)), master)
check("all_reduce on the worker", all(ranks_line(r) in worker.splitlines() for r in range(nproc, world)), worker)
# The generated script ran cleanly: nothing in train_func was taken for a shell command.
check("no shell errors in the logs", "command not found" not in master + worker, master + worker)
client.delete_job("kf-func")

# --- 3. gone: the SDK's RuntimeError carries the server's 404 ----------------------------------
deadline = time.monotonic() + 60
while True:
    try:
        client.get_job("kf-func")
    except RuntimeError as exc:
        check("get_job after delete -> RuntimeError(404)", "404" in str(exc) or "Not Found" in str(exc), str(exc))
        break
    if time.monotonic() > deadline:
        raise AssertionError("kf-func still exists 60s after delete_job")
    time.sleep(0.5)

# --- 4. trainyard's own Pending condition (a pod stuck too long) does not trip the SDK -----------
stuck = models.KubeflowOrgV1PyTorchJob(
    api_version="kubeflow.org/v1",
    kind="PyTorchJob",
    metadata=kubernetes.client.V1ObjectMeta(name="kf-stuck", namespace=NAMESPACE),
    spec=models.KubeflowOrgV1PyTorchJobSpec(
        run_policy=models.KubeflowOrgV1RunPolicy(),
        pytorch_replica_specs={"Master": replica(say, cpu="4096")},
    ),
)
client.create_job(stuck)
deadline = time.monotonic() + 120
while not any(c.type == "Pending" and c.status == "True" for c in client.get_job_conditions("kf-stuck")):
    if time.monotonic() > deadline:
        raise AssertionError(f"no Pending condition: {client.get_job_conditions('kf-stuck')}")
    time.sleep(0.5)
check("Pending condition deserializes", client.get_job("kf-stuck").status.conditions[-1].type == "Pending")
check("is_job_running is False", not client.is_job_running("kf-stuck"))
check("logs skip the Pending pod", client.get_job_logs("kf-stuck") == ({}, {}))
try:
    client.wait_for_job_conditions("kf-stuck", expected_conditions={"Running"}, wait_timeout=2, polling_interval=1)
except TimeoutError:
    check("wait on a stuck job times out cleanly", True)
else:
    raise AssertionError("wait_for_job_conditions returned for a job that never ran")
client.delete_job("kf-stuck")

print("SCENARIO OK")
