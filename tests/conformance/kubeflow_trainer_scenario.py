"""The official Kubeflow SDK (``kubeflow`` 0.5.0, Trainer v2's ``TrainerClient``) driving a trainyard plane.

Run as a subprocess with the SDK's own directory first on ``PYTHONPATH`` (it pins
``kubernetes<36``, which cannot share the project's venv):
``kubeflow_trainer_scenario.py KUBECONFIG NAMESPACE``. Every step asserts what the SDK returns;
the last line printed is ``SCENARIO OK``.

The training functions live in this file because the SDK ships a function by
``inspect.getsource``: it pastes the source into an unquoted bash here-document in the
TrainJob's command (so no dollar sign, backquote or backslash in them: bash would expand them,
and Kubernetes expands ``$(VAR)`` in commands before bash sees them), writes it to a file named
after this one and runs it with ``torchrun`` on every node.
"""

from __future__ import annotations

import sys
import tempfile
from importlib import metadata
from pathlib import Path

import kubeflow.trainer
import kubernetes
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, TrainerClient
from kubeflow.trainer.options import Name
from scenario_steps import check, eventually

KUBECONFIG, NAMESPACE = sys.argv[1], sys.argv[2]
print(f"kubeflow {metadata.version('kubeflow')} from {kubeflow.trainer.__file__}")
print(f"kubernetes {kubernetes.__version__} from {kubernetes.__file__}")

RUNTIMES = ("torch-distributed", "jax-distributed", "xgboost-distributed", "deepspeed-distributed", "mlx-distributed")
DDP, FAILING = "sdk-v2-ddp", "sdk-v2-fail"


def ddp(release):
    # Every rank of both nodes (torchrun takes the rendezvous from the controller's PET_* env).
    import os
    import time

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    value = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(value)
    # Local ranks share the pod's stdout: one write per line, so lines cannot interleave.
    line = f"trainer-sdk ddp rank {dist.get_rank()} world {dist.get_world_size()} sum {value.item()}\n"
    os.write(1, line.encode())
    dist.destroy_process_group()
    # The SDK's "Running" is every node pod Running (or Succeeded) while the TrainJob has no
    # condition: the nodes stay until the scenario has seen it and writes the release file
    # (the local node's pods share the host's /tmp), or for at most 5 minutes.
    from pathlib import Path

    deadline = time.monotonic() + 300
    while not Path(release).exists() and time.monotonic() < deadline:
        time.sleep(0.2)


def fail():
    raise RuntimeError("trainer-sdk deliberate failure")


def not_found(exc: BaseException) -> bool:
    """The SDK wraps the client's ApiException (404) in a RuntimeError."""
    cause = exc.__cause__
    return isinstance(cause, kubernetes.client.ApiException) and cause.status == 404


def gone(name: str) -> bool:
    try:
        client.get_job(name)
    except RuntimeError as exc:
        return not_found(exc)
    return False


client = TrainerClient(KubernetesBackendConfig(config_file=KUBECONFIG, namespace=NAMESPACE))
for leftover in (DDP, FAILING):  # a rerun in the same namespace
    try:
        client.delete_job(leftover)
    except RuntimeError:
        pass
    check(f"no leftover {leftover}", eventually(lambda name=leftover: gone(name)))

# --- 1. runtimes --------------------------------------------------------------------------------
runtimes = {r.name: r for r in client.list_runtimes()}
check("list_runtimes has the shipped runtimes", set(RUNTIMES) <= set(runtimes), sorted(runtimes))
torch_rt = client.get_runtime("torch-distributed")
check(
    "get_runtime torch-distributed",
    (torch_rt.name, torch_rt.kind.value, torch_rt.trainer.framework)
    == ("torch-distributed", "ClusterTrainingRuntime", "torch"),
    torch_rt,
)
check("its entrypoint is torchrun", "torchrun" in torch_rt.trainer.command[-1], torch_rt.trainer.command)

# --- 2. a 2-node DDP function: Running, then Complete -------------------------------------------
release = Path(tempfile.mkdtemp(prefix="trainer-sdk-")) / "release"
trainer = CustomTrainer(func=ddp, func_args={"release": str(release)}, num_nodes=2)
name = client.train(runtime="torch-distributed", trainer=trainer, options=[Name(name=DDP)])
check("train returns the name", name == DDP, name)
running = client.wait_for_job_status(name, {"Running"}, timeout=300, polling_interval=1)
check("wait_for_job_status Running", running.status == "Running", running)
release.touch()
done = client.wait_for_job_status(name, {"Complete"}, timeout=300, polling_interval=1)
check("wait_for_job_status Complete", done.status == "Complete", done)
job = client.get_job(name)
steps = {s.name: s for s in job.steps}
check("get_job: steps node-0 and node-1", sorted(steps) == ["node-0", "node-1"], job.steps)
check("each step has its pod", all(s.pod_name and s.pod_name.startswith(f"{name}-") for s in job.steps), job.steps)
check("num_nodes", job.num_nodes == 2 and job.runtime.name == "torch-distributed", job)
check("list_jobs", name in [j.name for j in client.list_jobs()])
check("list_jobs(runtime=...)", name in [j.name for j in client.list_jobs(runtime=torch_rt)])

node0 = list(client.get_job_logs(name))  # step node-0 by default
node1 = list(client.get_job_logs(name, step="node-1"))
for step, lines in (("node-0", node0), ("node-1", node1)):
    print(f"--- {step} ({steps[step].pod_name})")
    for line in lines:
        print(f"    {line}")
reports = [line.split() for line in node0 + node1 if line.startswith("trainer-sdk ddp rank ")]
world = int(reports[0][5]) if reports else 0
# Every rank of the world printed exactly one line, all with the same all-reduced sum 1 + 2 + ... + world.
check("every rank reported once", sorted(int(r[3]) for r in reports) == list(range(world)) and world >= 2, reports)
check("the all-reduce", {float(r[7]) for r in reports} == {float(world * (world + 1) // 2)}, reports)
node1_ranks = [int(line.split()[3]) for line in node1 if line.startswith("trainer-sdk ddp rank ")]
check("node-1 runs the upper half of the ranks", sorted(node1_ranks) == list(range(world // 2, world)), node1_ranks)
followed = list(client.get_job_logs(name, step="node-1", follow=True))
check("get_job_logs follow=True: the whole log, then the stream ends", followed == node1, followed)
check("no shell errors in the logs", not any("command not found" in line for line in node0 + node1), node0 + node1)

events = client.get_job_events(name)
check("get_job_events is non-empty", bool(events), events)
pods = {s.pod_name for s in job.steps}
about = {(e.involved_object_kind, e.involved_object_name) for e in events}
check("events about the job's pods", any(kind == "Pod" and pod in pods for kind, pod in about), about)

client.delete_job(name)
check("delete_job: the TrainJob is gone", eventually(lambda: gone(name)))

# --- 3. a function that raises: Failed ---------------------------------------------------------
# The shipped runtimes restart a failed static world as a whole gang (failurePolicy.maxRestarts),
# then fail; the failed pods stay, with their logs.
name = client.train(
    runtime="torch-distributed", trainer=CustomTrainer(func=fail, num_nodes=2), options=[Name(name=FAILING)]
)
failed = client.wait_for_job_status(name, {"Failed"}, timeout=300, polling_interval=1)
check("wait_for_job_status Failed", failed.status == "Failed", failed)
try:
    client.wait_for_job_status(name, {"Complete"}, timeout=10, polling_interval=1)
except RuntimeError as exc:
    check("waiting for Complete on a Failed TrainJob raises", str(exc) == f"TrainJob {name} is Failed", str(exc))
else:
    raise AssertionError("wait_for_job_status(Complete) returned for a Failed TrainJob")
# The node that failed first failed the JobSet; the other may have been stopped before it got as far.
lines = [line for step in ("node-0", "node-1") for line in client.get_job_logs(name, step=step)]
check("the error is in a failed node's log", any("trainer-sdk deliberate failure" in x for x in lines), lines)
client.delete_job(name)
check("delete_job of the failed TrainJob", eventually(lambda: gone(name)))

# --- 4. a runtime that does not exist ----------------------------------------------------------
try:
    client.train(runtime="no-such-runtime", trainer=CustomTrainer(func=fail))
except RuntimeError as exc:
    text = str(exc)
    check("train on a missing runtime", "Failed to get Runtime: no-such-runtime" in text and not_found(exc), text)
else:
    raise AssertionError("train(runtime='no-such-runtime') created a TrainJob")

print("SCENARIO OK")
