"""The admission of TrainJobs and (Cluster)TrainingRuntimes: defaults and validation, pure.

What upstream enforces with its CRDs' CEL rules and its webhooks (``pkg/webhooks``), in its
words, with field paths, so a bad object gets a 422 ``Invalid`` with causes:

* TrainJob ``default``: ``runtimeRef.apiGroup`` ``trainer.kubeflow.org``, ``runtimeRef.kind``
  ``ClusterTrainingRuntime``, ``managedBy`` this controller, ``suspend`` false (the schema has the
  same defaults) and a ``time`` on each runtime patch that is new or changed, as upstream's
  defaulter stamps it.
* TrainJob ``validate``: the name is an RFC 1035 label of at most 63 characters; ``managedBy`` is
  one of ``MANAGED_BY``; the runtime reference names a kind this controller runs; storage URIs
  are empty or ``scheme://...``; ``numProcPerNode`` ≥ 1; on update, the fields upstream marks
  ``self == oldSelf`` keep their value (``runtimeRef``, ``initializer``, ``trainer``,
  ``activeDeadlineSeconds``, ``managedBy`` and a runtime patch's pod-spec fields but its
  scheduling directives).
* Runtime ``validate``: a template with ``replicatedJobs``; at most one ML policy; MPI and Flux
  ``numProcPerNode`` ≥ 1; torch's env-injection targets not naming ``node``; a replicated Job
  labelled as a TrainJob ancestor has one replica and the container its step needs.

``runtime_problems(trainjob, runtime)`` holds the checks upstream's framework plugins make
against the referenced runtime (reserved env names, the MPI node count). Admission here cannot
read other objects, so the TrainJob controller calls it once it has resolved the runtime.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.meta import Obj
from trainyard.api.trainer import (
    ANCESTOR_LABEL,
    ANCESTOR_TRAINER,
    CLUSTER_TRAINING_RUNTIME,
    CONTROLLER_NAME,
    DATASET_INITIALIZER,
    GROUP,
    JAX_ENV,
    LAUNCHER,
    MANAGED_BY,
    MODEL_INITIALIZER,
    MPI_ENV,
    NODE,
    TORCH_ENV,
    TRAINING_RUNTIME,
    XGBOOST_ENV,
)

IMMUTABLE = "field is immutable"
RUNTIME_KINDS = (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME)
ML_POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")
# The container each ancestor step's replicated Job must run.
ANCESTOR_CONTAINERS = {
    ANCESTOR_TRAINER: NODE,
    MODEL_INITIALIZER: MODEL_INITIALIZER,
    DATASET_INITIALIZER: DATASET_INITIALIZER,
}
# A runtime patch's pod-spec fields a TrainJob may not change once set (the rest steer scheduling).
IMMUTABLE_POD_PATCH = (
    "serviceAccountName",
    "volumes",
    "initContainers",
    "containers",
    "imagePullSecrets",
    "securityContext",
    "terminationGracePeriodSeconds",
)
MPI_NODES = "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either launcher and node"
_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")


def _cel(field: str, type_name: str, message: str) -> FieldError:
    """A CEL rule's failure as kube-apiserver words it: the value is shown as its type."""
    return FieldError(ErrorType.INVALID, field, f"{quote(type_name)}: {message}")


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    return "string"


# -- TrainJob ------------------------------------------------------------------------------------------


def default(obj: Obj, old: Obj | None = None, *, now: datetime | None = None) -> None:
    """The TrainJob defaulter, in place; ``old`` on update keeps unchanged patches' times."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    ref = spec.get("runtimeRef")
    if isinstance(ref, dict):
        ref.setdefault("apiGroup", GROUP)
        ref.setdefault("kind", CLUSTER_TRAINING_RUNTIME)
    if spec.get("managedBy") is None:
        spec["managedBy"] = CONTROLLER_NAME
    if spec.get("suspend") is None:
        spec["suspend"] = False
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    before = {
        p.get("manager"): p for p in _dict(old).get("spec", {}).get("runtimePatches") or [] if isinstance(p, dict)
    }
    for patch in spec.get("runtimePatches") or []:
        if not isinstance(patch, dict):
            continue
        prior = before.get(patch.get("manager"))
        if prior is not None:
            same = {k: v for k, v in prior.items() if k != "time"} == {k: v for k, v in patch.items() if k != "time"}
            patch["time"] = (prior.get("time") or stamp) if same else stamp
        elif not patch.get("time"):
            patch["time"] = stamp


def validate(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """Every problem of a TrainJob at once (create; with ``old``, update)."""
    out: list[FieldError] = []
    name = str(_dict(obj.get("metadata")).get("name") or "")
    if not _RFC1035.match(name):
        out.append(_cel("metadata.name", "object", "metadata.name must match RFC 1035 DNS label format"))
    if len(name) > 63:
        out.append(_cel("metadata.name", "object", "metadata.name must be no more than 63 characters"))
    spec = _dict(obj.get("spec"))
    manager = spec.get("managedBy")
    if manager is not None and manager not in MANAGED_BY:
        message = f"ManagedBy must be {MANAGED_BY[0]} or {MANAGED_BY[1]} if set"
        out.append(_cel("spec.managedBy", "string", message))
    ref = _dict(spec.get("runtimeRef"))
    group, kind = ref.get("apiGroup", GROUP), ref.get("kind", CLUSTER_TRAINING_RUNTIME)  # absent: the defaults
    if group != GROUP or kind not in RUNTIME_KINDS:
        key, value = ("apiGroup", group) if group != GROUP else ("kind", kind)
        detail = f"{quote(value)}: unsupported runtime: {kind}.{group}"
        out.append(FieldError(ErrorType.INVALID, f"spec.runtimeRef.{key}", detail))
    for step in ("dataset", "model"):
        uri = _dict(_dict(spec.get("initializer")).get(step)).get("storageUri")
        if isinstance(uri, str) and uri and not _URI.match(uri):
            message = "storageUri may be empty, or it must be a valid URI (scheme://...)"
            out.append(_cel(f"spec.initializer.{step}.storageUri", "string", message))
    procs = _dict(spec.get("trainer")).get("numProcPerNode")
    if isinstance(procs, int) and procs < 1:
        out.append(_cel("spec.trainer.numProcPerNode", "integer", "numProcPerNode must be greater than or equal to 1"))
    if old is not None:
        out += update_problems(old, obj)
    return out


def update_problems(old: Obj, new: Obj) -> list[FieldError]:
    """The ``self == oldSelf`` rules: a field present before and after keeps its value."""
    old_spec, new_spec = _dict(old.get("spec")), _dict(new.get("spec"))
    out: list[FieldError] = []
    for key in ("runtimeRef", "initializer", "trainer", "activeDeadlineSeconds", "managedBy"):
        if key in old_spec and key in new_spec and old_spec[key] != new_spec[key]:
            out.append(_cel(f"spec.{key}", _type_name(new_spec[key]), IMMUTABLE))
    before = {p.get("manager"): p for p in old_spec.get("runtimePatches") or [] if isinstance(p, dict)}
    for i, patch in enumerate(new_spec.get("runtimePatches") or []):
        prior = before.get(_dict(patch).get("manager"))
        if prior is not None:
            out += _patch_problems(prior, patch, f"spec.runtimePatches[{i}]")
    return out


def _replicated_patches(patch: Obj) -> list[Any]:
    template = _dict(_dict(patch.get("trainingRuntimeSpec")).get("template"))
    return list(_dict(template.get("spec")).get("replicatedJobs") or [])


def _patch_problems(old: Obj, new: Obj, path: str) -> list[FieldError]:
    out: list[FieldError] = []
    before = {r.get("name"): r for r in _replicated_patches(old) if isinstance(r, dict)}
    for j, rjob in enumerate(_replicated_patches(new)):
        prior = before.get(_dict(rjob).get("name"))
        if prior is None:
            continue
        pod_old = _dict(_dict(_dict(_dict(prior.get("template")).get("spec")).get("template")).get("spec"))
        pod_new = _dict(_dict(_dict(_dict(rjob.get("template")).get("spec")).get("template")).get("spec"))
        for key in IMMUTABLE_POD_PATCH:
            if key in pod_old and key in pod_new and pod_old[key] != pod_new[key]:
                field = (
                    f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}].template.spec.template.spec.{key}"
                )
                out.append(_cel(field, _type_name(pod_new[key]), IMMUTABLE))
    return out


# -- runtimes -------------------------------------------------------------------------------------------


def _rjobs(runtime: Obj) -> list[Obj]:
    template = _dict(_dict(runtime.get("spec")).get("template"))
    return [r for r in _dict(template.get("spec")).get("replicatedJobs") or [] if isinstance(r, dict)]


def _containers(rjob: Obj) -> list[Obj]:
    pod = _dict(_dict(_dict(_dict(rjob.get("template")).get("spec")).get("template")).get("spec"))
    return [c for c in pod.get("containers") or [] if isinstance(c, dict)]


def validate_runtime(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """A TrainingRuntime's or ClusterTrainingRuntime's problems (the same rules for both)."""
    del old  # upstream checks an update as it checks a create
    spec = _dict(obj.get("spec"))
    out: list[FieldError] = []
    jobset_spec = _dict(_dict(spec.get("template")).get("spec"))
    path = "spec.template.spec.replicatedJobs"
    if not jobset_spec.get("replicatedJobs"):
        out.append(FieldError(ErrorType.REQUIRED, path, "a runtime's template needs at least one replicated Job"))
    policy = _dict(spec.get("mlPolicy"))
    if sum(1 for key in ML_POLICIES if key in policy) > 1:
        out.append(_cel("spec.mlPolicy", "object", "Only one of the policy can be configured"))
    procs = _dict(policy.get("mpi")).get("numProcPerNode")
    if isinstance(procs, int) and procs < 1:
        out.append(FieldError(ErrorType.INVALID, "spec.mlPolicy.mpi.numProcPerNode", f"{procs}: must be >= 1"))
    procs = _dict(policy.get("flux")).get("numProcPerNode")
    if isinstance(procs, int) and procs < 1:
        out.append(_cel("spec.mlPolicy.flux.numProcPerNode", "integer", "NumProcPerNode in fluxPolicy must be >= 1"))
    targets = _dict(_dict(policy.get("torch")).get("envInjection")).get("targets") or []
    for i, target in enumerate(targets):
        if NODE in (_dict(target).get("containerNames") or []):
            message = (
                "containerNames must not include the main node container because PET_* envs are always injected into it"
            )
            out.append(_cel(f"spec.mlPolicy.torch.envInjection.targets[{i}].containerNames", "list", message))
    for i, rjob in enumerate(_rjobs(obj)):
        ancestor = _dict(_dict(_dict(rjob.get("template")).get("metadata")).get("labels")).get(ANCESTOR_LABEL)
        if ancestor not in ANCESTOR_CONTAINERS:
            continue
        replicas = rjob.get("replicas", 1)
        if replicas != 1:
            out.append(FieldError(ErrorType.INVALID, f"{path}[{i}].replicas", f"{quote(replicas)}: always must be 1"))
        if not any(c.get("name") == ANCESTOR_CONTAINERS[ancestor] for c in _containers(rjob)):
            field = f"{path}[{i}].template.spec.template.spec.containers"
            detail = f"must contain the required container for the ancestor: {ancestor}"
            out.append(FieldError(ErrorType.INVALID, field, f"{quote('...')}: {detail}"))
    return out


# -- against the referenced runtime (the framework plugins' Validate) -----------------------------------


def runtime_problems(trainjob: Obj, runtime: Obj) -> list[FieldError]:
    """What upstream's plugins reject once the runtime is known: reserved env names, MPI's node count."""
    policy = _dict(_dict(runtime.get("spec")).get("mlPolicy"))
    trainer = _dict(_dict(trainjob.get("spec")).get("trainer"))
    names = [str(_dict(e).get("name")) for e in trainer.get("env") or []]
    out: list[FieldError] = []
    reserved: tuple[str, ...] = ()
    if "torch" in policy:
        reserved = TORCH_ENV
    elif "mpi" in policy:
        reserved = MPI_ENV
    elif "jax" in policy:
        reserved = JAX_ENV
    if reserved and (found := sorted({n for n in names if n in reserved})):
        detail = f"must not have reserved envs, invalid envs configured: [{' '.join(found)}]"
        out.append(FieldError(ErrorType.INVALID, "spec.trainer.env", f"{quote('...')}: {detail}"))
    if "xgboost" in policy:
        for i, env_name in enumerate(names):
            if env_name in XGBOOST_ENV:
                detail = f"{env_name} is reserved for the XGBoost runtime"
                out.append(FieldError(ErrorType.FORBIDDEN, f"spec.trainer.env[{i}]", detail))
    mpi = _dict(policy.get("mpi"))
    nodes = trainer.get("numNodes")
    if mpi.get("runLauncherAsNode") and isinstance(nodes, int) and nodes > 1:
        steps = {r.get("name") for r in _rjobs(runtime)}
        if not {LAUNCHER, NODE} <= steps:
            out.append(FieldError(ErrorType.INVALID, "spec.trainer.numNodes", f"{nodes}: {MPI_NODES}"))
    return out
