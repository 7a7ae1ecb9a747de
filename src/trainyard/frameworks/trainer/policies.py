"""The runtimes' ``mlPolicy`` plugins: how many trainer pods, and what each framework's processes are told.

One function per policy source, as upstream's torch, JAX, XGBoost and MPI plugins (a runtime
with none runs the trainer's pods as they are, ``numNodes`` of them). Each sizes the trainer's
replicated Job and injects its environment into the ``node`` container:

* torch: ``PET_NNODES``, ``PET_NPROC_PER_NODE`` (``numProcPerNode``, else ``auto``, which without
  GPUs becomes the CPUs requested, at least 1), ``PET_NODE_RANK`` (the completion index),
  ``PET_MASTER_ADDR``/``PET_MASTER_PORT``: torchrun run with no arguments finds its world there;
* JAX: ``JAX_NUM_PROCESSES``, ``JAX_PROCESS_ID``, ``JAX_COORDINATOR_ADDRESS``;
* XGBoost: ``DMLC_TRACKER_URI``/``_PORT``, ``DMLC_TASK_ID``, ``DMLC_NUM_WORKER`` (one worker per GPU,
  else one per node);
* MPI (OpenMPI): a hostfile ConfigMap listing the node pods with their slots, the SSH Secret
  mounted at ``sshAuthMountPath``, the launcher told where the hostfile is; the env, the hostfile
  lines and the Secret's volume are ``frameworks.openmpi``'s, as the MPIJob's are.
"""

from __future__ import annotations

import math

from trainyard.api import trainer
from trainyard.api.meta import Obj
from trainyard.api.podgroup import POD_GROUP_LABEL
from trainyard.api.quantity import parse_quantity
from trainyard.frameworks import openmpi
from trainyard.frameworks.trainer.template import (
    Built,
    Rendezvous,
    UnsupportedRuntime,
    containers,
    index_env,
    num_nodes,
    resources_per_node,
    set_count,
    trainer_job,
    upsert_env,
    upsert_port,
)

SSH_VOLUME = "mpi-ssh-auth"
HOSTFILE_VOLUME = "mpi-hostfile"
# The key files' modes as Trainer v2 sets them (an MPIJob keeps the Secret volume's defaults).
_KEY_MODES = (0o640, 0o644)


def gpus(resources: Obj) -> int:
    """GPUs a node asks for: any ``*/gpu`` limit (else request), as upstream's GetNumGPUPerNode."""
    for section in ("limits", "requests"):
        for key, value in (resources.get(section) or {}).items():
            if key.endswith("/gpu"):
                return int(parse_quantity(value))
    return 0


def cpus(resources: Obj) -> int:
    """Whole CPUs requested (else limited), rounded up as a Quantity's Value(); 0 when neither is set."""
    for section in ("requests", "limits"):
        value = (resources.get(section) or {}).get("cpu")
        if value is not None and parse_quantity(value) > 0:
            return math.ceil(parse_quantity(value))
    return 0


def _node(js: Obj) -> list[Obj]:
    rjob = trainer_job(js)
    return containers(rjob, trainer.NODE) if rjob is not None else []


def _size_trainer(js: Obj, count: int) -> None:
    rjob = trainer_job(js)
    if rjob is None:
        raise UnsupportedRuntime(
            f"the runtime has no replicated Job labelled {trainer.ANCESTOR_LABEL}={trainer.ANCESTOR_TRAINER}"
        )
    set_count(rjob, count)


def _serve(container: Obj, rendezvous: Rendezvous) -> None:
    if rendezvous.declare_port:
        upsert_port(container, rendezvous.port)


def torch(trainjob: Obj, runtime: Obj, js: Obj, rendezvous: Rendezvous) -> Built:
    nodes = num_nodes(trainjob, runtime)
    _size_trainer(js, nodes)
    given = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numProcPerNode")
    policy = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch") or {}
    nproc: str = str(given if given is not None else policy.get("numProcPerNode", "auto"))
    resources = resources_per_node(trainjob, js)
    if nproc == "auto" and gpus(resources) == 0:
        nproc = str(max(1, cpus(resources)))
    for container in _node(js):
        upsert_env(
            container,
            [
                {"name": "PET_NNODES", "value": str(nodes)},
                {"name": "PET_NPROC_PER_NODE", "value": nproc},
                index_env("PET_NODE_RANK"),
                {"name": "PET_MASTER_ADDR", "value": rendezvous.host},
                {"name": "PET_MASTER_PORT", "value": str(rendezvous.port)},
            ],
        )
        _serve(container, rendezvous)
    return Built(js)


def jax(trainjob: Obj, runtime: Obj, js: Obj, rendezvous: Rendezvous) -> Built:
    nodes = num_nodes(trainjob, runtime)
    _size_trainer(js, nodes)
    for container in _node(js):
        upsert_env(
            container,
            [
                {"name": "JAX_NUM_PROCESSES", "value": str(nodes)},
                index_env("JAX_PROCESS_ID"),
                {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{rendezvous.host}:{rendezvous.port}"},
            ],
        )
        _serve(container, rendezvous)
    return Built(js)


def xgboost(trainjob: Obj, runtime: Obj, js: Obj, rendezvous: Rendezvous) -> Built:
    nodes = num_nodes(trainjob, runtime)
    _size_trainer(js, nodes)
    per_node = gpus(resources_per_node(trainjob, js)) or 1
    for container in _node(js):
        upsert_env(
            container,
            [
                {"name": "DMLC_TRACKER_URI", "value": rendezvous.host},
                {"name": "DMLC_TRACKER_PORT", "value": str(rendezvous.port)},
                index_env("DMLC_TASK_ID"),
                {"name": "DMLC_NUM_WORKER", "value": str(nodes * per_node)},
            ],
        )
        _serve(container, rendezvous)
    return Built(js)


def plain(trainjob: Obj, runtime: Obj, js: Obj, rendezvous: Rendezvous) -> Built:
    """No mlPolicy source: ``numNodes`` trainer pods and nothing else (upstream's PlainML)."""
    _size_trainer(js, num_nodes(trainjob, runtime))
    return Built(js)


def _rjob(js: Obj, name: str) -> Obj | None:
    return next((r for r in js["spec"].get("replicatedJobs") or [] if r.get("name") == name), None)


def _endpoints(js: Obj, name: str, rjob: Obj) -> list[str]:
    subdomain = (js["spec"].get("network") or {}).get("subdomain") or name
    pods = int(((rjob.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
    return [
        f"{name}-{rjob['name']}-{replica}-{pod}.{subdomain}"
        for replica in range(int(rjob.get("replicas") or 1))
        for pod in range(pods)
    ]


def mpi(trainjob: Obj, runtime: Obj, js: Obj, rendezvous: Rendezvous) -> Built:
    name = trainjob["metadata"]["name"]
    policy = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("mpi") or {}
    implementation = policy.get("mpiImplementation") or "OpenMPI"
    if implementation != "OpenMPI":
        raise UnsupportedRuntime(f"MPI implementation {implementation} is not supported (only OpenMPI)")
    as_node = bool(policy.get("runLauncherAsNode"))
    nodes = num_nodes(trainjob, runtime)
    node_job, launcher = _rjob(js, trainer.NODE), _rjob(js, trainer.LAUNCHER)
    if node_job is None or launcher is None:
        raise UnsupportedRuntime("an MPI runtime needs the replicated Jobs 'launcher' and 'node'")
    set_count(node_job, max(nodes - 1, 1) if as_node else nodes)
    given = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numProcPerNode")
    slots = int(given if given is not None else policy.get("numProcPerNode") or 1)
    if given is None and slots == 1:
        slots = max(1, gpus(resources_per_node(trainjob, js)))
    secret = f"{name}{trainer.MPI_SSH_SECRET_SUFFIX}"
    hostfile = f"{name}{trainer.MPI_HOSTFILE_SUFFIX}"
    mount = policy.get("sshAuthMountPath") or "/root/.ssh"
    for rjob in (node_job, launcher):
        pod = rjob["template"]["spec"]["template"]["spec"]
        volumes = pod.setdefault("volumes", [])
        volumes[:] = [v for v in volumes if v.get("name") not in (SSH_VOLUME, HOSTFILE_VOLUME)]
        volumes.append(openmpi.ssh_volume(SSH_VOLUME, secret, default_mode=0o400, key_modes=_KEY_MODES))
        is_launcher = rjob is launcher
        if is_launcher:
            volumes.append(
                {"name": HOSTFILE_VOLUME, "configMap": {"name": hostfile, "items": [openmpi.hostfile_item()]}}
            )
        for container in containers(rjob, trainer.NODE):
            mounts = [
                m for m in container.get("volumeMounts") or [] if m.get("name") not in (SSH_VOLUME, HOSTFILE_VOLUME)
            ]
            mounts.append({"name": SSH_VOLUME, "mountPath": mount})
            if is_launcher:
                mounts.append({"name": HOSTFILE_VOLUME, "mountPath": trainer.MPI_HOSTFILE_DIR})
                env = openmpi.launcher_env(hostfile=f"{trainer.MPI_HOSTFILE_DIR}/{openmpi.HOSTFILE}", slots=slots)
                upsert_env(container, [{"name": name, "value": value} for name, value in env.items()])
            container["volumeMounts"] = mounts
    hosts = [*(_endpoints(js, name, launcher) if as_node else []), *_endpoints(js, name, node_job)]
    config: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": hostfile},
        "data": {openmpi.HOSTFILE: openmpi.hostfile(hosts, slots)},
    }
    return Built(js, companions=(config,), ssh_secret=secret)


_POLICIES = {"torch": torch, "jax": jax, "xgboost": xgboost, "mpi": mpi}


def enforce(trainjob: Obj, runtime: Obj, js: Obj, rendezvous: Rendezvous) -> Built:
    ml = (runtime.get("spec") or {}).get("mlPolicy") or {}
    sources = [key for key in ml if key != "numNodes" and ml[key] is not None]
    unknown = [key for key in sources if key not in _POLICIES]
    if unknown:
        raise UnsupportedRuntime(f"mlPolicy.{unknown[0]} is not supported by this trainer")
    if len(sources) > 1:
        raise UnsupportedRuntime(f"mlPolicy sets {' and '.join(sources)}: a runtime has one policy source")
    return (_POLICIES[sources[0]] if sources else plain)(trainjob, runtime, js, rendezvous)


def pod_group(trainjob: Obj, runtime: Obj, js: Obj) -> Obj | None:
    """``podGroupPolicy.coscheduling``: a scheduler-plugins PodGroup of every pod, which each pod joins.

    Named after the TrainJob, ``minMember`` all the JobSet's pods (the whole gang or nothing), as
    upstream's coscheduling plugin; the embedded scheduler honours it as scheduler-plugins does.
    """
    groups = (runtime.get("spec") or {}).get("podGroupPolicy") or {}
    if groups.get("volcano") is not None:
        raise UnsupportedRuntime("podGroupPolicy.volcano is not supported here yet: use podGroupPolicy.coscheduling")
    policy = groups.get("coscheduling")
    if policy is None:
        return None
    name = trainjob["metadata"]["name"]
    members = 0
    for rjob in js["spec"].get("replicatedJobs") or []:
        spec = (rjob.get("template") or {}).get("spec") or {}
        members += int(rjob.get("replicas") or 1) * int(spec.get("parallelism") or 1)
        pod = spec.setdefault("template", {}).setdefault("metadata", {})
        pod.setdefault("labels", {})[POD_GROUP_LABEL] = name
    group: Obj = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": members, "scheduleTimeoutSeconds": int(policy.get("scheduleTimeoutSeconds") or 60)},
    }
    return group
