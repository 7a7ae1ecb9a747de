"""A job's rendezvous host: a small owned pod that keeps the rendezvous alive while replicas come and go.

An elastic PyTorchJob's agents meet in a c10d store. Upstream points them all at worker-0, whose
agent then hosts the store (in host network mode, whichever agent binds the port first does), so
deleting that one pod takes the rendezvous with it and the survivors wait forever. When the
plugin asks for one (``Framework.rendezvous_host``), the job gets instead:

* a pod ``<job>-rdzv`` running the plugin's command (a TCPStore server) in the image of a replica
  type's default container, with that template's scheduling fields (node selector, tolerations,
  pull secrets, service account, security context, priority class), ``restartPolicy: Always``,
  the job as controller owner and the labels ``operator-name``, ``job-name`` and
  ``trainyard.dev/rendezvous`` (no replica type or index: it is not counted in
  ``replicaStatuses`` nor by the success rules, and restarts ignore it);
* in ``cluster-dns`` mode a headless Service of the same name; in ``host`` mode the pod shares the
  node's network on a port the operator allocates (``rdzv/c10d`` in the host-ports annotation).

``host`` runs after the rest of the pass and amends its plan: it creates what is missing while
the job runs, replaces a pod that ended (Failed or Succeeded: it should never end), and deletes
both once the job is suspended or no longer wants a host, or is finished and none of its replica
pods still runs (elastic jobs succeed when one Worker does: the others' agents still use the
store in torchrun's exit barrier, or to learn that the rendezvous closed).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainyard.api import conditions, labels
from trainyard.api.common import TrainingJob
from trainyard.api.core import Container, Pod, PodPhase, Service
from trainyard.api.meta import ObjectMeta
from trainyard.controller.children import (
    allocated_ports,
    default_container,
    headless_service,
    is_owned,
    is_rendezvous,
    owner_reference,
)
from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, Plan
from trainyard.frameworks.base import Framework, RendezvousHost
from trainyard.frameworks.network import Network, NetworkMode, rendezvous_name

# Pod-level fields of the replica template the host keeps, so it can be placed and pulled where
# the replicas can (volumes and containers are the replicas' own business).
_TEMPLATE_FIELDS = (
    "imagePullSecrets",
    "nodeSelector",
    "tolerations",
    "affinity",
    "serviceAccountName",
    "securityContext",
    "priorityClassName",
)
_RESOURCES = {"requests": {"cpu": "50m", "memory": "256Mi"}}


def host(observed: Observed, job: TrainingJob, plugin: Framework, settings: ControllerSettings, plan: Plan) -> Plan:
    """``plan`` (the rest of the pass) amended for the (defaulted) job's rendezvous host.

    Only for jobs this operator manages and that are not being deleted (``reconcile`` sees to it).
    """
    pods = [p for p in observed.pods if is_owned(p, job) and is_rendezvous(p)]
    services = [s for s in observed.services if is_owned(s, job) and is_rendezvous(s)]
    wanted = plugin.rendezvous_host(job)
    status = plan.status or observed.job.status
    finished = conditions.is_finished(status)
    if finished and wanted is not None and not job.run_policy.suspend and _replicas_running(observed, job):
        # Agents still finishing (the exit barrier) or waiting (closed rendezvous) talk to the
        # store: without it they fail, and restartPolicy restarts them against nothing.
        return plan
    if wanted is None or job.run_policy.suspend or finished or plan.delete_job:
        gone = [ChildRef("Pod", p.name) for p in pods if p.metadata.deletion_timestamp is None]
        gone += [ChildRef("Service", s.name) for s in services if s.metadata.deletion_timestamp is None]
        return dataclasses.replace(plan, delete=(*plan.delete, *gone)) if gone else plan

    network = Network(settings.network_mode, allocated_ports(job), settings.node_address)
    port = network.rendezvous_port(wanted.port) if wanted.allocate else wanted.port
    if port is None:  # host mode, port not allocated yet: this pass asked for it (children.required_port_keys)
        return plan
    pod = build_pod(job, plugin, wanted, network, port)
    ended = (PodPhase.FAILED, PodPhase.SUCCEEDED)
    deletes = [
        ChildRef("Pod", p.name)
        for p in pods
        if p.metadata.deletion_timestamp is None and (p.phase in ended or p.name != pod.name)
    ]
    creates: list[Pod | Service] = []
    if not any(p.name == pod.name for p in pods):
        creates.append(pod)
    if network.mode is NetworkMode.CLUSTER_DNS and not any(s.name == pod.name for s in services):
        creates.append(build_service(pod, wanted, port))
    if not deletes and not creates:
        return plan
    return dataclasses.replace(plan, delete=(*plan.delete, *deletes), create=(*plan.create, *creates))


def _replicas_running(observed: Observed, job: TrainingJob) -> bool:
    return any(
        is_owned(p, job) and not is_rendezvous(p) and p.phase in (PodPhase.PENDING, PodPhase.RUNNING)
        for p in observed.pods
    )


def selector(job: TrainingJob, plugin: Framework) -> dict[str, str]:
    return {
        labels.OPERATOR_NAME: plugin.info.controller_name,
        labels.JOB_NAME: job.name,
        labels.RENDEZVOUS: "c10d",
    }


def build_pod(job: TrainingJob, plugin: Framework, wanted: RendezvousHost, network: Network, port: int) -> Pod:
    template = job.replica_specs[wanted.replica_type].template
    containers = template.spec.containers
    main = containers[default_container(containers, plugin)] if containers else None
    container: dict[str, Any] = {
        "name": wanted.container_name,
        "command": [*wanted.command, str(port)],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}],
        "ports": [{"name": wanted.port_name, "containerPort": port, "protocol": "TCP"}],
        "resources": _RESOURCES,
    }
    if main is not None and main.image:
        container["image"] = main.image
    if main is not None and (pull := (main.model_extra or {}).get("imagePullPolicy")):
        container["imagePullPolicy"] = pull
    extra = template.spec.model_extra or {}
    spec: dict[str, Any] = {k: extra[k] for k in _TEMPLATE_FIELDS if extra.get(k) is not None}
    spec |= {
        "containers": [Container.model_validate(container).to_dict()],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 5,
    }
    if network.mode is NetworkMode.HOST:
        spec |= {"hostNetwork": True, "dnsPolicy": "ClusterFirstWithHostNet"}
    return Pod.model_validate(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": ObjectMeta(
                name=rendezvous_name(job.name),
                namespace=job.namespace,
                labels=selector(job, plugin),
                owner_references=[owner_reference(job)],
            ).to_dict(),
            "spec": spec,
        }
    )


def build_service(pod: Pod, wanted: RendezvousHost, port: int) -> Service:
    """Headless, same name as the pod, selecting exactly it (cluster-dns mode)."""
    return headless_service(pod, dict(pod.metadata.labels or {}), [(wanted.port_name, port)])
