"""The TrainJob reconciler: a pure function from a TrainJob, its runtime and its children to a plan.

Upstream's ``TrainJobReconciler`` decided without I/O, in its order:

1. a TrainJob being deleted, or managed by another controller (``spec.managedBy``), gets nothing;
2. a ``runtimeRef`` to a kind other than (Cluster)TrainingRuntime fails the TrainJob
   (``TrainingRuntimeNotSupported``); a runtime that does not exist (yet) or cannot run it is told
   in a Warning event (``TrainJobResourcesCreationFailed``) and retried: runtimes may come later;
3. while the TrainJob is not finished, its objects are built (``frameworks.trainer.build``) and
   converged: the JobSet and companions created when missing; an existing JobSet is left alone
   while both run (upstream's rule: the running gang is never rewritten) and, when either is
   suspended, gets the new ``suspend`` with the pod templates' scheduling directives; the SSH
   Secret of an MPI runtime is created once and never rewritten; in host network mode the port
   node 0 serves on is allocated first;
4. status: ``Suspended`` (True while suspended, False ``Resumed`` after), ``Complete`` / ``Failed``
   copied from the JobSet's, ``jobsStatus`` from its replicated Jobs, ``activeDeadlineSeconds``
   (from creation or the last resume) failing it with ``DeadlineExceeded`` and deleting the JobSet;
   plus trainyard's ``status.state`` for ``kubectl get`` (Pending / Running / Suspended / Complete /
   Failed). No Created or Running condition: the official SDK reports "Running" only when a
   TrainJob has no condition at all.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainyard.api import jobset, trainer
from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.controller.plan import ChildRef
from trainyard.frameworks.network import NetworkMode
from trainyard.frameworks.trainer.build import Built, Rendezvous, StatusServer, UnsupportedRuntime, build
from trainyard.frameworks.trainer.template import cluster_rendezvous
from trainyard.kit import conditions as kit_conditions
from trainyard.kit.plans import Event, EventType

PORT_KEY = "node-0/trainer"
"""Host mode: the key of the port allocated for node 0's rendezvous (in the job's host-ports annotation)."""
RETRY = timedelta(seconds=30)
"""How soon a TrainJob whose runtime is missing or broken is tried again (its watch also wakes it)."""
SSH_SECRET_TYPE = "kubernetes.io/ssh-auth"
SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


@dataclass(frozen=True)
class TrainJobObserved:
    trainjob: Obj
    runtime: Obj | None
    """The runtime ``spec.runtimeRef`` names, as read; None when it does not exist."""
    children: Mapping[tuple[str, str], Obj]
    """Objects this TrainJob controls, by (kind, name): its JobSet, ConfigMap, Secret, PodGroup."""
    now: datetime
    host_ports: Mapping[str, int] = field(default_factory=dict)
    key_pairs: Callable[[], tuple[str, str]] | None = None
    """A fresh SSH key pair (private PEM, public authorized-key line), called only when the Secret is missing."""


@dataclass(frozen=True)
class TrainJobSettings:
    network_mode: NetworkMode = NetworkMode.CLUSTER_DNS
    node_address: str = "127.0.0.1"
    status_server: StatusServer | None = None
    """Where trainer pods report progress (upstream's TrainJobStatus gate); None: not injected."""


@dataclass(frozen=True)
class TrainJobPlan:
    allocate_ports: tuple[str, ...] = ()
    apply: tuple[Obj, ...] = ()
    """Children to create (no ``resourceVersion``) or replace as read (with one)."""
    delete: tuple[ChildRef, ...] = ()
    status: Obj | None = None
    """The whole new status, only when it differs from the observed one."""
    events: tuple[Event, ...] = ()
    requeue_after: timedelta | None = None


def is_managed(trainjob: Obj) -> bool:
    return (trainjob.get("spec") or {}).get("managedBy") in (None, "", trainer.CONTROLLER_NAME)


def condition(status: Obj, type_: str) -> Obj | None:
    return next((c for c in status.get("conditions") or [] if c.get("type") == type_), None)


def is_true(status: Obj, type_: str) -> bool:
    found = condition(status, type_)
    return found is not None and found.get("status") == "True"


def finished(status: Obj) -> bool:
    return is_true(status, trainer.COMPLETE) or is_true(status, trainer.FAILED)


def set_condition(status: Obj, type_: str, value: str, reason: str, message: str, now: str) -> bool:
    """meta.SetStatusCondition (the kit's rule: the transition time moves only when the status does).
    True if anything changed."""
    conditions = status.setdefault("conditions", [])
    conditions[:], changed = kit_conditions.set_condition(conditions, type_, value, reason, message, now)
    return changed


def runtime_ref(trainjob: Obj) -> tuple[str, str, str]:
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    return (
        ref.get("apiGroup") or trainer.GROUP,
        ref.get("kind") or trainer.CLUSTER_TRAINING_RUNTIME,
        ref.get("name") or "",
    )


def rendezvous(observed: TrainJobObserved, settings: TrainJobSettings) -> Rendezvous | None:
    """Where node 0 serves; in host mode None until its port is allocated."""
    name = observed.trainjob["metadata"]["name"]
    if settings.network_mode is NetworkMode.HOST:
        port = observed.host_ports.get(PORT_KEY)
        # every pod shares the node's network: nothing to declare for a Service, and no port to clash over
        return None if port is None else Rendezvous(settings.node_address, port, declare_port=False)
    return cluster_rendezvous(name)


def reconcile(observed: TrainJobObserved, settings: TrainJobSettings) -> TrainJobPlan:
    tj = observed.trainjob
    if tj["metadata"].get("deletionTimestamp") or not is_managed(tj):
        return TrainJobPlan()
    old_status: Obj = tj.get("status") or {}
    status = copy.deepcopy(old_status)
    now = format_time(observed.now)
    spec = tj.get("spec") or {}
    suspended = bool(spec.get("suspend"))
    events: list[Event] = []
    apply: tuple[Obj, ...] = ()
    delete: tuple[ChildRef, ...] = ()
    requeue: timedelta | None = None
    group, kind, _ = runtime_ref(tj)
    if group != trainer.GROUP or kind not in (trainer.TRAINING_RUNTIME, trainer.CLUSTER_TRAINING_RUNTIME):
        message = f"unsupported runtime: {kind}.{group}"
        if set_condition(status, trainer.FAILED, "True", trainer.RUNTIME_NOT_SUPPORTED_REASON, message, now):
            events.append(Event(EventType.WARNING, trainer.RUNTIME_NOT_SUPPORTED_REASON, message))
    elif not finished(status):
        point = rendezvous(observed, settings)
        if point is None:
            return TrainJobPlan(allocate_ports=(PORT_KEY,))
        apply, problem = _converge(observed, point, settings.status_server)
        if problem:
            events.append(Event(EventType.WARNING, "TrainJobResourcesCreationFailed", problem))
            requeue = RETRY
    _suspended_condition(status, suspended, now, events)
    _from_jobset(status, observed.children.get((jobset.KIND, tj["metadata"]["name"])), now, events)
    deadline = _deadline(tj, status, observed.now, now, events)
    if isinstance(deadline, timedelta):
        requeue = deadline if requeue is None else min(requeue, deadline)
    elif deadline:
        delete = (ChildRef(jobset.KIND, tj["metadata"]["name"], jobset.API_VERSION),)
        apply = ()
    status["state"] = state(tj, status, observed.children.get((jobset.KIND, tj["metadata"]["name"])))
    return TrainJobPlan(
        apply=apply,
        delete=delete,
        status=status if status != old_status else None,
        events=tuple(events),
        requeue_after=requeue,
    )


def _converge(
    observed: TrainJobObserved, point: Rendezvous, status_server: StatusServer | None = None
) -> tuple[tuple[Obj, ...], str]:
    """The children to write, or why none can be: (objects, problem)."""
    tj = observed.trainjob
    runtime = observed.runtime
    _, kind, name = runtime_ref(tj)
    if runtime is None:
        cluster = kind == trainer.CLUSTER_TRAINING_RUNTIME
        scope = "cluster" if cluster else f"namespace {tj['metadata']['namespace']}"
        listing = (
            trainer.CLUSTER_TRAINING_RUNTIMES
            if cluster
            else f"{trainer.TRAINING_RUNTIMES} -n {tj['metadata']['namespace']}"
        )
        return (), (
            f"{kind} {name!r} does not exist in the {scope}: create it (kubectl get {listing} "
            "lists those there) or fix spec.runtimeRef"
        )
    problems = trainer.runtime_problems(tj, runtime)
    if problems:  # upstream's webhook refuses these; an admission here cannot read the runtime
        return (), f"{kind} {name!r} refuses this TrainJob: {'; '.join(str(p) for p in problems)}"
    try:
        built = build(tj, runtime, point, status_server)
    except UnsupportedRuntime as exc:
        return (), f"{kind} {name!r} cannot run this TrainJob: {exc}"
    writes = [*_jobset_write(built, observed), *_companions(built, observed)]
    return tuple(writes), ""


def _jobset_write(built: Built, observed: TrainJobObserved) -> list[Obj]:
    wanted = built.jobset
    current = observed.children.get((jobset.KIND, wanted["metadata"]["name"]))
    if current is None:
        return [wanted]
    suspend = bool(wanted["spec"].get("suspend"))
    if not suspend and not (current.get("spec") or {}).get("suspend"):
        return []
    updated = copy.deepcopy(current)
    updated["spec"]["suspend"] = suspend
    wanted_templates = {r.get("name"): r for r in wanted["spec"].get("replicatedJobs") or []}
    for rjob in updated["spec"].get("replicatedJobs") or []:
        source = wanted_templates.get(rjob.get("name"))
        if source is None:
            continue
        pod = rjob["template"]["spec"]["template"]
        want = source["template"]["spec"]["template"]
        for key in ("labels", "annotations"):
            if (want.get("metadata") or {}).get(key) is not None:
                pod.setdefault("metadata", {})[key] = copy.deepcopy(want["metadata"][key])
        for key in SCHEDULING_DIRECTIVES:
            if (want.get("spec") or {}).get(key) is not None:
                pod.setdefault("spec", {})[key] = copy.deepcopy(want["spec"][key])
    return [] if updated == current else [updated]


def _companions(built: Built, observed: TrainJobObserved) -> list[Obj]:
    writes: list[Obj] = []
    for obj in built.companions:
        current = observed.children.get((obj["kind"], obj["metadata"]["name"]))
        if current is None:
            writes.append(obj)
        elif obj["kind"] == "ConfigMap" and current.get("data") != obj.get("data"):
            writes.append({**current, "data": obj["data"]})
    if built.ssh_secret and ("Secret", built.ssh_secret) not in observed.children:
        if observed.key_pairs is None:
            raise RuntimeError("this pass was given no SSH key source (TrainJobObserved.key_pairs)")
        private, public = observed.key_pairs()
        writes.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": built.ssh_secret},
                "type": SSH_SECRET_TYPE,
                "immutable": True,
                "stringData": {"ssh-privatekey": private, "ssh-publickey": public},
            }
        )
    return writes


def _suspended_condition(status: Obj, suspended: bool, now: str, events: list[Event]) -> None:
    if suspended:
        if set_condition(status, trainer.SUSPENDED, "True", trainer.SUSPENDED_REASON, trainer.SUSPENDED_MESSAGE, now):
            events.append(Event(EventType.NORMAL, trainer.SUSPENDED_REASON, trainer.SUSPENDED_MESSAGE))
    elif is_true(status, trainer.SUSPENDED):
        set_condition(status, trainer.SUSPENDED, "False", trainer.RESUMED_REASON, trainer.RESUMED_MESSAGE, now)
        events.append(Event(EventType.NORMAL, trainer.RESUMED_REASON, trainer.RESUMED_MESSAGE))


def _from_jobset(status: Obj, js: Obj | None, now: str, events: list[Event]) -> None:
    if js is None:
        return
    js_status = js.get("status") or {}
    for source, target in (("Completed", trainer.COMPLETE), ("Failed", trainer.FAILED)):
        found = condition(js_status, source)
        if found is None or found.get("status") != "True" or finished(status):
            continue
        reason = found.get("reason") or source
        message = found.get("message") or ""
        set_condition(status, target, "True", reason, message, found.get("lastTransitionTime") or now)
        kind = EventType.NORMAL if target == trainer.COMPLETE else EventType.WARNING
        events.append(Event(kind, f"TrainJob{target}", message or f"TrainJob {target.lower()}"))
    rows = [
        {
            "name": row.get("name", ""),
            **{key: int(row.get(key) or 0) for key in ("ready", "succeeded", "failed", "active", "suspended")},
        }
        for row in js_status.get("replicatedJobsStatus") or []
    ]
    if rows or "jobsStatus" in status:
        status["jobsStatus"] = rows


def _deadline(tj: Obj, status: Obj, now: datetime, stamp: str, events: list[Event]) -> timedelta | bool:
    """False: no deadline applies; True: it passed (the TrainJob just failed); else the time left."""
    seconds = (tj.get("spec") or {}).get("activeDeadlineSeconds")
    if not seconds or finished(status) or (tj.get("spec") or {}).get("suspend"):
        return False
    start = tj["metadata"].get("creationTimestamp")
    resumed = condition(status, trainer.SUSPENDED)
    if resumed is not None and resumed.get("status") == "False":
        start = resumed.get("lastTransitionTime") or start
    if not start:
        return False
    left = parse_time(start) + timedelta(seconds=int(seconds)) - now
    if left > timedelta(0):
        return left
    message = trainer.DEADLINE_EXCEEDED_MESSAGE
    set_condition(status, trainer.FAILED, "True", trainer.DEADLINE_EXCEEDED_REASON, message, stamp)
    events.append(Event(EventType.WARNING, trainer.DEADLINE_EXCEEDED_REASON, message))
    return True


def state(tj: Obj, status: Obj, js: Obj | None) -> str:
    """What ``kubectl get trainjobs`` shows: a terminal condition, else Suspended, Running or Pending."""
    if is_true(status, trainer.FAILED):
        return "Failed"
    if is_true(status, trainer.COMPLETE):
        return "Complete"
    if (tj.get("spec") or {}).get("suspend"):
        return "Suspended"
    if js is None:
        return "Pending"
    rows = {row.get("name"): row for row in (js.get("status") or {}).get("replicatedJobsStatus") or []}
    trainers = [
        r
        for r in (js.get("spec") or {}).get("replicatedJobs") or []
        if ((r.get("template") or {}).get("metadata") or {}).get("labels", {}).get(trainer.ANCESTOR_LABEL)
        == trainer.ANCESTOR_TRAINER
    ]
    for rjob in trainers:
        row = rows.get(rjob.get("name")) or {}
        if int(row.get("ready") or 0) + int(row.get("succeeded") or 0) >= int(rjob.get("replicas") or 1):
            return "Running"
    return "Pending"
