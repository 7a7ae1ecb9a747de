"""Restarts: which failed pods come back, how many restarts a job gets, and what users are told.

Owns reference §7 (replica ``restartPolicy`` Always / OnFailure / Never / ExitCode) and §6.3
``backoffLimit``, the latter fixed as upstream #2045 asks: *every* restart counts, whatever the
policy, in one counter persisted in the job status (``status.restartCount``):

* a container the kubelet restarted in place (growth of the pod's container ``restartCount``s);
* a failed pod the operator deletes so that it is recreated (Always, OnFailure, ExitCode >= 128);
* a whole-job restart (``runPolicy.restartScope: Job``) counts once, however many pods it replaces.

The job fails, with upstream's reason and message, as soon as the count would exceed
``backoffLimit``: a re-creation that would exceed it is not performed; an in-place restart is the
kubelet's, so the one that exceeds it is seen after the fact.

Exactly once, across crashes: ``status.podLedger`` holds, per live pod (by uid), the container
restarts already counted, the default container's exits already reported (``ExitedWithCode``,
once per exit rather than upstream's once per reconcile), and whether its failure was counted as a
re-creation. A failed pod is first *marked* (count and mark written with the status) and deleted
only by a later pass that reads the mark back, so an operator killed between any two writes
neither loses nor doubles a restart. Entries of pods that are gone are dropped: uids never return.

Preemption is not a failure: a pod the scheduler deleted to make room for a higher-priority
one (its ``DisruptionTarget`` condition, reason ``PreemptionByScheduler``, still visible while it
terminates) counts no restart, as batch/v1 Job's ``podFailurePolicy`` ``Ignore`` on
``DisruptionTarget`` and as training-operator v1 (which recreates deleted pods without counting
them against ``backoffLimit``). A static world restarts as a gang, so its other live pods are
deleted too (uncounted), no pod is created until the old generation is gone, the job shows
``Restarting`` naming the preemption and a ``Preempted`` Warning is recorded once per condition
change; the new pods then wait Pending until capacity returns, and resume from the last
checkpoint like any restarted pod (``TRAINYARD_RESUME_FROM``, ``trainyard.runtime``).

Also here: whole-gang restart, and the ``Pending`` condition of a job whose pod has waited too
long (upstream #2001). A static world (every rank fixed when the job starts: a PyTorchJob without
``elasticPolicy``) cannot take one restarted rank back, since its peers have moved on or wait in
a rendezvous that will never come again (upstream has that deadlock). So, unless the job says
``runPolicy.restartScope: Replica``, a retryable failure of one replica restarts the whole gang:
every pod is deleted and the new generation is created only once all the old pods are gone, and
OnFailure replicas run with pod ``restartPolicy: Never`` so that a crash surfaces as a failed pod
at once instead of an in-place restart of one rank. Elastic worlds keep per-pod restarts (their
rendezvous admits a rejoining replica); ``restartScope: Job`` asks for the gang restart anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainyard.api.common import (
    ConditionType,
    JobCondition,
    JobStatus,
    PodLedgerEntry,
    RestartScope,
    TrainingJob,
)
from trainyard.api.conditions import FALSE, TRUE, find, set_condition
from trainyard.api.core import ContainerStatus, Pod, PodPhase, RestartPolicy, Service
from trainyard.controller import children, lifecycle
from trainyard.controller.plan import ChildRef
from trainyard.frameworks.base import Framework, Verdict
from trainyard.kit.plans import Event, EventType

NO_EXIT_CODE = 0xBEEF
"""Upstream's stand-in exit code when the default container never terminated (eviction, init
failure): >= 128, so retryable."""

EXITED_WITH_CODE = "ExitedWithCode"
PREEMPTED = "Preempted"
"""trainyard's job event for pods the scheduler preempted (the scheduler's own reason)."""
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
RESTARTING_ALL = "RestartingAllReplicas"
"""trainyard's event for a whole-gang restart: which replica failed, how, and the count so far."""

# Waiting reasons that are progress, not a problem: a pod showing only these is just slow.
_PROGRESS = frozenset({"ContainerCreating", "PodInitializing"})


@dataclass(frozen=True)
class RestartDecision:
    """What the restart rules decided in one pass."""

    status: JobStatus
    """The status with ``restartCount`` and ``podLedger`` brought up to date."""
    delete: tuple[str, ...] = ()
    """Pods whose restart was recorded by an earlier pass: delete them now (recreated later)."""
    permanent: tuple[Pod, ...] = ()
    """Pods failed with a non-retryable ``ExitCode`` (1-127): the job fails."""
    exceeded: bool = False
    """A restart would exceed ``backoffLimit`` (or an in-place one already did): the job fails."""
    hold_creates: bool = False
    """A whole-job restart is under way: no pod is created until every old one is gone."""
    restarting: Verdict | None = None
    """Whole-job restart under way: this replaces the plugin's Running/Restarting verdicts."""
    events: tuple[Event, ...] = field(default_factory=tuple)

    def adjust(self, verdicts: Sequence[Verdict]) -> list[Verdict]:
        """The plugin's verdicts, with a whole-job restart's Restarting in place of Running/Restarting."""
        if self.restarting is None:
            return list(verdicts)
        passing = (ConditionType.RUNNING, ConditionType.RESTARTING)
        return [*(v for v in verdicts if v.type not in passing), self.restarting]


def backoff_message(job: TrainingJob) -> str:
    return f"Job {job.name} has failed because it has reached the specified backoff limit"


def permanent_message(job: TrainingJob, rtype: str | None) -> str:
    return f'job "{job.name}" is failing because "{rtype}" replica(s) failed.'


def whole_job(job: TrainingJob, plugin: Framework) -> bool:
    """Whether a retryable failure restarts every replica: the default for static worlds."""
    scope = job.run_policy.restart_scope
    if scope is None:
        return not plugin.is_elastic(job)
    return scope == RestartScope.JOB


def decide(job: TrainingJob, plugin: Framework, pods: Sequence[Pod], status: JobStatus) -> RestartDecision:
    """Count restarts, mark failed pods for re-creation, report exits; ``job`` is defaulted."""
    seen = _scan(job, plugin, pods, status)
    entries = seen.entries
    whole = whole_job(job, plugin)
    count, to_mark, exceeded = _count(job, pods, status.restart_count or 0, seen, whole=whole)
    for pod in to_mark:
        uid = pod.metadata.uid or ""
        entries[uid] = entries[uid].model_copy(update={"recreate": True})

    marked = [p for p in pods if (e := entries.get(p.metadata.uid or "")) is not None and e.recreate]
    just_marked = {p.metadata.uid for p in to_mark}
    delete = tuple(
        p.name for p in marked if p.metadata.deletion_timestamp is None and p.metadata.uid not in just_marked
    )
    kept = [e for e in entries.values() if e.restarts or e.exits or e.recreate]
    updates: dict[str, object] = {}
    if count != (status.restart_count or 0):
        updates["restart_count"] = count
    if kept or status.pod_ledger is not None:
        updates["pod_ledger"] = kept
    events = list(seen.events)
    restarting = None
    if whole and marked and not exceeded:
        failed = list({p.metadata.uid: p for p in [*seen.fresh_failures, *seen.restarted]}.values())
        restarting = _whole_job_verdict(job, plugin, failed)
        if to_mark:
            events.append(_gang_restart_event(job, plugin, failed, count))
    hold = whole and bool(marked)
    new_status = status.model_copy(update=updates)
    preempted = _preempted(pods)
    if preempted and not exceeded and restarting is None:
        restarting = _preempted_verdict(job, plugin, preempted, whole=whole)
        current = find(status, ConditionType.RESTARTING)
        if current is None or current.status != TRUE or current.message != restarting.message:
            events.append(Event(EventType.WARNING, PREEMPTED, restarting.message))
        if whole:
            hold = True
            deleting = {p.name for p in preempted}
            delete += tuple(
                p.name
                for p in pods
                if p.metadata.deletion_timestamp is None
                and p.name not in deleting
                and p.name not in delete
                and p.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED)
            )
    return RestartDecision(
        status=new_status,
        delete=delete,
        permanent=seen.permanent,
        exceeded=exceeded,
        hold_creates=hold,
        restarting=restarting,
        events=tuple(events),
    )


def disruption(pod: Pod) -> str | None:
    """The scheduler's preemption message on ``pod`` (its ``DisruptionTarget`` condition), or None."""
    for cond in pod.status.conditions or []:
        if cond.type == DISRUPTION_TARGET and cond.status == TRUE and cond.reason == PREEMPTION_BY_SCHEDULER:
            return cond.message or PREEMPTION_BY_SCHEDULER
    return None


def _preempted(pods: Sequence[Pod]) -> list[Pod]:
    return sorted(
        (p for p in pods if p.metadata.deletion_timestamp is not None and disruption(p) is not None),
        key=lambda p: p.name,
    )


def _preempted_verdict(job: TrainingJob, plugin: Framework, preempted: Sequence[Pod], *, whole: bool) -> Verdict:
    names = ", ".join(p.name for p in preempted)
    what = "all replicas" if whole else "preempted replicas"
    return Verdict(
        ConditionType.RESTARTING,
        f"{plugin.info.kind} {job.name} is restarting {what} because pod(s) {names} were preempted "
        f"({disruption(preempted[0])}); not counted against backoffLimit.",
    )


@dataclass(frozen=True)
class _Seen:
    """What the pods show since the ledger was last written."""

    entries: dict[str, PodLedgerEntry]
    """The ledger brought up to date, by pod uid (marks not added yet)."""
    events: tuple[Event, ...]
    in_place: int
    """Container restarts the kubelet performed and nobody counted yet."""
    fresh_failures: tuple[Pod, ...]
    """Retryable failures not marked for re-creation yet."""
    restarted: tuple[Pod, ...]
    permanent: tuple[Pod, ...]


def _scan(job: TrainingJob, plugin: Framework, pods: Sequence[Pod], status: JobStatus) -> _Seen:
    ledger = {e.uid: e for e in status.pod_ledger or []}
    entries: dict[str, PodLedgerEntry] = {}
    events: list[Event] = []
    in_place = 0
    fresh_failures: list[Pod] = []
    restarted: list[Pod] = []
    permanent: list[Pod] = []
    for pod in sorted(pods, key=lambda p: p.name):
        uid = pod.metadata.uid
        if not uid:
            continue
        entry = ledger.get(uid) or PodLedgerEntry(name=pod.name, uid=uid)
        restarts = _container_restarts(pod)
        if restarts > entry.restarts:
            in_place += restarts - entry.restarts
            restarted.append(pod)
        entry = entry.model_copy(update={"restarts": max(restarts, entry.restarts)})
        exits, code = _exits(main_status(pod, plugin))
        if exits > entry.exits:
            if code is not None:
                message = f"Pod: {pod.namespace}.{pod.name} exited with code {code}"
                events.append(Event(EventType.NORMAL, EXITED_WITH_CODE, message))
            entry = entry.model_copy(update={"exits": exits})
        verdict = _failure(job, plugin, pod)
        if verdict == "permanent":
            permanent.append(pod)
        elif verdict == "retryable" and not entry.recreate:
            fresh_failures.append(pod)
        entries[uid] = entry
    return _Seen(entries, tuple(events), in_place, tuple(fresh_failures), tuple(restarted), tuple(permanent))


def _count(
    job: TrainingJob, pods: Sequence[Pod], count: int, seen: _Seen, *, whole: bool
) -> tuple[int, list[Pod], bool]:
    """The restart count, the pods to mark for re-creation, and whether ``backoffLimit`` is exceeded.

    A whole-job restart counts once and marks every live pod; per-pod restarts count each.
    """
    live = [p for p in pods if p.metadata.uid in seen.entries and p.metadata.deletion_timestamp is None]
    if whole:
        triggered = bool(seen.fresh_failures) or seen.in_place > 0
        wanted = count + 1 if triggered else count
        to_mark = [p for p in live if not seen.entries[p.metadata.uid or ""].recreate] if triggered else []
        performed_if_exceeded = count
    else:
        wanted = count + seen.in_place + len(seen.fresh_failures)
        to_mark = list(seen.fresh_failures)
        performed_if_exceeded = count + seen.in_place
    limit = job.run_policy.backoff_limit
    if limit is not None and wanted > limit and wanted > count:
        return performed_if_exceeded, [], True
    return wanted, to_mark, False


def _whole_job_verdict(job: TrainingJob, plugin: Framework, failures: Sequence[Pod]) -> Verdict:
    kind = plugin.info.kind
    types = sorted({t for p in failures if (t := children.replica_type_of(p, plugin)) is not None})
    if not types:
        return Verdict(ConditionType.RESTARTING, f"{kind} {job.name} is restarting all replicas.")
    because = ", ".join(f"{sum(1 for p in failures if children.replica_type_of(p, plugin) == t)} {t}" for t in types)
    first = failure_detail(min(failures, key=lambda p: p.name), plugin)
    return Verdict(
        ConditionType.RESTARTING,
        f"{kind} {job.name} is restarting all replicas because {because} replica(s) failed ({first}).",
    )


def _gang_restart_event(job: TrainingJob, plugin: Framework, failed: Sequence[Pod], count: int) -> Event:
    limit = job.run_policy.backoff_limit
    budget = f"restart {count} of backoffLimit {limit}" if limit is not None else f"restart {count}"
    what = "; ".join(failure_detail(p, plugin) for p in failed) or "a replica failed"
    message = f"Restarting every replica of {plugin.info.kind} {job.name} together ({budget}): {what}"
    return Event(EventType.WARNING, RESTARTING_ALL, message)


def failure_detail(pod: Pod, plugin: Framework) -> str:
    """``Worker 0 (pod x-worker-0) exited with code 1 (Error)``: who failed and how, for people."""
    rtype, index = children.replica_type_of(pod, plugin), children.replica_index(pod)
    replica = rtype if index is None else f"{rtype} {index}"  # an MPIJob's launcher has no index
    who = f"{replica} (pod {pod.name})" if rtype is not None else f"pod {pod.name}"
    # A pod the cluster ended (its node shut down, was drained or lost) says on which node, and why.
    disrupted = _disruption(pod)
    node = pod.spec.node_name if pod.spec is not None else None
    where = f" on node {node}" if node and disrupted else ""
    main = main_status(pod, plugin)
    ended = None
    if main is not None:
        ended = main.state.terminated or (main.last_state.terminated if main.last_state is not None else None)
    if ended is not None:
        return f"{who}{where} exited with code {ended.exit_code} ({ended.reason or 'Error'}){disrupted}"
    if pod.status.reason:
        told = f" ({pod.status.message})" if pod.status.message else ""
        return f"{who}{where} failed: {pod.status.reason}{told}"
    return f"{who}{where} failed{disrupted}"


def _disruption(pod: Pod) -> str:
    """``: <reason>: <message>`` of the pod's ``DisruptionTarget`` condition, when the cluster ended it."""
    for condition in pod.status.conditions or []:
        if condition.type == "DisruptionTarget" and condition.status == "True":
            return f": {condition.reason}: {condition.message}" if condition.message else f": {condition.reason}"
    return ""


def _failure(job: TrainingJob, plugin: Framework, pod: Pod) -> str | None:
    """``retryable``, ``permanent`` or None (not failed, or failing is the plugin's call: Never)."""
    if pod.phase is not PodPhase.FAILED or pod.metadata.deletion_timestamp is not None:
        return None
    rtype = children.replica_type_of(pod, plugin)
    spec = job.replica_specs.get(rtype) if rtype is not None else None
    policy = spec.restart_policy if spec is not None else None
    if policy in (RestartPolicy.ALWAYS, RestartPolicy.ON_FAILURE):
        return "retryable"
    if policy == RestartPolicy.EXIT_CODE:
        return "retryable" if exit_code(pod, plugin) >= 128 else "permanent"
    return None


def main_status(pod: Pod, plugin: Framework) -> ContainerStatus | None:
    """The status of the pod's main container: the kind's default-named one, or the first when it names none.

    A kind that names one (``pytorch``) finds nothing in a pod without it, as upstream; one that names
    none (MPIJob: the first container is the main one, as in ``children.default_container``) reads
    the status of the pod's first container.
    """
    name = plugin.info.default_container
    if not name:
        name = pod.spec.containers[0].name if pod.spec.containers else ""
    return pod.container_status(name)


def exit_code(pod: Pod, plugin: Framework) -> int:
    """Exit code of the main container (``main_status``); 128 and above (signals) are retryable."""
    main = main_status(pod, plugin)
    if main is None or main.state.terminated is None:
        return NO_EXIT_CODE
    return main.state.terminated.exit_code


def _container_restarts(pod: Pod) -> int:
    statuses = [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]
    return sum(s.restart_count for s in statuses)


def _exits(status: ContainerStatus | None) -> tuple[int, int | None]:
    """How many times the container has exited so far, and the latest exit code seen.

    ``restartCount`` counts restarts already performed; a container that exited and has not been
    restarted yet (terminated, or waiting out a crash-loop back-off) adds its pending exit.
    """
    if status is None:
        return 0, None
    last = status.last_state.terminated if status.last_state is not None else None
    if status.state.terminated is not None:
        return status.restart_count + 1, status.state.terminated.exit_code
    if status.state.waiting is not None and last is not None:
        return status.restart_count + 1, last.exit_code
    return status.restart_count, last.exit_code if last is not None else None


def fail_on_backoff(
    job: TrainingJob,
    plugin: Framework,
    pods: Sequence[Pod],
    services: Sequence[Service],
    status: JobStatus,
    now: datetime,
) -> tuple[JobStatus, tuple[ChildRef, ...]]:
    """Backoff limit exceeded (reference §6.1 step 5): Failed, completionTime, then ``cleanPodPolicy``.

    The Failed condition is decided before the cleanup, as upstream since v1.9.4 (#3420): pods go
    by ``cleanPodPolicy`` like on any other finish (Services always), so under ``None`` and
    ``Running`` the replica whose failure failed the job keeps its terminated pod and its logs.
    """
    status = set_condition(
        status,
        ConditionType.FAILED,
        reason=f"{plugin.info.kind}{ConditionType.FAILED.value}",
        message=backoff_message(job),
        now=now,
    )
    status = status.model_copy(update={"completion_time": status.completion_time or now})
    status, _ = pending(job, plugin, pods, status, None, now, finished=True)
    return status, lifecycle.cleanup(job, pods, services)


# -- whole-job restart: pods of OnFailure replicas do not restart in place ----------------------------


def for_whole_gang_restarts(
    job: TrainingJob, plugin: Framework, created: Iterable[Pod | Service]
) -> list[Pod | Service]:
    """Under whole-gang restarts, OnFailure replicas' pods get ``restartPolicy: Never``.

    The operator then sees the crash as a failed pod at once and restarts every replica; an
    in-place restart would bring one rank back alone into a world that is waiting for it.
    """
    if not whole_job(job, plugin):
        return list(created)
    out: list[Pod | Service] = []
    for obj in created:
        if isinstance(obj, Pod) and obj.spec.restart_policy == RestartPolicy.ON_FAILURE:
            obj = obj.model_copy(update={"spec": obj.spec.model_copy(update={"restart_policy": "Never"})})
        out.append(obj)
    return out


# -- pods pending too long (upstream #2001) ------------------------------------------------------------


def pending(
    job: TrainingJob,
    plugin: Framework,
    pods: Sequence[Pod],
    status: JobStatus,
    timeout: timedelta | None,
    now: datetime,
    *,
    finished: bool,
) -> tuple[JobStatus, timedelta | None]:
    """The ``Pending`` condition, and when to look again for a pod that is not late yet.

    True (reason: what the pod waits on, e.g. ``Unschedulable``, ``ImagePullBackOff``,
    ``CreateContainerConfigError``) while a pod has been Pending longer than ``timeout``; flipped
    to False in place once none is (one step back if it was last, so that the ``State`` column,
    the last condition, never shows a cleared Pending).
    """
    waiting = [
        p
        for p in pods
        if p.phase is PodPhase.PENDING
        and p.metadata.deletion_timestamp is None
        and p.metadata.creation_timestamp is not None
    ]
    late: list[Pod] = []
    recheck: timedelta | None = None
    if timeout is not None and not finished:
        for pod in waiting:
            created = pod.metadata.creation_timestamp
            assert created is not None
            due = created + timeout - now
            if due <= timedelta(0):
                late.append(pod)
            elif recheck is None or due < recheck:
                recheck = due
    current = find(status, ConditionType.PENDING)
    if late and timeout is not None:
        pod = min(late, key=lambda p: (p.metadata.creation_timestamp, p.name))
        reason, detail = waiting_reason(pod)
        seconds = int(timeout.total_seconds())
        message = f"{plugin.info.kind} {job.name}: pod {pod.name} has been pending for more than {seconds}s"
        message += f" ({reason}: {detail})" if detail else f" ({reason})"
        if current is not None and current.status == TRUE and current.reason == reason:
            return status, recheck
        return _put(status, current, reason, message, now), recheck
    if current is not None and current.status == TRUE:
        flipped = current.model_copy(update={"status": FALSE, "last_update_time": now, "last_transition_time": now})
        conds = [flipped if c is current else c for c in status.conditions]
        if len(conds) > 1 and conds[-1] is flipped:
            # The State column shows the last condition: a cleared Pending must not be it.
            conds[-2:] = [flipped, conds[-2]]
        status = status.model_copy(update={"conditions": conds})
    return status, recheck


def _put(status: JobStatus, current: JobCondition | None, reason: str, message: str, now: datetime) -> JobStatus:
    transition = current.last_transition_time if current is not None and current.status == TRUE else now
    new = JobCondition(
        type=ConditionType.PENDING,
        status=TRUE,
        reason=reason,
        message=message,
        last_update_time=now,
        last_transition_time=transition,
    )
    kept = [c for c in status.conditions if c.type != ConditionType.PENDING]
    return status.model_copy(update={"conditions": [*kept, new]})


def waiting_reason(pod: Pod) -> tuple[str, str]:
    """Why a Pending pod waits: not scheduled, else the first container stuck on something."""
    for cond in pod.status.conditions or []:
        if cond.type == "PodScheduled" and cond.status == FALSE:
            return cond.reason or "Unschedulable", cond.message or ""
    statuses = [*(pod.status.init_container_statuses or []), *(pod.status.container_statuses or [])]
    for cs in statuses:
        waiting = cs.state.waiting
        if waiting is not None and waiting.reason and waiting.reason not in _PROGRESS:
            return waiting.reason, waiting.message or ""
    for cs in statuses:
        if cs.state.waiting is not None and cs.state.waiting.reason:
            return cs.state.waiting.reason, cs.state.waiting.message or ""
    return pod.status.reason or "Pending", pod.status.message or ""
