"""Job lifecycle over ``runPolicy`` (kubeflow-v1 reference §5, §6.1-§6.5), decided purely.

This module owns: who manages a job (``managedBy``), ``activeDeadlineSeconds``, a success policy
that fired (``succeed_early``; ``progress`` decides when), what a finished
job cleans up (``cleanPodPolicy``; Services always), ``ttlSecondsAfterFinished``, the guarantees
every pass ends with (``completionTime`` on every finish, ``lastReconcileTime`` on every status
write) and the timed requeues that make deadlines and TTLs fire on time rather than on the next
unrelated event (upstream #3358). ``reconcile`` calls into it at fixed points; nothing here
knows the order of a pass.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime, timedelta

from trainyard.api import conditions
from trainyard.api.common import CleanPodPolicy, ConditionType, JobCondition, JobStatus, ReplicaStatus, TrainingJob
from trainyard.api.core import Pod, PodPhase, Service
from trainyard.api.kindinfo import KindInfo
from trainyard.controller import children
from trainyard.controller.plan import ChildRef, Plan
from trainyard.frameworks.base import Framework
from trainyard.kit.plans import Event, EventType


def is_managed(job: TrainingJob, info: KindInfo) -> bool:
    """A job another controller manages (e.g. ``kueue.x-k8s.io/multikueue``) gets no writes at all.

    Ours is the kind's first ``managedBy`` value (upstream's operator for that kind), or none.
    """
    owner = job.run_policy.managed_by
    return owner is None or owner == info.managed_by[0]


# -- activeDeadlineSeconds ------------------------------------------------------------------------


def deadline(job: TrainingJob, status: JobStatus) -> datetime | None:
    """When a started, running job must have finished; counted from ``startTime`` (reset on resume)."""
    limit = job.run_policy.active_deadline_seconds
    if limit is None or status.start_time is None:
        return None
    return status.start_time + timedelta(seconds=limit)


def past_deadline(job: TrainingJob, status: JobStatus, now: datetime) -> bool:
    due = deadline(job, status)
    return due is not None and now >= due


def fail_past_deadline(
    job: TrainingJob,
    plugin: Framework,
    status: JobStatus,
    pods: Sequence[Pod],
    services: Sequence[Service],
    now: datetime,
) -> tuple[JobStatus, tuple[ChildRef, ...]]:
    """The job fails with upstream's message; its replicas are stopped, whatever ``cleanPodPolicy``.

    Upstream deletes every pod here. We stop the pods that still run (they must not outlive the
    deadline) and leave finished pods to ``cleanPodPolicy`` like any other finish, so that the
    logs of replicas that ended stay readable under ``None``.
    """
    message = f"Job {job.name} has failed because it was active longer than specified deadline"
    status = conditions.set_condition(
        status, ConditionType.FAILED, reason=f"{plugin.info.kind}Failed", message=message, now=now
    )
    stopped = {rtype: rs.model_copy(update={"active": 0}) for rtype, rs in status.replica_statuses.items()}
    status = status.model_copy(update={"completion_time": status.completion_time or now, "replica_statuses": stopped})
    return status, cleanup(job, pods, services, stop_active=True)


def succeed_early(
    job: TrainingJob,
    status: JobStatus,
    pods: Sequence[Pod],
    services: Sequence[Service],
    reason: str,
    message: str,
    now: datetime,
) -> tuple[JobStatus, tuple[ChildRef, ...]]:
    """A success policy fired (``runPolicy.earlyStopping``): the job succeeds with ``reason``.

    Its replicas still running are stopped whatever ``cleanPodPolicy``: deleted with their grace
    period, so training code gets SIGTERM and ``terminationGracePeriodSeconds`` to finish a
    checkpoint before SIGKILL. Checkpoints are files of the job's volumes, never touched here.
    Replicas still active count as succeeded, as after any success.
    """
    status = conditions.set_condition(status, ConditionType.SUCCEEDED, reason=reason, message=message, now=now)
    status = status.model_copy(
        update={"completion_time": status.completion_time or now, "replica_statuses": finished_replica_statuses(status)}
    )
    return status, cleanup(job, pods, services, stop_active=True)


# -- a finished job -------------------------------------------------------------------------------


def _active(pod: Pod) -> bool:
    return pod.phase in (PodPhase.RUNNING, PodPhase.PENDING, None)


def cleanup(
    job: TrainingJob, pods: Sequence[Pod], services: Sequence[Service], *, stop_active: bool = False
) -> tuple[ChildRef, ...]:
    """Pods to delete by ``cleanPodPolicy`` (§6.2), and every Service.

    Services go whatever the policy: once the job is over nothing may resolve its replicas any
    more (upstream keeps them under ``None`` and ``Running`` until the job is deleted).
    ``stop_active`` adds the pods that still run, for a job that failed before its replicas ended.
    """
    policy = job.run_policy.clean_pod_policy or CleanPodPolicy.NONE
    live = [p for p in pods if p.metadata.deletion_timestamp is None]
    if policy is CleanPodPolicy.ALL:
        doomed = live
    elif policy is CleanPodPolicy.RUNNING or stop_active:
        doomed = [p for p in live if _active(p)]
    else:
        doomed = []
    gone = [ChildRef("Service", s.name) for s in services if s.metadata.deletion_timestamp is None]
    return (*(ChildRef("Pod", p.name) for p in doomed), *gone)


def finished_replica_statuses(status: JobStatus) -> dict[str, ReplicaStatus]:
    """After success, replicas still counted active are reported succeeded (§5.4)."""
    if not conditions.is_true(status, ConditionType.SUCCEEDED):
        return status.replica_statuses
    return {
        rtype: rs.model_copy(update={"active": 0, "succeeded": (rs.succeeded or 0) + (rs.active or 0)})
        for rtype, rs in status.replica_statuses.items()
    }


def ttl_expiry(job: TrainingJob, status: JobStatus) -> datetime | None:
    """When a finished job is deleted: ``completionTime`` + TTL; never while suspended."""
    ttl = job.run_policy.ttl_seconds_after_finished
    if ttl is None or job.run_policy.suspend or not conditions.is_finished(status) or status.completion_time is None:
        return None
    return status.completion_time + timedelta(seconds=ttl)


def ttl_deletion(job: TrainingJob, plugin: Framework) -> Plan:
    event = Event(EventType.NORMAL, plugin.info.ttl_deletion_reason, f"Deleted job: {job.name}")
    return Plan(delete_job=True, events=(event,))


# -- conditions worth an event --------------------------------------------------------------------


def announced(cond: JobCondition) -> bool:
    """Conditions that get an event when they appear: every True one, and a resume."""
    return cond.status == conditions.TRUE or (
        cond.type == ConditionType.SUSPENDED and (cond.reason or "").endswith("Resumed")
    )


# -- what every pass ends with --------------------------------------------------------------------


def finish_pass(plan: Plan, job: TrainingJob, plugin: Framework, now: datetime, *, ttl: bool = True) -> Plan:
    """Guarantees and timers applied to the plan of one pass over ``job`` (as observed, undefaulted).

    * a finished job always has ``completionTime``, whatever path finished it;
    * a finished job whose stored ``completionTime`` is older than its TTL is deleted;
    * every status write carries ``lastReconcileTime`` (a pass never writes only to refresh it:
      each write wakes the operator again);
    * pods created from a template that set its own ``restartPolicy`` get upstream's warning;
    * the plan asks to be run again when the deadline or the TTL falls due.

    ``ttl``: False for a kind whose TTL is its launcher Job's (the job itself stays).
    """
    before = job.status
    expiry = ttl_expiry(job, before) if ttl else None
    if expiry is not None and now >= expiry:
        return ttl_deletion(job, plugin)

    after = plan.status if plan.status is not None else before
    if conditions.is_finished(after) and after.completion_time is None:
        after = after.model_copy(update={"completion_time": now})
    if after != before:
        after = after.model_copy(update={"last_reconcile_time": now})

    events = (*plan.events, *restart_policy_warnings(job, plugin, plan.create))
    waits = [w for w in (plan.requeue_after, _until(deadline_if_running(job, after), now)) if w is not None]
    if ttl:
        waits += [w for w in (_until(ttl_expiry(job, after), now),) if w is not None]
    # replace, not a new Plan: fields other modules add (owned children) pass through.
    return dataclasses.replace(
        plan,
        status=after if after != before else None,
        events=events,
        requeue_after=min(waits) if waits else None,
    )


def deadline_if_running(job: TrainingJob, status: JobStatus) -> datetime | None:
    if conditions.is_finished(status) or job.run_policy.suspend:
        return None
    return deadline(job, status)


def _until(moment: datetime | None, now: datetime) -> timedelta | None:
    if moment is None:
        return None
    return max(moment - now, timedelta(0))


def restart_policy_warnings(job: TrainingJob, plugin: Framework, created: Sequence[Pod | Service]) -> tuple[Event, ...]:
    """Upstream warns, for each pod it creates, that the template's restartPolicy is overwritten."""
    out = []
    for obj in created:
        if not isinstance(obj, Pod):
            continue
        rtype = children.replica_type_of(obj, plugin)
        spec = next((s for t, s in job.replica_specs.items() if rtype is not None and t.lower() == rtype.lower()), None)
        if spec is not None and spec.template.spec.restart_policy:
            out.append(
                Event(
                    EventType.WARNING,
                    "SetPodTemplateRestartPolicy",
                    "Restart policy in pod template will be overwritten by restart policy in replica spec",
                )
            )
    return tuple(out)
