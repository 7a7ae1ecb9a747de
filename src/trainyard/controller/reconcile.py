"""The reconciler: a pure function from what is observed to what should be done.

``reconcile(observed, plugin, settings) -> Plan`` reads the job, the children it owns and the
clock, and returns a ``Plan``. It never branches on what event woke it (level-triggered)
and never performs I/O, so every decision is tested with plain values.

One pass, in order (the order lives here and only here):

1. a job being deleted, or managed by another controller (``managedBy``), gets nothing: the
   garbage collector removes its children;
2. defaults are applied in memory, once (never written back, as upstream), and the defaulted
   job is handed to every step below; a kind run by a launcher Job (MPIJob) takes its own pass
   (``launched``) instead of steps 3 to 10b, then gang scheduling and step 11 without TTL
   deletion (its launcher Job has the TTL);
3. Created is recorded and ``startTime`` set on the first pass;
4. a finished job only has its pods cleaned up by ``cleanPodPolicy`` (and its Services removed);
   a suspended one has every pod and Service deleted; a resumed one restarts its clock;
4a. a job active past ``activeDeadlineSeconds`` fails and its running replicas are stopped;
4b. a job whose reported progress fires ``runPolicy.earlyStopping`` (``progress.stop_decision``)
    succeeds and its running replicas are stopped, with their grace period;
5. in host network mode, missing per-job ports are requested before any pod exists;
6. restarts are counted against ``backoffLimit`` and failed pods that may restart are marked,
   then deleted by a later pass and recreated after that (``restarts``); permanent ``ExitCode``
   failures fail the job;
7. the plugin turns replica counts into conditions;
8. a pod Pending too long gives the job a ``Pending`` condition (``restarts.pending``);
   missing pods and Services are created, surplus ones (scale-down) deleted; pods created get the
   training env (``trainingenv``: job names, resume path, progress endpoint);
9. the status is returned only if it changed, with events for new conditions;
10. with gang scheduling on, the plan is amended for the job's PodGroup (``gang.schedule``);
10a. the children the plugin wants beside the replicas (a PyTorchJob's HorizontalPodAutoscaler)
    are created, replaced or deleted (``childdiff.plugin_children``);
10b. the job's rendezvous host (not a replica: left out of every step above) is created or deleted
    (``rendezvous.host``);
11. ``lifecycle.finish_pass``: completionTime, lastReconcileTime, TTL deletion, timed requeues.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from trainyard.api import conditions
from trainyard.api.common import ConditionType, JobStatus, TrainingJob
from trainyard.api.core import Pod, Service
from trainyard.api.defaults import apply_defaults
from trainyard.controller import (
    childdiff,
    children,
    gang,
    launched,
    lifecycle,
    progress,
    rendezvous,
    restarts,
    trainingenv,
)
from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, Plan
from trainyard.controller.status import count_replicas, replica_statuses
from trainyard.frameworks.base import ChildKind, Framework, Verdict
from trainyard.frameworks.network import Network, NetworkMode, replica_name
from trainyard.kit.plans import Event, EventType

_WARNING_CONDITIONS = (ConditionType.FAILED, ConditionType.RESTARTING, ConditionType.PENDING)


def reconcile(observed: Observed, plugin: Framework, settings: ControllerSettings) -> Plan:
    raw = observed.job
    if raw.metadata.deletion_timestamp is not None or not lifecycle.is_managed(raw, plugin.info):
        return Plan()
    job = observed.defaulted if observed.defaulted is not None else apply_defaults(raw, plugin.info)
    by_launcher = launched.launcher_plugin(plugin)
    if by_launcher is not None:
        plan = launched.run(observed, job, by_launcher, settings)
        plan = gang.schedule(observed, job, plugin, settings, plan)
        return lifecycle.finish_pass(plan, raw, plugin, observed.now, ttl=False)
    plan = _replicas(_pass(observed, job, plugin), settings, build=not gang.holds_creates(observed, job, settings))
    plan = gang.schedule(observed, job, plugin, settings, plan)
    plan = childdiff.plugin_children(observed, job, plugin, plan)
    plan = rendezvous.host(observed, job, plugin, settings, plan)
    return lifecycle.finish_pass(plan, raw, plugin, observed.now)


def child_kinds(plugin: Framework, settings: ControllerSettings) -> tuple[ChildKind, ...]:
    """Every kind a job may own beside its pods and Services (the gang's PodGroup, the plugin's)."""
    group = gang.group_kind(settings)
    return (*((group,) if group is not None else ()), *plugin.child_kinds)


@dataclass(frozen=True)
class _Pass:
    """What the steps over a job's replicas read."""

    job: TrainingJob
    """Defaulted."""
    plugin: Framework
    before: JobStatus
    """The status as stored: a plan carries a status only when it differs."""
    pods: tuple[Pod, ...]
    """The replicas' pods (not the rendezvous host's)."""
    services: tuple[Service, ...]
    now: datetime
    refused: Mapping[str, str] = field(default_factory=dict)


def _pass(observed: Observed, job: TrainingJob, plugin: Framework) -> _Pass:
    def replica(child: Pod | Service) -> bool:
        return children.is_owned(child, job) and not children.is_rendezvous(child)

    pods = tuple(p for p in observed.pods if replica(p))
    services = tuple(s for s in observed.services if replica(s))
    return _Pass(job, plugin, observed.job.status, pods, services, observed.now, observed.refused)


def _replicas(p: _Pass, settings: ControllerSettings, *, build: bool = True) -> Plan:
    """Steps 3 to 9: the replicas' pods and Services, and the status they imply. ``build`` False:
    none is created in this pass whatever is missing (the gang's group holds them back)."""
    started = _start(p)
    if isinstance(started, Plan):
        return started
    network = Network(
        settings.network_mode,
        children.allocated_ports(p.job),
        settings.node_address,
        settings.wait_for_master,
        settings.cluster_domain,
    )
    if settings.network_mode is NetworkMode.HOST:
        missing = tuple(k for k in children.required_port_keys(p.job, p.plugin) if k not in network.host_ports)
        if missing:
            return _with_status(Plan(allocate_ports=missing), p.before, started, p.now)
    return _run(p, started, network, settings, build=build)


def _start(p: _Pass) -> JobStatus | Plan:
    """Steps 3 to 4a: the status a running job starts the pass with, or the plan of one that is not."""
    job, kind, now = p.job, p.plugin.info.kind, p.now
    status = job.status
    if not status.conditions:
        status = _set(status, p.plugin, ConditionType.CREATED, f"{kind} {job.name} is created.", now)
    if conditions.is_finished(status):
        return _finished(p, status)
    if job.run_policy.suspend:
        return _suspended(p, status)
    if conditions.is_true(status, ConditionType.SUSPENDED):
        status = conditions.set_condition(
            status,
            ConditionType.SUSPENDED,
            reason=f"{kind}Resumed",
            message=f"{kind} {job.name} is resumed.",
            now=now,
            value=conditions.FALSE,
        ).model_copy(update={"start_time": now})
    if status.start_time is None:
        status = status.model_copy(update={"start_time": now})
    if lifecycle.past_deadline(job, status, now):
        status, stopped = lifecycle.fail_past_deadline(job, p.plugin, status, p.pods, p.services, now)
        return _with_status(Plan(delete=stopped), p.before, status, now)
    reported = status.training_progress.to_dict() if status.training_progress else None
    stop = progress.stop_decision(reported, job.run_policy.early_stopping)
    if stop is not None:
        status, stopped = lifecycle.succeed_early(job, status, p.pods, p.services, stop.reason, stop.message, now)
        return _with_status(Plan(delete=stopped), p.before, status, now)
    return status


def _run(p: _Pass, status: JobStatus, network: Network, settings: ControllerSettings, *, build: bool = True) -> Plan:
    """Steps 6 to 9 for a running job: restarts, conditions, Pending, then the missing and surplus children."""
    job, plugin, now, pending_timeout = p.job, p.plugin, p.now, settings.pending_timeout
    decision = restarts.decide(job, plugin, p.pods, status)
    if decision.exceeded:
        status, doomed = restarts.fail_on_backoff(job, plugin, p.pods, p.services, decision.status, now)
        return _with_status(Plan(delete=doomed, events=decision.events), p.before, status, now)
    status = _verdicts(p, decision)
    finished = conditions.is_finished(status)
    status, recheck = restarts.pending(job, plugin, p.pods, status, pending_timeout, now, finished=finished)
    if finished:
        status = status.model_copy(update={"completion_time": status.completion_time or now})
        return _with_status(Plan(events=decision.events), p.before, status, now)

    deletes = [ChildRef("Pod", name) for name in decision.delete]
    creates, surplus = _sync_children(job, plugin, network, p.pods, p.services, skip=set(decision.delete), build=build)
    if decision.hold_creates:
        creates = [c for c in creates if not isinstance(c, Pod)]
    server = settings.progress_server
    creates = [trainingenv.with_progress_env(c, job, plugin.info, server) if isinstance(c, Pod) else c for c in creates]
    plan = Plan(
        delete=(*deletes, *surplus),
        create=tuple(restarts.for_whole_gang_restarts(job, plugin, creates)),
        events=decision.events,
        requeue_after=recheck,
    )
    return _with_status(plan, p.before, _told_refusals(p, status, plan), now)


def _told_refusals(p: _Pass, status: JobStatus, plan: Plan) -> JobStatus:
    """The ``Created`` condition says which replicas the API server refused (a ResourceQuota's 403)
    and in its words, while they are still to be created; its plain message again once none is."""
    created = conditions.find(status, ConditionType.CREATED)
    if created is None or created.status != "True":
        return status
    waiting = [c.name for c in plan.create if isinstance(c, Pod) and c.name in p.refused]
    base = f"{p.plugin.info.kind} {p.job.name} is created."
    message = base + "".join(f" Pod {name} waits: {p.refused[name]}" for name in sorted(waiting))
    if created.message == message:
        return status
    # Only the message moves (upstream's rule keeps a condition whose status and reason stay).
    told = created.model_copy(update={"message": message, "last_update_time": p.now})
    return status.model_copy(update={"conditions": [told if c is created else c for c in status.conditions]})


def _verdicts(p: _Pass, decision: restarts.RestartDecision) -> JobStatus:
    """Step 7: the plugin turns replica counts into conditions; ``replicaStatuses`` follow them."""
    counts = count_replicas(p.job, p.plugin, p.pods)
    if decision.permanent:
        # A non-retryable exit code fails the job outright; the plugin's counts would only
        # (wrongly) call it Restarting, since the replica's policy is not Never.
        rtype = children.replica_type_of(decision.permanent[0], p.plugin)
        verdicts: list[Verdict] = [Verdict(ConditionType.FAILED, restarts.permanent_message(p.job, rtype))]
    else:
        verdicts = decision.adjust(p.plugin.verdicts(p.job, counts))
    status = _apply_verdicts(decision.status, p.plugin, verdicts, p.now)
    succeeded = conditions.is_true(status, ConditionType.SUCCEEDED)
    return status.model_copy(
        update={"replica_statuses": replica_statuses(p.job, p.plugin, counts, finished_ok=succeeded)}
    )


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
        Event(
            EventType.WARNING if c.type in _WARNING_CONDITIONS else EventType.NORMAL,
            c.reason or c.type.value,
            c.message or "",
        )
        for c in after.conditions
        if lifecycle.announced(c) and (c.type, c.status, c.reason) not in old
    )
    return dataclasses.replace(plan, status=after, events=(*plan.events, *events))


def _sync_children(
    job: TrainingJob,
    plugin: Framework,
    network: Network,
    pods: Sequence[Pod],
    services: Sequence[Service],
    *,
    skip: set[str],
    build: bool = True,
) -> tuple[list[Pod | Service], list[ChildRef]]:
    have_pods, have_services = children.names(pods), children.names(services)
    creates: list[Pod | Service] = []
    for rtype in plugin.info.replica_types if build else ():
        spec = job.replica_specs.get(rtype)
        for index in range((spec.replicas or 0) if spec else 0):
            name = replica_name(job.name, rtype, index)
            make_pod, make_service = name not in have_pods and name not in skip, name not in have_services
            if not (make_pod or make_service):
                continue  # built only to be created: a pass over a running job builds nothing
            pod = children.build_pod(job, plugin, rtype, index, network)
            if make_pod:
                creates.append(pod)
            if make_service:
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


def _suspended(p: _Pass, status: JobStatus) -> Plan:
    """Suspend (reference §6.1 step 3): every pod and Service goes, nothing is created."""
    kind, now = p.plugin.info.kind, p.now
    message = f"{kind} {p.job.name} is suspended."
    if conditions.is_true(status, ConditionType.RUNNING):
        status = conditions.set_condition(
            status, ConditionType.RUNNING, reason=f"{kind}Suspended", message=message, now=now, value=conditions.FALSE
        )
    status = _set(status, p.plugin, ConditionType.SUSPENDED, message, now)
    idle = {rtype: rs.model_copy(update={"active": 0}) for rtype, rs in status.replica_statuses.items()}
    status = status.model_copy(update={"replica_statuses": idle})
    deletes = [ChildRef("Pod", pod.name) for pod in p.pods if pod.metadata.deletion_timestamp is None]
    deletes += [ChildRef("Service", s.name) for s in p.services]
    return _with_status(Plan(delete=tuple(deletes)), p.before, status, now)


def _finished(p: _Pass, status: JobStatus) -> Plan:
    """A finished job only cleans up: pods by ``cleanPodPolicy``, every Service."""
    deletes = lifecycle.cleanup(p.job, p.pods, p.services)
    # Pods may be cleaned up by now, so the counts are carried over rather than recounted.
    status = status.model_copy(update={"replica_statuses": lifecycle.finished_replica_statuses(status)})
    return _with_status(Plan(delete=deletes), p.before, status, p.now)
