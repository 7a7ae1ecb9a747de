"""In-memory defaulting of a job, as upstream's ``SetDefaults_*`` (kubeflow-v1 reference §1.2).

The defaults every kind shares are here; a kind's own come from its ``KindInfo.set_defaults``.
Like upstream, defaults are never written back to ``.spec``; the controller applies them on
every pass, so ``kubectl get -o yaml`` shows what the user wrote.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from trainyard.api.common import CleanPodPolicy, ReplicaSpec, TrainingJob
from trainyard.api.core import ContainerPort, PodTemplateSpec
from trainyard.api.kindinfo import KindInfo
from trainyard.api.meta import K8sModel

J = TypeVar("J", bound=TrainingJob)
M = TypeVar("M", bound=K8sModel)


class ReplicaBounds(Protocol):
    min_replicas: int | None
    max_replicas: int | None


def default_bounds(policy: ReplicaBounds, workers: ReplicaSpec | None) -> None:
    """An ``elasticPolicy``'s min/max as upstream defaults them: one from the other, else the Worker count.

    (PyTorchJob's and PaddleJob's alike; a missing Worker counts as one, where upstream crashes.)
    """
    if policy.min_replicas is None and policy.max_replicas is None:
        count = workers.replicas if workers and workers.replicas is not None else 1
        policy.min_replicas = policy.max_replicas = count
    elif policy.min_replicas is None:
        policy.min_replicas = policy.max_replicas
    elif policy.max_replicas is None:
        policy.max_replicas = policy.min_replicas


def canonical_replica_type(name: str, info: KindInfo) -> str:
    """``worker`` → ``Worker``; unknown names are returned unchanged (validation rejects them)."""
    return next((t for t in info.replica_types if t.lower() == name.lower()), name)


def _default_ports(template: PodTemplateSpec, info: KindInfo) -> None:
    containers = template.spec.containers
    if not containers:
        return
    target = next((c for c in containers if c.name == info.default_container), containers[0])
    ports = list(target.ports or [])
    if any(p.name == info.default_port_name for p in ports):
        return
    ports.append(ContainerPort(name=info.default_port_name, container_port=info.default_port))
    target.ports = ports


def _default_replica(rtype: str, spec: ReplicaSpec, info: KindInfo) -> ReplicaSpec:
    if spec.replicas is None:
        spec.replicas = info.default_replicas.get(rtype, 1)
    if not spec.restart_policy:
        spec.restart_policy = info.restart_policies.get(rtype, info.default_restart_policy).value
    if info.default_port_name:
        _default_ports(spec.template, info)
    return spec


def deep_copy(model: M) -> M:
    """A deep copy of ``model``: what it holds (set fields only, extras too) validated anew.

    The same copy ``model_copy(deep=True)`` makes, built by pydantic's core instead of a Python
    ``__deepcopy__`` per nested model: a third of the time, and the operator copies each job on
    every pass.
    """
    return type(model).model_validate(model.model_dump(by_alias=True, exclude_unset=True))


def apply_defaults(job: J, info: KindInfo) -> J:
    """Return a defaulted deep copy of ``job`` (defaulted in place: the copy is this function's own)."""
    job = deep_copy(job)
    specs = {
        (rtype := canonical_replica_type(name, info)): _default_replica(rtype, spec, info)
        for name, spec in job.replica_specs.items()
    }
    job.replica_specs.clear()
    job.replica_specs.update(specs)
    if job.run_policy.clean_pod_policy is None:
        job.run_policy.clean_pod_policy = CleanPodPolicy.NONE
    info.set_defaults(job)
    return job
