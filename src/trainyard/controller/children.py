"""The pods and Services a job should own: names, labels, env, owner references (reference §4)."""

from __future__ import annotations

import json
from collections.abc import Iterable

from trainyard.api import conditions, labels
from trainyard.api.common import TrainingJob
from trainyard.api.core import (
    Container,
    ContainerPort,
    Pod,
    PodPhase,
    RestartPolicy,
    Service,
    ServicePort,
    ServiceSpec,
)
from trainyard.api.defaults import deep_copy
from trainyard.api.meta import ObjectMeta, OwnerReference, TypedObject
from trainyard.frameworks.base import ChildKind, EnvScope, Framework
from trainyard.frameworks.network import RENDEZVOUS_PORT_KEY, Network, NetworkMode, port_key, replica_name

POD = ChildKind("v1", "Pod", "pods")
SERVICE = ChildKind("v1", "Service", "services")
REPLICA_KINDS = (POD, SERVICE)
"""The kinds of a job's replicas: read by the job's labels, created per replica index."""


def owner_reference(job: TrainingJob) -> OwnerReference:
    return OwnerReference(
        api_version=job.api_version or "",
        kind=job.kind or "",
        name=job.name,
        uid=job.metadata.uid or "",
        controller=True,
        block_owner_deletion=True,
    )


def is_owned(child: TypedObject, job: TrainingJob) -> bool:
    """Only children whose *controller* reference is this job's uid count (a recreated job is new)."""
    return any(ref.controller and ref.uid == job.metadata.uid for ref in child.metadata.owner_references or [])


def is_rendezvous(child: TypedObject) -> bool:
    """A job's rendezvous host (``rendezvous.py``): owned by the job, but no replica of it."""
    return labels.RENDEZVOUS in (child.metadata.labels or {})


def replica_index(child: TypedObject) -> int | None:
    raw = (child.metadata.labels or {}).get(labels.REPLICA_INDEX, "")
    return int(raw) if raw.isdigit() else None


def replica_type_of(child: TypedObject, plugin: Framework) -> str | None:
    raw = (child.metadata.labels or {}).get(labels.REPLICA_TYPE, "")
    return next((t for t in plugin.info.replica_types if t.lower() == raw), None)


def selector_labels(job: TrainingJob, plugin: Framework, replica_type: str | None = None) -> dict[str, str]:
    out = {labels.OPERATOR_NAME: plugin.info.controller_name, labels.JOB_NAME: job.name}
    if replica_type is not None:
        out[labels.REPLICA_TYPE] = replica_type.lower()
    return out


def selector_string(job: TrainingJob, plugin: Framework, replica_type: str) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(job, plugin, replica_type).items()))


def default_container(containers: list[Container], plugin: Framework) -> int:
    return next((i for i, c in enumerate(containers) if c.name == plugin.info.default_container), 0)


def port_name(port: ContainerPort) -> str:
    return port.name or str(port.container_port)


def required_port_keys(job: TrainingJob, plugin: Framework) -> list[str]:
    """Host mode: one allocated port per (replica, declared port of its default container)."""
    keys = []
    for rtype, spec in job.replica_specs.items():
        containers = spec.template.spec.containers
        if not containers:
            continue
        ports = containers[default_container(containers, plugin)].ports or []
        for index in range(spec.replicas or 0):
            keys += [port_key(rtype, index, port_name(p)) for p in ports]
    rendezvous = plugin.rendezvous_host(job)
    if rendezvous is not None and rendezvous.allocate:
        keys.append(RENDEZVOUS_PORT_KEY)
    return keys


def allocated_ports(job: TrainingJob) -> dict[str, int]:
    raw = (job.metadata.annotations or {}).get(labels.HOST_PORTS)
    if not raw:
        return {}
    try:
        parsed = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(parsed, dict):
        return {}
    return {str(k): v for k, v in parsed.items() if isinstance(v, int)}


def held_ports(job: TrainingJob, pods: Iterable[Pod]) -> dict[str, int]:
    """The host ports a job keeps from other jobs: those its annotation records, until it has
    finished and none of its replicas can run again (every pod of it Succeeded or Failed, or gone).

    A finished job's pod may still run (cleanPodPolicy None lets workers finish on their own, and
    a container restarts as its pod's policy says) and bind its port. Finished jobs that kept
    theirs exhausted the default range at 6,384 two-replica jobs; the annotation still records
    them."""
    if conditions.is_finished(job.status) and all(p.phase in _ENDED for p in pods):
        return {}
    return allocated_ports(job)


_ENDED = frozenset({PodPhase.SUCCEEDED, PodPhase.FAILED})


def build_pod(job: TrainingJob, plugin: Framework, rtype: str, index: int, network: Network) -> Pod:
    spec = job.replica_specs[rtype]
    template = deep_copy(spec.template)
    name = replica_name(job.name, rtype, index)
    pod_labels = {**(template.metadata.labels or {}), **selector_labels(job, plugin, rtype)}
    pod_labels[labels.REPLICA_INDEX] = str(index)
    if plugin.is_master_role(job, rtype, index):
        pod_labels[labels.JOB_ROLE] = "master"
    env = list(plugin.env(job, rtype, index, network))
    containers = list(template.spec.containers)
    targets = range(len(containers))
    if plugin.env_scope is EnvScope.DEFAULT_CONTAINER:
        named = [i for i, c in enumerate(containers) if c.name == plugin.info.default_container]
        targets = range(named[0], named[0] + 1) if named else range(0)
    elif plugin.env_scope is EnvScope.FIRST_CONTAINER:
        targets = range(min(len(containers), 1))
    for i in targets:
        containers[i] = containers[i].model_copy(update={"env": [*(containers[i].env or []), *env]})
    restart = RestartPolicy.NEVER.value if spec.restart_policy == RestartPolicy.EXIT_CODE else spec.restart_policy
    update: dict[str, object] = {"containers": containers, "restart_policy": restart}
    waits = list(plugin.init_containers(job, rtype, index, network))
    if waits:
        update["init_containers"] = [*(template.spec.init_containers or []), *waits]
    if network.mode is NetworkMode.HOST and containers:
        main = default_container(containers, plugin)
        ports = [
            p.model_copy(update={"container_port": network.port(rtype, index, port_name(p), p.container_port)})
            for p in containers[main].ports or []
        ]
        containers[main] = containers[main].model_copy(update={"ports": ports})
        update |= {"host_network": True, "dns_policy": "ClusterFirstWithHostNet"}
    return Pod(
        api_version="v1",
        kind="Pod",
        metadata=ObjectMeta(
            name=name,
            namespace=job.namespace,
            labels=pod_labels,
            annotations=template.metadata.annotations,
            owner_references=[owner_reference(job)],
        ),
        spec=template.spec.model_copy(update=update),
    )


def build_service(pod: Pod, plugin: Framework) -> Service:
    """One headless Service per replica, same name as its pod, selecting exactly that pod.

    Its labels are the four operator labels only, as upstream: the template's labels (and the
    pod's ``job-role``) stay on the pod.
    """
    pod_labels = pod.metadata.labels or {}
    selector = {
        k: pod_labels[k] for k in (labels.OPERATOR_NAME, labels.JOB_NAME, labels.REPLICA_TYPE, labels.REPLICA_INDEX)
    }
    containers = pod.spec.containers
    ports = containers[default_container(containers, plugin)].ports or [] if containers else []
    return headless_service(pod, selector, [(p.name, p.container_port) for p in ports])


def headless_service(pod: Pod, selector: dict[str, str], ports: Iterable[tuple[str | None, int]]) -> Service:
    """A headless Service named and owned like ``pod``, labelled and selecting by ``selector``."""
    return Service(
        api_version="v1",
        kind="Service",
        metadata=ObjectMeta(
            name=pod.metadata.name,
            namespace=pod.metadata.namespace,
            labels=dict(selector),
            owner_references=pod.metadata.owner_references,
        ),
        spec=ServiceSpec(
            cluster_ip="None",
            selector=dict(selector),
            ports=[ServicePort(name=name, port=port, target_port=port, protocol="TCP") for name, port in ports],
        ),
    )


def names(objects: Iterable[TypedObject]) -> set[str]:
    return {o.name for o in objects}
