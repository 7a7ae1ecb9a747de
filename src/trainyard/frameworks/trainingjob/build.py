"""A TrainingJob compiled to the ``kubeflow.org/v1`` job that runs it, as a plain dict. Pure.

The owned job has the TrainingJob's name and kind by ``spec.framework``:

* pytorch → PyTorchJob: a ``Master`` (rank 0, the rendezvous the others reach; upstream's
  operator needs one to set ``MASTER_ADDR``) and ``numWorkers - 1`` ``Worker`` replicas, so the
  world has ``numWorkers`` ranks; ``networking.masterPort`` is the Master's ``pytorchjob-port``;
* tensorflow → TFJob: ``numWorkers`` ``Worker`` replicas (worker 0 is the chief of
  MultiWorkerMirroredStrategy; ``TF_CONFIG`` is the TFJob plugin's);
* jax → JAXJob: ``numWorkers`` ``Worker`` replicas (process 0 the coordinator).

Every replica's pod template carries the label ``training-job: <name>``, the image (the user's,
else a default), ``command``/``args``/``env``/``resources`` as given, ``gpusPerWorker`` as its
``nvidia.com/gpu`` limit, ``scheduling`` as the pod's ``priorityClassName``, ``nodeSelector``,
``affinity`` and ``tolerations``, and the env ``worker_env`` lists (hyperparameters, model,
dataset, checkpointing, tracking). With neither ``command`` nor ``args`` the replicas run the
stand-in trainer (``python -m trainyard.standins.train``, ``trainyard.standins.train``) with the
hyperparameters also as its flags. ``failurePolicy`` becomes ``runPolicy.backoffLimit`` /
``activeDeadlineSeconds`` and every replica's ``restartPolicy``; ``successPolicy`` becomes
``runPolicy.earlyStopping`` on ``accuracy`` (contract §3); ``suspend`` becomes
``runPolicy.suspend``; ``scheduling.priority`` also becomes ``schedulingPolicy.priorityClass``
(the gang's PodGroup, when gang scheduling is on).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from trainyard.api import trainingjob as tj
from trainyard.api.kinds import KINDS
from trainyard.api.meta import Obj

STANDIN_IMAGE = "ghcr.io/trainyard/examples:latest"
"""The image of the stand-in trainer when a TrainingJob names neither command nor image: on the local
node it runs in trainyard's own environment (torch, scikit-learn), as the PyTorch examples' image."""
STANDIN_COMMAND = ("python", "-m", "trainyard.standins.train")
DEFAULT_IMAGES = {
    tj.PYTORCH: "pytorch/pytorch:latest",
    tj.TENSORFLOW: "tensorflow/tensorflow:latest",
    tj.JAX: "nvcr.io/nvidia/jax:latest",
}
"""The image of a TrainingJob that gives a command but no image (each maps to its framework's local
environment where ``make envs`` made one; pytorch/pytorch to trainyard's own)."""
GPU = "nvidia.com/gpu"
CHECKPOINT_VOLUME = "checkpoints"
# Flags of the stand-in, from hyperparameters (its flag names).
_FLAGS = {
    "epochs": "--epochs",
    "batchSize": "--batch-size",
    "learningRate": "--learning-rate",
    "optimizer": "--optimizer",
    "warmupSteps": "--warmup-steps",
    "gradientAccumulationSteps": "--gradient-accumulation-steps",
}


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def job_kind(trainingjob: Obj) -> str:
    """The ``kubeflow.org/v1`` kind a TrainingJob compiles to."""
    return tj.FRAMEWORK_KINDS[str(_dict(trainingjob.get("spec")).get("framework") or tj.PYTORCH)]


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def checkpoint_location(trainingjob: Obj) -> tuple[str | None, str | None]:
    """(directory in the pod, object-store URI) of an enabled checkpoint's storage; either may be None.

    A volume (pvc, nfs, local; an emptyDir when no storage is named) is mounted at ``/checkpoints``:
    the directory is ``/checkpoints/<storage.path>`` on a PVC (a claim holds many jobs' files), else
    ``/checkpoints/<name>``. S3 and GCS are object stores, under ``<bucket>/<storage.path>``, else
    ``<bucket>/<name>`` (one prefix per job, as the seed's ``resumeFrom`` URIs read): S3 is both the
    URI and the directory (``CheckpointManager`` writes ``s3://`` itself), GCS only a URI.
    """
    spec = _dict(trainingjob.get("spec"))
    checkpoint = _dict(spec.get("checkpoint"))
    if not checkpoint.get("enabled"):
        return None, None
    storage = _dict(checkpoint.get("storage"))
    kind = storage.get("type")
    path = str(storage.get("path") or "").strip("/")
    name = trainingjob["metadata"]["name"]
    if kind in ("s3", "gcs"):
        uri = f"{kind}://{storage.get(f'{kind}Bucket')}/{path or name}"
        return (uri if kind == "s3" else None), uri
    sub = path if kind == "pvc" and path else name
    return f"{tj.CHECKPOINT_MOUNT}/{sub}", None


def worker_env(trainingjob: Obj) -> list[Obj]:
    """The env every worker gets (contract §5), in this order; a name the user's ``env`` sets is theirs."""
    spec = _dict(trainingjob.get("spec"))
    hp = _dict(spec.get("hyperparameters"))
    pairs: list[tuple[str, str]] = [
        (tj.ENV_MODEL, str(spec.get("model") or "")),
        (tj.ENV_DATASET, str(spec.get("dataset") or "")),
        (tj.ENV_NUM_WORKERS, str(spec.get("numWorkers") or 1)),
        (tj.ENV_GPUS_PER_WORKER, str(spec.get("gpusPerWorker", 1))),
    ]
    pairs += [(env, _text(hp[key])) for key, env in tj.HYPERPARAMETER_ENV.items() if hp.get(key) is not None]
    pairs.append((tj.ENV_HYPERPARAMETERS, json.dumps(hp, sort_keys=True, separators=(",", ":"))))
    networking = _dict(spec.get("networking"))
    if networking.get("backend"):
        pairs.append((tj.ENV_BACKEND, str(networking["backend"])))
    if networking.get("rdmaEnabled") is False:
        pairs.append(("NCCL_IB_DISABLE", "1"))  # no InfiniBand/RoCE: NCCL uses sockets
    checkpoint = _dict(spec.get("checkpoint"))
    directory, uri = checkpoint_location(trainingjob)
    if directory is not None:
        pairs.append((tj.ENV_CHECKPOINT_DIR, directory))
    if uri is not None:
        pairs.append((tj.ENV_CHECKPOINT_URI, uri))
    if checkpoint.get("enabled"):
        pairs.append((tj.ENV_CHECKPOINT_FREQUENCY, str(checkpoint.get("frequency") or 1)))
        if checkpoint.get("retention") is not None:
            pairs.append((tj.ENV_CHECKPOINT_KEEP, str(checkpoint["retention"])))
    if checkpoint.get("resumeFrom"):
        pairs.append((tj.ENV_RESUME_FROM, str(checkpoint["resumeFrom"])))
    monitoring = _dict(spec.get("monitoring"))
    if monitoring.get("mlflowTrackingUri"):
        pairs.append((tj.ENV_MLFLOW, str(monitoring["mlflowTrackingUri"])))
    if monitoring.get("wandbProject"):
        pairs.append((tj.ENV_WANDB, str(monitoring["wandbProject"])))
    if monitoring.get("enabled") and monitoring.get("metricsPort"):
        pairs.append((tj.ENV_METRICS_PORT, str(monitoring["metricsPort"])))
    if monitoring.get("tensorboardEnabled"):
        pairs.append((tj.ENV_TENSORBOARD, "true"))
    users = [copy.deepcopy(e) for e in spec.get("env") or [] if isinstance(e, dict)]
    taken = {e.get("name") for e in users}
    return users + [{"name": k, "value": v} for k, v in pairs if k not in taken]


def standin_args(spec: Obj) -> list[str]:
    """The stand-in trainer's flags: model, dataset, the hyperparameters it reads, checkpoint frequency."""
    hp = _dict(spec.get("hyperparameters"))
    args = ["--model", str(spec.get("model") or ""), "--dataset", str(spec.get("dataset") or "")]
    for key, flag in _FLAGS.items():
        if hp.get(key) is not None:
            args += [flag, _text(hp[key])]
    if hp.get("mixedPrecision"):
        args.append("--mixed-precision")
    return args


def _volumes(spec: Obj) -> tuple[list[Obj], list[Obj]]:
    """(volumes, mounts) of an enabled checkpoint's storage: pvc, nfs, local, or an emptyDir when none is named."""
    checkpoint = _dict(spec.get("checkpoint"))
    if not checkpoint.get("enabled"):
        return [], []
    storage = _dict(checkpoint.get("storage"))
    kind = storage.get("type")
    source: Obj
    if kind == "pvc":
        source = {"persistentVolumeClaim": {"claimName": storage.get("pvcName")}}
    elif kind == "nfs":
        source = {"nfs": {"server": storage.get("nfsServer"), "path": storage.get("path")}}
    elif kind == "local":
        source = {"hostPath": {"path": storage.get("path"), "type": "DirectoryOrCreate"}}
    elif kind in ("s3", "gcs"):
        return [], []
    else:
        source = {"emptyDir": {}}
    return [{"name": CHECKPOINT_VOLUME, **source}], [{"name": CHECKPOINT_VOLUME, "mountPath": tj.CHECKPOINT_MOUNT}]


def _container(trainingjob: Obj, container_name: str, port: Obj | None) -> Obj:
    spec = _dict(trainingjob.get("spec"))
    standin = not spec.get("command") and not spec.get("args")
    image = spec.get("image") or (STANDIN_IMAGE if standin else DEFAULT_IMAGES[str(spec.get("framework") or "pytorch")])
    container: Obj = {"name": container_name, "image": image}
    if standin:
        container["command"] = list(STANDIN_COMMAND)
        container["args"] = standin_args(spec)
    else:
        for key in ("command", "args"):
            if spec.get(key):
                container[key] = list(spec[key])
    container["env"] = worker_env(trainingjob)
    resources = copy.deepcopy(_dict(spec.get("resources")))
    gpus = spec.get("gpusPerWorker", 1)
    if gpus:
        resources.setdefault("limits", {})[GPU] = gpus
    if resources:
        container["resources"] = resources
    ports = [port] if port is not None else []
    monitoring = _dict(spec.get("monitoring"))
    if monitoring.get("enabled") and monitoring.get("metricsPort"):
        ports.append({"name": "metrics", "containerPort": monitoring["metricsPort"]})
    if ports:
        container["ports"] = ports
    _, mounts = _volumes(spec)
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _pod_template(trainingjob: Obj, container: Obj) -> Obj:
    name = trainingjob["metadata"]["name"]
    spec = _dict(trainingjob.get("spec"))
    pod: Obj = {"containers": [container]}
    scheduling = _dict(spec.get("scheduling"))
    if scheduling.get("priority"):
        pod["priorityClassName"] = scheduling["priority"]
    for key in ("nodeSelector", "affinity", "tolerations"):
        if scheduling.get(key):
            pod[key] = copy.deepcopy(scheduling[key])
    volumes, _ = _volumes(spec)
    if volumes:
        pod["volumes"] = volumes
    return {"metadata": {"labels": {tj.JOB_LABEL: name}}, "spec": pod}


def _run_policy(spec: Obj) -> Obj:
    failure = _dict(spec.get("failurePolicy"))
    policy: Obj = {}
    for key in ("backoffLimit", "activeDeadlineSeconds"):
        if failure.get(key) is not None:
            policy[key] = failure[key]
    scheduling = _dict(spec.get("scheduling"))
    if scheduling.get("priority"):
        policy["schedulingPolicy"] = {"priorityClass": scheduling["priority"]}
    success = _dict(spec.get("successPolicy"))
    if success.get("targetAccuracy") is not None or success.get("earlyStoppingPatience") is not None:
        stopping: Obj = {"metric": "accuracy", "mode": "max"}
        if success.get("targetAccuracy") is not None:
            stopping["target"] = success["targetAccuracy"]
        if success.get("earlyStoppingPatience") is not None:
            stopping["patience"] = success["earlyStoppingPatience"]
        policy["earlyStopping"] = stopping
    if spec.get("suspend"):
        policy["suspend"] = True
    return policy


def _replicas(trainingjob: Obj, kind: str) -> Obj:
    spec = _dict(trainingjob.get("spec"))
    info = KINDS[kind]
    workers = int(spec.get("numWorkers") or 1)
    restart = _dict(spec.get("failurePolicy")).get("restartPolicy")
    port = _dict(spec.get("networking")).get("masterPort")
    counts = {"Master": 1, "Worker": workers - 1} if kind == tj.FRAMEWORK_KINDS[tj.PYTORCH] else {"Worker": workers}
    out: Obj = {}
    for rtype, replicas in counts.items():
        if replicas < 1:
            continue
        # Only the Master serves the rendezvous (in host network mode a declared port is allocated).
        declared = {"name": info.default_port_name, "containerPort": port} if port and rtype == "Master" else None
        template = _pod_template(trainingjob, _container(trainingjob, info.default_container, declared))
        replica: Obj = {"replicas": replicas, "template": template}
        if restart:
            replica["restartPolicy"] = restart
        out[rtype] = replica
    return out


def build(trainingjob: Obj) -> Obj:
    """The owned job (no namespace, no owner reference: the applier adds those)."""
    name = trainingjob["metadata"]["name"]
    spec = _dict(trainingjob.get("spec"))
    kind = job_kind(trainingjob)
    info = KINDS[kind]
    job_spec: Obj = {"runPolicy": _run_policy(spec), info.replica_specs_field: _replicas(trainingjob, kind)}
    return {
        "apiVersion": info.api_version,
        "kind": kind,
        "metadata": {"name": name, "labels": {tj.JOB_LABEL: name}},
        "spec": job_spec,
    }
