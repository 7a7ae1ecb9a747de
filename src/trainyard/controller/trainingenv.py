"""What the training code in a job's replica pods is told, beside the framework's env.

Every container of every replica pod of a kind with ``KindInfo.training_progress`` (the
``kubeflow.org/v1`` kinds, and MPIJob's workers and launcher Job template: ``decorate_template``) gets:

* ``TRAINYARD_JOB_NAME``, ``TRAINYARD_JOB_NAMESPACE``, ``TRAINYARD_JOB_KIND`` (runtime tags);
* ``TRAINYARD_RESUME_FROM``: the job's ``status.trainingProgress.lastCheckpoint.path`` once it has
  one, so a pod created after a restart resumes from the job's last checkpoint (before that,
  whatever the template sets, e.g. a TrainingJob's ``checkpoint.resumeFrom``);
* ``MLFLOW_RUN_NAME`` / ``WANDB_RUN_GROUP`` = the job's name where the container names an MLflow
  server (``MLFLOW_TRACKING_URI``) / a W&B project (``WANDB_PROJECT``) and no run name / group;
* while the operator serves its status server: ``TRAINYARD_PROGRESS_URL`` (this job's route,
  ``controller.progress.path``), ``TRAINYARD_PROGRESS_CA`` (the CA's PEM text, so no ConfigMap
  per job) and ``TRAINYARD_PROGRESS_TOKEN``, the path of a projected service-account token whose
  audience names this job's route (``progress.audience``): a token minted for one job is refused
  for another.

Only pods being created are decorated: a running pod is never replaced because its job's last
checkpoint moved (the reconciler creates pods by name and never compares their spec), so the
resume path reaches exactly the pods created after a restart. Operator values replace a
template's of the same name, except the MLflow and W&B defaults, which only fill a gap.
"""

from __future__ import annotations

from trainyard.api.common import TrainingJob
from trainyard.api.core import Pod
from trainyard.api.kindinfo import KindInfo
from trainyard.api.meta import Obj
from trainyard.controller import progress
from trainyard.frameworks.trainer.status import StatusServer

URL_ENV = "TRAINYARD_PROGRESS_URL"
TOKEN_ENV = "TRAINYARD_PROGRESS_TOKEN"
CA_ENV = "TRAINYARD_PROGRESS_CA"
RESUME_ENV = "TRAINYARD_RESUME_FROM"
MOUNT_PATH = "/var/run/secrets/trainyard/progress"
TOKEN_FILE = "token"
VOLUME = "trainyard-progress-token"
TOKEN_SECONDS = 3600
DEFAULTED = (("MLFLOW_TRACKING_URI", "MLFLOW_RUN_NAME"), ("WANDB_PROJECT", "WANDB_RUN_GROUP"))
"""(the variable that says the container uses the tracker, the one defaulted to the job's name)."""


def with_progress_env(pod: Pod, job: TrainingJob, info: KindInfo, server: StatusServer | None) -> Pod:
    """``pod`` (about to be created) with the env and token volume above; other kinds' pods unchanged."""
    if not info.training_progress:
        return pod
    body = pod.to_dict()
    spec = body.setdefault("spec", {})
    owned = _owned_env(job, info, server)
    for container in spec.get("containers") or []:
        env = container.setdefault("env", [])
        names = {e.get("name") for e in env}
        for uses, defaulted in DEFAULTED:
            if uses in names and defaulted not in names:
                env.append({"name": defaulted, "value": job.name})
        _upsert(env, owned)
        if server is not None:
            _upsert(
                container.setdefault("volumeMounts", []), [{"name": VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}]
            )
    if server is not None:
        _upsert(spec.setdefault("volumes", []), [_token_volume(job, info)])
    return Pod.model_validate(body)


def template_with_progress_env(template: Obj, job: TrainingJob, info: KindInfo, server: StatusServer | None) -> Obj:
    """A pod template (a launcher Job's, whose pods the job does not create itself) decorated as
    :func:`with_progress_env` does a pod; the template is written once, when its Job is created."""
    if not info.training_progress:
        return template
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    pod = Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    return {**template, "spec": with_progress_env(pod, job, info, server).to_dict()["spec"]}


def _owned_env(job: TrainingJob, info: KindInfo, server: StatusServer | None) -> list[Obj]:
    env = [
        {"name": "TRAINYARD_JOB_NAME", "value": job.name},
        {"name": "TRAINYARD_JOB_NAMESPACE", "value": job.namespace},
        {"name": "TRAINYARD_JOB_KIND", "value": info.kind},
    ]
    last = job.status.training_progress.last_checkpoint if job.status.training_progress else None
    if last is not None and last.path:
        env.append({"name": RESUME_ENV, "value": last.path})
    if server is not None:
        env += [
            {"name": URL_ENV, "value": server.url.rstrip("/") + progress.path(info, job.namespace, job.name)},
            {"name": TOKEN_ENV, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
            {"name": CA_ENV, "value": server.ca_pem},
        ]
    return env


def _token_volume(job: TrainingJob, info: KindInfo) -> Obj:
    token = {
        "audience": progress.audience(info, job.namespace, job.name),
        "expirationSeconds": TOKEN_SECONDS,
        "path": TOKEN_FILE,
    }
    return {"name": VOLUME, "projected": {"sources": [{"serviceAccountToken": token}]}}


def _upsert(items: list[Obj], wanted: list[Obj]) -> None:
    """Replace the entries of the same ``name`` in place (order kept), append the others."""
    for item in wanted:
        at = next((i for i, old in enumerate(items) if old.get("name") == item["name"]), None)
        if at is None:
            items.append(item)
        else:
            items[at] = item
