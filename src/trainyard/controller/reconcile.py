"""The reconciler: a pure function from what is observed to what should be done.

``reconcile(observed, plugin, settings) -> Plan`` reads the job, the pods and Services it owns
and the clock, and returns a ``Plan``. It never branches on what event woke it (level-triggered)
and never performs I/O, so every decision is tested with plain values.

One pass, in order (the order lives here and only here):

1. a job being deleted, or managed by another controller (``managedBy``), gets nothing: the
   garbage collector removes its children;
2. defaults are applied in memory (never written back, as upstream);
3. Created is recorded and ``startTime`` set on the first pass;
4. a finished job only has its pods cleaned up by ``cleanPodPolicy`` (and its Services removed);
   a suspended one has every pod and Service deleted; a resumed one restarts its clock;
4a. a job active past ``activeDeadlineSeconds`` fails and its running replicas are stopped;
5. in host network mode, missing per-job ports are requested before any pod exists;
6. restarts are counted against ``backoffLimit`` and failed pods that may restart are marked,
   then deleted by a later pass and recreated after that (``restarts``); permanent ``ExitCode``
   failures fail the job;
7. the plugin turns replica counts into conditions;
8. a pod Pending too long gives the job a ``Pending`` condition (``restarts.pending``);
   missing pods and Services are created, surplus ones (scale-down) deleted;
9. the status is returned only if it changed, with events for new conditions;
10. with gang scheduling on, the plan is amended for the job's PodGroup (``gang.schedule``);
10a. a PyTorchJob's HorizontalPodAutoscaler is created, replaced or deleted (``elastic.autoscale``);
10b. the job's rendezvous host (not a replica: left out of every step above) is created or deleted
    (``rendezvous.host``);
11. ``lifecycle.finish_pass``: completionTime, lastReconcileTime, TTL deletion, timed requeues.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from trainyard.api import conditions
from trainyard.api.common import ConditionType, JobStatus, TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.defaults import apply_defaults
from trainyard.controller import children, elastic, gang, lifecycle, rendezvous, restarts
from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, EventType, JobEvent, Plan
from trainyard.controller.status import count_replicas, replica_statuses
from trainyard.frameworks.base import Framework, Verdict
from trainyard.frameworks.network import Network, NetworkMode

_WARNING_CONDITIONS = (ConditionType.FAILED, ConditionType.RESTARTING, ConditionType.PENDING)


def reconcile(observed: Observed, plugin: Framework, settings: ControllerSettings) -> Plan:
    job = observed.job
    if job.metadata.deletion_timestamp is not None or not lifecycle.is_managed(job):
        return Plan()
    plan = gang.schedule(observed, plugin, settings, _reconcile(observed, plugin, settings))
    plan = elastic.autoscale(observed, plugin, plan)
    plan = rendezvous.host(observed, plugin, settings, plan)
    return lifecycle.finish_pass(plan, job, plugin, observed.now)


def _reconcile(observed: Observed, plugin: Framework, settings: ControllerSettings) -> Plan:
    raw = observed.job
    job = apply_defaults(raw, plugin.info)
    now = observed.now
    pods = [p for p in observed.pods if children.is_owned(p, job) and not children.is_rendezvous(p)]
    services = [s for s in observed.services if children.is_owned(s, job) and not children.is_rendezvous(s)]

    status = job.status
    if not status.conditions:
        status = _set(status, plugin, ConditionType.CREATED, f"{plugin.info.kind} {job.name} is created.", now)
    if conditions.is_finished(status):
        return _finished(raw.status, status, job, pods, services, now)
    if job.run_policy.suspend:
        return _suspended(raw.status, status, job, plugin, pods, services, now)
    if conditions.is_true(status, ConditionType.SUSPENDED):
        resumed = f"{plugin.info.kind} {job.name} is resumed."
        status = conditions.set_condition(
            status,
            ConditionType.SUSPENDED,
            reason=f"{plugin.info.kind}Resumed",
            message=resumed,
            now=now,
            value=conditions.FALSE,
        ).model_copy(update={"start_time": now})
    if status.start_time is None:
        status = status.model_copy(update={"start_time": now})
    if lifecycle.past_deadline(job, status, now):
        status, stopped = lifecycle.fail_past_deadline(job, plugin, status, pods, services, now)
        return _with_status(Plan(delete=stopped), raw.status, status, now)

    network = Network(
        settings.network_mode, children.allocated_ports(job), settings.node_address, settings.wait_for_master
    )
    if settings.network_mode is NetworkMode.HOST:
        missing = tuple(k for k in children.required_port_keys(job, plugin) if k not in network.host_ports)
        if missing:
            return _with_status(Plan(allocate_ports=missing), raw.status, status, now)

    decision = restarts.decide(job, plugin, pods, status)
    status = decision.status
    if decision.exceeded:
        status, doomed = restarts.fail_on_backoff(job, plugin, pods, services, status, now)
        return _with_status(Plan(delete=doomed, events=decision.events), raw.status, status, now)
    counts = count_replicas(job, plugin, pods)
    if decision.permanent:
        # A non-retryable exit code fails the job outright; the plugin's counts would only
        # (wrongly) call it Restarting, since the replica's policy is not Never.
        rtype = children.replica_type_of(decision.permanent[0], plugin)
        verdicts: list[Verdict] = [Verdict(ConditionType.FAILED, restarts.permanent_message(job, rtype))]
    else:
        verdicts = decision.adjust(plugin.verdicts(job, counts))
    status = _apply_verdicts(status, plugin, verdicts, now)
    status = status.model_copy(
        update={
            "replica_statuses": replica_statuses(
                job, plugin, counts, finished_ok=conditions.is_true(status, ConditionType.SUCCEEDED)
            )
        }
    )
    finished = conditions.is_finished(status)
    status, recheck = restarts.pending(job, plugin, pods, status, settings.pending_timeout, now, finished=finished)
    if finished:
        status = status.model_copy(update={"completion_time": status.completion_time or now})
        return _with_status(Plan(events=decision.events), raw.status, status, now)

    deletes = [ChildRef("Pod", name) for name in decision.delete]
    creates, surplus = _sync_children(job, plugin, network, pods, services, skip=set(decision.delete))
    if decision.hold_creates:
        creates = [c for c in creates if not isinstance(c, Pod)]
    plan = Plan(
        delete=(*deletes, *surplus),
        create=tuple(restarts.decorate(job, plugin, creates)),
        events=decision.events,
        requeue_after=recheck,
    )
    return _with_status(plan, raw.status, status, now)


def _set(status: JobStatus, plugin: Framework, ctype: ConditionType, message: str, now: datetime) -> JobStatus:
    return conditions.set_condition(status, ctype, reason=f"{plugin.info.kind}{ctype.value}", message=message, now=now)


def _apply_verdicts(status: JobStatus, plugin: Framework, verdicts: Sequence[Verdict], now: datetime) -> JobStatus:
    for verdict in verdicts:
        status = _set(status, plugin, verdict.type, verdict.message, now)
    return status


def _with_status(plan: Plan, before: JobStatus, after: JobStatus, now: datetime) -> Plan:
    """Attach the status if it changed, and one event per condition that became true in this pass."""
    if after == before:
        return plan
    old = {(c.type, c.status, c.reason) for c in before.conditions}
    events = tuple(
        JobEvent(
            EventType.WARNING if c.type in _WARNING_CONDITIONS else EventType.NORMAL,
            c.reason or c.type.value,
            c.message or "",
        )
        for c in after.conditions
        if lifecycle.announced(c) and (c.type, c.status, c.reason) not in old
    )
    return Plan(
        allocate_ports=plan.allocate_ports,
        delete=plan.delete,
        create=plan.create,
        status=after,
        events=(*plan.events, *events),
        requeue_after=plan.requeue_after,
        delete_job=plan.delete_job,
    )


def _sync_children(
    job: TrainingJob,
    plugin: Framework,
    network: Network,
    pods: Sequence[Pod],
    services: Sequence[Service],
    *,
    skip: set[str],
) -> tuple[list[Pod | Service], list[ChildRef]]:
    have_pods, have_services = children.names(pods), children.names(services)
    creates: list[Pod | Service] = []
    for rtype in plugin.info.replica_types:
        spec = job.replica_specs.get(rtype)
        for index in range((spec.replicas or 0) if spec else 0):
            pod = children.build_pod(job, plugin, rtype, index, network)
            if pod.name not in have_pods and pod.name not in skip:
                creates.append(pod)
            if pod.name not in have_services:
                creates.append(children.build_service(pod, plugin))
    surplus: list[ChildRef] = []
    for kind, objects in (("Pod", pods), ("Service", services)):
        for obj in objects:
            owned_type, owned_index = children.replica_type_of(obj, plugin), children.replica_index(obj)
            if owned_type is None or owned_index is None or (kind == "Pod" and obj.name in skip):
                continue
            owned_spec = job.replica_specs.get(owned_type)
            if owned_spec is None or owned_index >= (owned_spec.replicas or 0):
                surplus.append(ChildRef(kind, obj.name))
    return creates, surplus


def _suspended(
    before: JobStatus,
    status: JobStatus,
    job: TrainingJob,
    plugin: Framework,
    pods: Sequence[Pod],
    services: Sequence[Service],
    now: datetime,
) -> Plan:
    """Suspend (reference §6.1 step 3): every pod and Service goes, nothing is created."""
    kind = plugin.info.kind
    message = f"{kind} {job.name} is suspended."
    if conditions.is_true(status, ConditionType.RUNNING):
        status = conditions.set_condition(
            status, ConditionType.RUNNING, reason=f"{kind}Suspended", message=message, now=now, value=conditions.FALSE
        )
    status = _set(status, plugin, ConditionType.SUSPENDED, message, now)
    idle = {rtype: rs.model_copy(update={"active": 0}) for rtype, rs in status.replica_statuses.items()}
    status = status.model_copy(update={"replica_statuses": idle})
    deletes = [ChildRef("Pod", p.name) for p in pods if p.metadata.deletion_timestamp is None]
    deletes += [ChildRef("Service", s.name) for s in services]
    return _with_status(Plan(delete=tuple(deletes)), before, status, now)


def _finished(
    before: JobStatus,
    status: JobStatus,
    job: TrainingJob,
    pods: Sequence[Pod],
    services: Sequence[Service],
    now: datetime,
) -> Plan:
    """A finished job only cleans up: pods by ``cleanPodPolicy``, every Service."""
    deletes = lifecycle.cleanup(job, pods, services)
    # Pods may be cleaned up by now, so the counts are carried over rather than recounted.
    status = status.model_copy(update={"replica_statuses": lifecycle.finished_replica_statuses(status)})
    return _with_status(Plan(delete=deletes), before, status, now)
