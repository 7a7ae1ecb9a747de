"""The edits a runtime's JobSet template gets: patches, the trainer's overrides, sizes, env.

``build`` composes them in upstream's order; ``policies`` (the mlPolicy plugins) use the helpers.
Plain dicts in, plain dicts edited in place: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from trainyard.api import labels, trainer
from trainyard.api.meta import Obj

STORAGE_URI_ENV = "STORAGE_URI"
"""The env var upstream's initializers read their source from."""


class UnsupportedRuntime(ValueError):
    """The runtime cannot run this TrainJob (a template without a trainer, an unknown policy)."""


@dataclass(frozen=True)
class Rendezvous:
    """Where node 0 of the trainer serves its rendezvous (torch), coordinator (JAX) or tracker (XGBoost)."""

    host: str
    port: int
    declare_port: bool = True
    """Whether the trainer's container declares ``port`` (cluster mode: for its headless Service)."""


@dataclass(frozen=True)
class Built:
    jobset: Obj
    companions: tuple[Obj, ...] = ()
    """Objects beside the JobSet the TrainJob owns (an MPI runtime's hostfile ConfigMap)."""
    ssh_secret: str = ""
    """The SSH Secret the pods mount (MPI: ``<trainjob>-mpi-ssh-auth``), created once and never rewritten."""


def cluster_rendezvous(name: str) -> Rendezvous:
    """Upstream's: node 0's pod by its JobSet DNS name, on the trainer port."""
    return Rendezvous(f"{name}-{trainer.NODE}-0-0.{name}", trainer.CONTAINER_TRAINER_PORT)


def _meta(obj: Obj) -> Obj:
    meta: Obj = obj.setdefault("metadata", {})
    return meta


def _pod_spec(rjob: Obj) -> Obj:
    spec: Obj = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
    return spec


def ancestor(rjob: Obj) -> str:
    return str(((rjob.get("template") or {}).get("metadata") or {}).get("labels", {}).get(trainer.ANCESTOR_LABEL, ""))


def containers(rjob: Obj, name: str) -> list[Obj]:
    return [c for c in _pod_spec(rjob).get("containers") or [] if c.get("name") == name]


def upsert_env(container: Obj, env: Iterable[Obj]) -> None:
    """Set each variable by name: replaced where it exists (in place), appended otherwise."""
    current = container.setdefault("env", [])
    for var in env:
        for i, old in enumerate(current):
            if old.get("name") == var.get("name"):
                current[i] = copy.deepcopy(var)
                break
        else:
            current.append(copy.deepcopy(var))


def _upsert_named(items: list[Obj], new: Iterable[Obj], key: str = "name") -> None:
    for item in new:
        for i, old in enumerate(items):
            if old.get(key) == item.get(key):
                items[i] = copy.deepcopy(item)
                break
        else:
            items.append(copy.deepcopy(item))


def upsert_port(container: Obj, port: int) -> None:
    ports = container.setdefault("ports", [])
    if not any(p.get("containerPort") == port for p in ports):
        ports.append({"containerPort": port, "protocol": "TCP"})


def index_env(name: str) -> Obj:
    """A variable holding the pod's completion index, as upstream's plugins inject node ranks."""
    path = f"metadata.annotations['{labels.JOB_COMPLETION_INDEX}']"
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def num_nodes(trainjob: Obj, runtime: Obj) -> int:
    given = ((trainjob.get("spec") or {}).get("trainer") or {}).get("numNodes")
    if given is not None:
        return int(given)
    return int((((runtime.get("spec") or {}).get("mlPolicy") or {}).get("numNodes")) or 1)


# -- runtimePatches ------------------------------------------------------------------------------


def merge_meta(target: Obj, patch: Obj | None) -> None:
    for key in ("labels", "annotations"):
        if (patch or {}).get(key):
            target.setdefault(key, {}).update(patch[key])  # type: ignore[index]


def _patch_containers(current: list[Obj], patches: list[Obj]) -> None:
    for patch in patches:
        for container in current:
            if container.get("name") != patch.get("name"):
                continue
            upsert_env(container, patch.get("env") or [])
            _upsert_named(container.setdefault("volumeMounts", []), patch.get("volumeMounts") or [])
            if patch.get("securityContext"):
                container["securityContext"] = copy.deepcopy(patch["securityContext"])


def _patch_pod_spec(spec: Obj, patch: Obj) -> None:
    _patch_containers(spec.setdefault("containers", []), patch.get("containers") or [])
    _patch_containers(spec.setdefault("initContainers", []), patch.get("initContainers") or [])
    _upsert_named(spec.setdefault("volumes", []), patch.get("volumes") or [])
    if patch.get("nodeSelector"):
        spec.setdefault("nodeSelector", {}).update(patch["nodeSelector"])
    for key in ("tolerations", "schedulingGates", "imagePullSecrets"):
        if patch.get(key):
            spec.setdefault(key, []).extend(copy.deepcopy(patch[key]))
    for key in ("affinity", "securityContext", "serviceAccountName", "terminationGracePeriodSeconds"):
        if patch.get(key) is not None:
            spec[key] = copy.deepcopy(patch[key])
    for key in ("initContainers", "volumes"):
        if not spec[key]:
            del spec[key]


def apply_runtime_patches(js: Obj, patches: list[Obj]) -> None:
    """Each manager's patch in order: JobSet labels and annotations, then per replicated Job by name."""
    spec = js["spec"]
    for entry in patches:
        template = (entry.get("trainingRuntimeSpec") or {}).get("template") or {}
        merge_meta(_meta(js), template.get("metadata"))
        for rpatch in (template.get("spec") or {}).get("replicatedJobs") or []:
            for rjob in spec.get("replicatedJobs") or []:
                if rjob.get("name") != rpatch.get("name"):
                    continue
                jt = rpatch.get("template") or {}
                merge_meta(_meta(rjob.setdefault("template", {})), jt.get("metadata"))
                pt = (jt.get("spec") or {}).get("template") or {}
                pod = rjob["template"].setdefault("spec", {}).setdefault("template", {})
                merge_meta(_meta(pod), pt.get("metadata"))
                _patch_pod_spec(pod.setdefault("spec", {}), pt.get("spec") or {})


# -- the trainer and the initializers ------------------------------------------------------------


def trainer_overrides(js: Obj, trainjob: Obj, launcher_as_node: bool) -> None:
    spec_trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    for rjob in js["spec"].get("replicatedJobs") or []:
        is_trainer = ancestor(rjob) == trainer.ANCESTOR_TRAINER
        if is_trainer:
            rjob["replicas"] = 1
            for container in containers(rjob, trainer.NODE):
                for key in ("image", "command", "args"):
                    if spec_trainer.get(key) is not None:
                        container[key] = copy.deepcopy(spec_trainer[key])
                if spec_trainer.get("resourcesPerNode") is not None:
                    container["resources"] = copy.deepcopy(spec_trainer["resourcesPerNode"])
        if is_trainer or (launcher_as_node and rjob.get("name") == trainer.NODE):
            for container in containers(rjob, trainer.NODE):
                upsert_env(container, spec_trainer.get("env") or [])


def initializers(js: Obj, trainjob: Obj) -> None:
    given = (trainjob.get("spec") or {}).get("initializer") or {}
    for step, key in ((trainer.DATASET_INITIALIZER, "dataset"), (trainer.MODEL_INITIALIZER, "model")):
        source = given.get(key)
        for rjob in js["spec"].get("replicatedJobs") or []:
            if ancestor(rjob) != step:
                continue
            rjob["replicas"] = 1
            if not source:
                continue
            for container in containers(rjob, step):
                if source.get("storageUri") is not None:
                    upsert_env(container, [{"name": STORAGE_URI_ENV, "value": source["storageUri"]}])
                upsert_env(container, source.get("env") or [])
                if (source.get("secretRef") or {}).get("name"):
                    container.setdefault("envFrom", []).append({"secretRef": {"name": source["secretRef"]["name"]}})


def trainer_job(js: Obj) -> Obj | None:
    return next((r for r in js["spec"].get("replicatedJobs") or [] if ancestor(r) == trainer.ANCESTOR_TRAINER), None)


def set_count(rjob: Obj, count: int) -> None:
    spec = rjob.setdefault("template", {}).setdefault("spec", {})
    spec["parallelism"] = count
    spec["completions"] = count


def resources_per_node(trainjob: Obj, js: Obj) -> Obj:
    given = ((trainjob.get("spec") or {}).get("trainer") or {}).get("resourcesPerNode")
    if given is not None:
        return dict(given)
    rjob = trainer_job(js)
    found = containers(rjob, trainer.NODE) if rjob is not None else []
    return dict(found[0].get("resources") or {}) if found else {}
