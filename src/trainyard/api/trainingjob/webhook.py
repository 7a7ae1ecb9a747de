"""The admission of TrainingJobs: defaults and the rules a schema cannot say, pure, with field paths.

* ``default``: ``framework`` pytorch, ``gpusPerWorker`` 1, ``suspend`` false (the schema has the
  same defaults; admission applies them too so an object built in code reads the same), and
  ``checkpoint.storage.type`` ``s3`` / ``gcs`` when only a bucket names it.
* ``validate``: the name fits the owned job's pod names; what a checkpoint storage type needs is
  there (an ``s3Bucket`` for s3, a ``pvcName`` for pvc, an ``nfsServer`` and ``path`` for nfs, a
  ``path`` for local); checkpoint fields other than ``enabled`` are refused while it is off
  (they would be silently ignored); ``resources``' ``nvidia.com/gpu`` agrees with
  ``gpusPerWorker``; a TensorFlow or JAX job has no ``masterPort`` (the framework picks its
  rendezvous, only PyTorch has a master); env names are unique; and on update only ``suspend``
  changes (the owned job is compiled once, as upstream's jobs keep their replica specs).
"""

from __future__ import annotations

import re
from typing import Any

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.meta import Obj
from trainyard.api.trainingjob import MAX_NAME, PYTORCH

GPU = "nvidia.com/gpu"
IMMUTABLE = "field is immutable: only spec.suspend may change once a TrainingJob exists"
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# What each checkpoint storage type needs, beside its type.
STORAGE_NEEDS = {
    "s3": ("s3Bucket",),
    "gcs": ("gcsBucket",),
    "pvc": ("pvcName",),
    "nfs": ("nfsServer", "path"),
    "local": ("path",),
}


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def default(obj: Obj, old: Obj | None = None) -> None:
    """The TrainingJob defaulter, in place."""
    del old
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    spec.setdefault("framework", PYTORCH)
    if spec.get("gpusPerWorker") is None:
        spec["gpusPerWorker"] = 1
    if spec.get("suspend") is None:
        spec["suspend"] = False
    storage = _dict(_dict(spec.get("checkpoint")).get("storage"))
    if storage and not storage.get("type"):
        for kind in ("s3", "gcs"):
            if storage.get(f"{kind}Bucket"):
                storage["type"] = kind
                break


def validate(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """Every problem of a TrainingJob at once (create; with ``old``, update)."""
    out: list[FieldError] = []
    name = str(_dict(obj.get("metadata")).get("name") or "")
    if name and not _DNS1035.match(name):
        detail = f"{quote(name)}: a TrainingJob's name must be a DNS-1035 label (its workers are named after it)"
        out.append(FieldError(ErrorType.INVALID, "metadata.name", detail))
    if len(name) > MAX_NAME:
        detail = f"{quote(name)}: must be no more than {MAX_NAME} characters (its pods are <name>-worker-<index>)"
        out.append(FieldError(ErrorType.INVALID, "metadata.name", detail))
    spec = _dict(obj.get("spec"))
    out += _checkpoint_problems(_dict(spec.get("checkpoint")))
    out += _resource_problems(spec)
    port = _dict(spec.get("networking")).get("masterPort")
    framework = spec.get("framework") or PYTORCH
    if port is not None and framework != PYTORCH:
        detail = f"{port}: only a pytorch TrainingJob has a master; {framework} chooses its own rendezvous port"
        out.append(FieldError(ErrorType.FORBIDDEN, "spec.networking.masterPort", detail))
    seen: set[str] = set()
    for i, env in enumerate(spec.get("env") or []):
        env_name = _dict(env).get("name")
        if env_name in seen:
            out.append(FieldError(ErrorType.DUPLICATE, f"spec.env[{i}].name", quote(env_name)))
        seen.add(str(env_name))
    if old is not None:
        out += update_problems(old, obj)
    return out


def _checkpoint_problems(checkpoint: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    if checkpoint and not checkpoint.get("enabled"):
        extra = sorted(k for k in checkpoint if k not in ("enabled", "resumeFrom"))
        if extra:
            detail = f"checkpoint.enabled is false: set it to true, or drop {', '.join(extra)}"
            out.append(FieldError(ErrorType.FORBIDDEN, f"spec.checkpoint.{extra[0]}", detail))
    storage = _dict(checkpoint.get("storage"))
    kind = storage.get("type")
    if storage and not kind:
        out.append(FieldError(ErrorType.REQUIRED, "spec.checkpoint.storage.type", "one of pvc, s3, gcs, nfs, local"))
    for key in STORAGE_NEEDS.get(str(kind), ()):
        if not storage.get(key):
            detail = f"{kind} checkpoint storage needs {key}"
            out.append(FieldError(ErrorType.REQUIRED, f"spec.checkpoint.storage.{key}", detail))
    return out


def _resource_problems(spec: Obj) -> list[FieldError]:
    out: list[FieldError] = []
    gpus = spec.get("gpusPerWorker")
    gpus = 1 if gpus is None else gpus
    for part in ("limits", "requests"):
        value = _dict(_dict(spec.get("resources")).get(part)).get(GPU)
        if value is None:
            continue
        try:
            same = int(str(value)) == gpus
        except ValueError:
            same = False
        if not same:
            detail = f"{quote(value)}: must equal spec.gpusPerWorker ({gpus}), which sets it; or leave it out"
            out.append(FieldError(ErrorType.INVALID, f"spec.resources.{part}[{GPU}]", detail))
    return out


def update_problems(old: Obj, new: Obj) -> list[FieldError]:
    """Every spec field but ``suspend`` keeps its value."""
    old_spec, new_spec = _dict(old.get("spec")), _dict(new.get("spec"))
    out: list[FieldError] = []
    for key in sorted(set(old_spec) | set(new_spec)):
        if key != "suspend" and old_spec.get(key) != new_spec.get(key):
            out.append(FieldError(ErrorType.INVALID, f"spec.{key}", IMMUTABLE))
    return out
