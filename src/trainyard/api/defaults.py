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

J = TypeVar("J", bound=TrainingJob)


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


def _default_ports(template: PodTemplateSpec, info: KindInfo) -> PodTemplateSpec:
    containers = list(template.spec.containers)
    if not containers:
        return template
    index = next((i for i, c in enumerate(containers) if c.name == info.default_container), 0)
    target = containers[index]
    ports = list(target.ports or [])
    if any(p.name == info.default_port_name for p in ports):
        return template
    ports.append(ContainerPort(name=info.default_port_name, container_port=info.default_port))
    containers[index] = target.model_copy(update={"ports": ports})
    spec = template.spec.model_copy(update={"containers": containers})
    return template.model_copy(update={"spec": spec})


def _default_replica(rtype: str, spec: ReplicaSpec, info: KindInfo) -> ReplicaSpec:
    restart = info.restart_policies.get(rtype, info.default_restart_policy)
    return spec.model_copy(
        update={
            "replicas": info.default_replicas.get(rtype, 1) if spec.replicas is None else spec.replicas,
            "restart_policy": spec.restart_policy or restart.value,
            "template": _default_ports(spec.template, info) if info.default_port_name else spec.template,
        }
    )


def apply_defaults(job: J, info: KindInfo) -> J:
    """Return a defaulted deep copy of ``job``."""
    job = job.model_copy(deep=True)
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
