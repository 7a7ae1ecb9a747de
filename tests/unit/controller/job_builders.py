"""Small builders for the reconciler tests: a PyTorchJob as a user writes it, and its children as
the API server would return them.

Pods and Services carry the upstream labels and the controller owner reference exactly as
``trainyard.controller.children`` writes them, spelled out here rather than imported so that the
tests check the real builders against an independent statement of the contract.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from trainyard.api import Pod, PyTorchJob, Service
from trainyard.api.defaults import apply_defaults
from trainyard.controller import ChildRef, ControllerSettings, Observed, Plan, reconcile
from trainyard.frameworks.network import NetworkMode
from trainyard.frameworks.registry import plugin_for

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NAME = "mnist"
NAMESPACE = "team-a"
UID = "9a3e61c4-uid-of-mnist"
OTHER_UID = "5b27d0f8-uid-of-an-older-mnist"

OPERATOR_NAME = "training.kubeflow.org/operator-name"
JOB_NAME = "training.kubeflow.org/job-name"
REPLICA_TYPE = "training.kubeflow.org/replica-type"
REPLICA_INDEX = "training.kubeflow.org/replica-index"
JOB_ROLE = "training.kubeflow.org/job-role"
HOST_PORTS = "trainyard.dev/host-ports"

PLUGIN = plugin_for("PyTorchJob")
HOST = ControllerSettings(network_mode=NetworkMode.HOST, node_address="127.0.0.1")
DNS = ControllerSettings(network_mode=NetworkMode.CLUSTER_DNS)

MASTER_HOST_PORT = 30000
"""Host port ``job(ports=True)`` records for master-0; worker-i gets ``WORKER_HOST_PORT + i``."""
WORKER_HOST_PORT = 30100

_UIDS = itertools.count(1)


def template(
    *,
    env: Sequence[dict[str, Any]] = (),
    container: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod template with one ``pytorch`` container; ``container``/``spec`` add fields to it."""
    main: dict[str, Any] = {"name": "pytorch", "image": "docker.io/kubeflowkatib/pytorch-mnist:v1beta1"}
    main["command"] = ["python3", "/opt/pytorch-mnist/mnist.py", "--epochs=1"]
    if env:
        main["env"] = list(env)
    main |= container or {}
    out: dict[str, Any] = {"spec": {"containers": [main], **(spec or {})}}
    if metadata:
        out["metadata"] = metadata
    return out


def host_ports(master: int, workers: int) -> dict[str, int]:
    ports = {f"worker-{i}/pytorchjob-port": WORKER_HOST_PORT + i for i in range(workers)}
    if master:
        ports["master-0/pytorchjob-port"] = MASTER_HOST_PORT
    return ports


def job(
    master: int = 1,
    workers: int = 2,
    *,
    restart: str | None = "OnFailure",
    clean: str | None = None,
    ports: bool = False,
    name: str = NAME,
    uid: str = UID,
    tmpl: dict[str, Any] | None = None,
    status: dict[str, Any] | None = None,
    deleting: bool = False,
    extra_spec: dict[str, Any] | None = None,
    scope: str | None = "Replica",
) -> PyTorchJob:
    """A PyTorchJob as written by a user (no explicit Master replicas, nothing defaulted).

    ``master=0`` or ``workers=0`` leaves that replica type out; ``ports=True`` records the host
    ports the operator allocated (annotation ``trainyard.dev/host-ports``). ``scope`` is
    ``runPolicy.restartScope``: upstream's per-replica restarts unless a test is about the
    whole-gang restart (``None``: the field is left out, so the gang default applies).
    """
    specs: dict[str, Any] = {}
    for rtype, count in (("Master", master), ("Worker", workers)):
        if not count:
            continue
        spec: dict[str, Any] = {"template": tmpl or template()}
        if rtype == "Worker":
            spec["replicas"] = count
        if restart is not None:
            spec["restartPolicy"] = restart
        specs[rtype] = spec
    body: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "creationTimestamp": "2025-12-31T23:59:00Z"},
        "spec": {"pytorchReplicaSpecs": specs, **(extra_spec or {})},
    }
    run_policy = dict(body["spec"].get("runPolicy") or {})
    if clean is not None:
        run_policy["cleanPodPolicy"] = clean
    if scope is not None:
        run_policy.setdefault("restartScope", scope)
    if run_policy:
        body["spec"]["runPolicy"] = run_policy
    if ports:
        body["metadata"]["annotations"] = {HOST_PORTS: json.dumps(host_ports(master, workers))}
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        body["metadata"]["finalizers"] = ["example.com/hold"]
    if status is not None:
        body["status"] = status
    return PyTorchJob.model_validate(body)


def replica_name(owner: PyTorchJob, rtype: str, index: int) -> str:
    return f"{owner.name}-{rtype.lower()}-{index}"


def child_labels(owner: PyTorchJob, rtype: str, index: int) -> dict[str, str]:
    return {
        OPERATOR_NAME: "pytorchjob-controller",
        JOB_NAME: owner.name,
        REPLICA_TYPE: rtype.lower(),
        REPLICA_INDEX: str(index),
    }


def owner_references(owner: PyTorchJob, uid: str | None = None) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": owner.name,
            "uid": uid or owner.metadata.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]


def pod(
    owner: PyTorchJob,
    rtype: str,
    index: int,
    *,
    phase: str | None = "Running",
    exit_code: int | None = None,
    deleting: bool = False,
    uid: str | None = None,
) -> Pod:
    """A pod of ``owner`` as the API server returns it once the kubelet reported ``phase``."""
    pod_labels = child_labels(owner, rtype, index)
    is_master = rtype == "Master" or ("Master" not in owner.replica_specs and index == 0)
    if is_master:
        pod_labels[JOB_ROLE] = "master"
    metadata: dict[str, Any] = {
        "name": replica_name(owner, rtype, index),
        "namespace": NAMESPACE,
        "uid": f"pod-{rtype.lower()}-{index}",
        "labels": pod_labels,
        "ownerReferences": owner_references(owner, uid),
    }
    if deleting:
        metadata["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if exit_code is not None:
        terminated = {"exitCode": exit_code, "reason": "Error" if exit_code else "Completed"}
        status["containerStatuses"] = [{"name": "pytorch", "state": {"terminated": terminated}}]
    return Pod.model_validate(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"containers": [{"name": "pytorch", "image": "busybox"}]},
            "status": status,
        }
    )


def service(owner: PyTorchJob, rtype: str, index: int, *, uid: str | None = None) -> Service:
    selector = child_labels(owner, rtype, index)
    return Service.model_validate(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {
                "name": replica_name(owner, rtype, index),
                "namespace": NAMESPACE,
                "labels": dict(selector),
                "ownerReferences": owner_references(owner, uid),
            },
            "spec": {"clusterIP": "None", "selector": selector, "ports": [{"name": "pytorchjob-port", "port": 23456}]},
        }
    )


def replicas(owner: PyTorchJob, phases: dict[str, Sequence[str | None]]) -> tuple[tuple[Pod, ...], tuple[Service, ...]]:
    """Pods with the given phases per replica type, each with its Service."""
    pods = tuple(pod(owner, rtype, i, phase=p) for rtype, ps in phases.items() for i, p in enumerate(ps))
    services = tuple(service(owner, rtype, i) for rtype, ps in phases.items() for i in range(len(ps)))
    return pods, services


def observe(
    owner: PyTorchJob, pods: Iterable[Pod] = (), services: Iterable[Service] = (), *, now: datetime = NOW
) -> Observed:
    return Observed(owner, tuple(pods), tuple(services), now)


def run(
    owner: PyTorchJob,
    pods: Iterable[Pod] = (),
    services: Iterable[Service] = (),
    *,
    settings: ControllerSettings = DNS,
    now: datetime = NOW,
) -> Plan:
    return reconciled(observe(owner, pods, services, now=now), settings=settings)


def reconciled(observed: Observed, *, plugin: Any = PLUGIN, settings: ControllerSettings = DNS) -> Plan:
    """``reconcile``'s plan, after checking it left what it observed as it was: the operator shares one
    model of each cached version between passes (``Informer.parsed``), so a pass may change none."""
    if observed.defaulted is None:  # as the operator hands it over: shared between passes too
        observed = dataclasses.replace(observed, defaulted=apply_defaults(observed.job, plugin.info))
    seen = (observed.job, *observed.pods, *observed.services, *observed.other_children, observed.defaulted)
    before = [m.model_dump(mode="json") for m in seen if m is not None]
    plan = reconcile(observed, plugin, settings)
    assert [m.model_dump(mode="json") for m in seen if m is not None] == before, "reconcile changed what it observed"
    return plan


# -- applying a plan the way the API server would ------------------------------------------------------


@dataclass(frozen=True)
class World:
    """What the API server holds for one job: the job (status included) and its children."""

    job: PyTorchJob
    pods: tuple[Pod, ...] = ()
    services: tuple[Service, ...] = ()


def apply(world: World, plan: Plan, *, phase: str = "Pending") -> World:
    """The state after the operator applied ``plan``: deletes, creates (pods get ``phase``), status.

    Everything goes through its JSON form, as it does through the API server.
    """
    deleted = set(plan.delete)
    body = world.job.to_dict()
    if plan.status is not None:
        body["status"] = plan.status.to_dict()
    pods = [p for p in world.pods if ChildRef("Pod", p.name) not in deleted]
    services = [s for s in world.services if ChildRef("Service", s.name) not in deleted]
    for obj in plan.create:
        raw = obj.to_dict()
        # The API server gives every new object a fresh uid; restart bookkeeping keys on it.
        raw["metadata"]["uid"] = f"{obj.name}-{next(_UIDS)}"
        if obj.kind == "Pod":
            raw["status"] = {"phase": phase}
            pods.append(Pod.model_validate(raw))
        else:
            services.append(Service.model_validate(raw))
    return World(PyTorchJob.model_validate(body), tuple(pods), tuple(services))


def set_phase(world: World, phase: str, *names: str) -> World:
    """Pods named ``names`` (all when none) moved to ``phase`` by the kubelet."""
    pods = tuple(
        Pod.model_validate({**p.to_dict(), "status": {"phase": phase}}) if not names or p.name in names else p
        for p in world.pods
    )
    return World(world.job, pods, world.services)


def run_world(world: World, *, settings: ControllerSettings = DNS, now: datetime = NOW) -> Plan:
    return run(world.job, world.pods, world.services, settings=settings, now=now)


def with_host_ports(owner: PyTorchJob, ports: dict[str, int]) -> PyTorchJob:
    """``owner`` after the operator recorded ``ports`` in its host-ports annotation."""
    body = owner.to_dict()
    body["metadata"].setdefault("annotations", {})[HOST_PORTS] = json.dumps(ports, sort_keys=True)
    return PyTorchJob.model_validate(body)


def condition(ctype: str, status: str = "True", *, at: str = "2025-12-31T23:59:30Z") -> dict[str, Any]:
    """A stored condition with the reason and message the reconciler writes."""
    messages = {
        "Created": f"PyTorchJob {NAME} is created.",
        "Running": f"PyTorchJob {NAME} is running.",
        "Restarting": f"PyTorchJob {NAME} is restarting because 1 Worker replica(s) failed.",
        "Succeeded": f"PyTorchJob {NAME} is successfully completed.",
        "Failed": f"PyTorchJob {NAME} is failed because 1 Worker replica(s) failed.",
        "Suspended": f"PyTorchJob {NAME} is suspended.",
    }
    return {
        "type": ctype,
        "status": status,
        "reason": f"PyTorchJob{ctype}",
        "message": messages[ctype],
        "lastUpdateTime": at,
        "lastTransitionTime": at,
    }


def stored_status(*conditions: str, start: str = "2025-12-31T23:59:30Z", **extra: Any) -> dict[str, Any]:
    """A status as an earlier pass wrote it: ``"Running"`` or ``"Running=False"`` per condition."""
    conds = []
    for spec in conditions:
        ctype, _, value = spec.partition("=")
        conds.append(condition(ctype, value or "True"))
    return {"conditions": conds, "startTime": start, **extra}


def env_of(obj: Pod, container: int = 0) -> dict[str, str | None]:
    return {e.name: e.value for e in obj.spec.containers[container].env or []}


def env_names(obj: Pod, container: int = 0) -> list[str]:
    return [e.name for e in obj.spec.containers[container].env or []]


def created(plan: Plan, kind: str) -> dict[str, Any]:
    """Objects of ``kind`` the plan creates, by name."""
    return {o.name: o for o in plan.create if o.kind == kind}


def owned_written(plan: Plan, kind: str) -> Any:
    """The owned child of ``kind`` the plan creates or replaces (PodGroup, HPA), or None."""
    found = [o for o in plan.apply if o.kind == kind]
    assert len(found) <= 1, found
    return found[0] if found else None


def owned_deleted(plan: Plan, kind: str) -> str | None:
    """The name of the owned child of ``kind`` the plan deletes, or None."""
    found = [r.name for r in plan.delete if r.kind == kind]
    assert len(found) <= 1, found
    return found[0] if found else None
