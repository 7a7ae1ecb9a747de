"""What kube-controller-manager's Job controller (v1.32) decides for one Job, as a pure function.

``reconcile(job, pods, now, backoff)`` reads a Job, the pods it controls and the time, and returns a
``Plan``: pods to create (how many) and delete, tracking finalizers to remove, the status to
write, events, the Job to delete (TTL) and when to look again. Nothing here does I/O.

The rules follow upstream's ``syncJob``:

* pods carry the ``batch.kubernetes.io/job-tracking`` finalizer until they are counted: a finished
  pod goes first into ``status.uncountedTerminatedPods``, its finalizer is removed after that
  status is written, and only a pod seen without it moves into ``succeeded``/``failed`` (so a pod
  is counted once, even across a restart of the controller);
* a pod has failed when it is Failed or, with ``podReplacementPolicy: TerminatingOrFailed``, being
  deleted before it succeeded; with ``Failed`` a replacement waits until no pod is terminating;
* failures past ``backoffLimit`` (with ``restartPolicy: OnFailure``, the containers' restarts of
  running pods) and a passed ``activeDeadlineSeconds`` (counted from ``startTime``) write
  ``FailureTarget`` first, delete the active pods and write ``Failed`` with the same reason once
  none is terminating; enough successes write ``SuccessCriteriaMet`` then ``Complete``;
* ``suspend`` deletes the active pods (without counting them), writes ``Suspended``; resuming writes
  ``Suspended=False`` (``JobResumed``) and restarts the deadline clock from a new ``startTime``;
* a replacement after failures waits the pod-failure back-off (upstream: 10 s doubling to 10 min);
* a finished Job with ``ttlSecondsAfterFinished`` is deleted once that has passed;
* ``completionMode: Indexed``: one pod per completion index (``create_indexes``), the lowest
  indexes that neither succeeded nor run first, at most ``parallelism`` at a time; the Job is
  complete when every index in ``[0, completions)`` has a succeeded pod, and
  ``status.completedIndexes`` lists them as upstream writes it (``"0-2,4"``).

Not covered: ``podFailurePolicy`` rules, ``successPolicy``,
``backoffLimitPerIndex``, ``managedBy``, adoption of orphan pods by selector.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.kit.conditions import set_condition
from trainyard.kit.plans import Event

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPONENT = "job-controller"
# Condition reasons and messages, as batch/v1 and the controller word them.
COMPLETIONS_REACHED = ("CompletionsReached", "Reached expected number of succeeded pods")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
SUSPENDED = ("JobSuspended", "Job suspended")
RESUMED = ("JobResumed", "Job resumed")
TERMINAL = ("Complete", "Failed")


@dataclass(frozen=True)
class Backoff:
    """The delay before a replacement after ``n`` failures in a row: ``base * 2^(n-1)``, at most ``cap``."""

    base: float = 10.0
    cap: float = 600.0

    def delay(self, failures: int) -> float:
        return 0.0 if failures <= 0 else min(self.base * 2 ** (failures - 1), self.cap)


@dataclass(frozen=True)
class Plan:
    """What one pass decided, as the controller applies it (in this order)."""

    release: tuple[str, ...] = ()  # pods to delete without counting them (suspend): finalizer first
    delete: tuple[str, ...] = ()  # active pods to delete, finalizers kept (they count)
    create: int = 0
    create_indexes: tuple[int, ...] = ()  # Indexed: the completion index of each new pod
    status: Obj | None = None  # the whole new status, when it changed
    unfinalize: tuple[str, ...] = ()  # pods whose tracking finalizer goes, after status
    events: tuple[Event, ...] = ()
    delete_job: bool = False
    requeue_after: float | None = None


@dataclass
class Draft:
    """A plan as one pass builds it, step by step; ``done`` is the ``Plan`` it returns."""

    create: int = 0
    create_indexes: list[int] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    release: list[str] = field(default_factory=list)
    unfinalize: list[str] = field(default_factory=list)
    status: Obj | None = None
    events: list[Event] = field(default_factory=list)
    delete_job: bool = False
    requeue_after: float | None = None

    def wake(self, seconds: float) -> None:
        seconds = max(seconds, 0.0)
        self.requeue_after = seconds if self.requeue_after is None else min(self.requeue_after, seconds)

    def done(self) -> Plan:
        return Plan(
            release=tuple(self.release),
            delete=tuple(self.delete),
            create=self.create,
            create_indexes=tuple(self.create_indexes),
            status=self.status,
            unfinalize=tuple(self.unfinalize),
            events=tuple(self.events),
            delete_job=self.delete_job,
            requeue_after=self.requeue_after,
        )


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def completion_index(pod: Obj) -> int | None:
    """The pod's completion index (annotation, else label), None when absent or not a number."""
    m = _meta(pod)
    value = (m.get("annotations") or {}).get(COMPLETION_INDEX) or (m.get("labels") or {}).get(COMPLETION_INDEX)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def parse_indexes(text: str | None) -> set[int]:
    """``"0-2,4"`` → ``{0, 1, 2, 4}`` (``status.completedIndexes``)."""
    out: set[int] = set()
    for part in (text or "").split(","):
        if not part.strip():
            continue
        low, _, high = part.partition("-")
        out.update(range(int(low), int(high or low) + 1))
    return out


def format_indexes(indexes: set[int]) -> str:
    """The compressed interval list upstream writes: sorted, runs joined with ``-``."""
    runs: list[list[int]] = []
    for i in sorted(indexes):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def indexed(spec: Obj) -> bool:
    return spec.get("completionMode") == "Indexed"


def tracked(pod: Obj) -> bool:
    return TRACKING_FINALIZER in (_meta(pod).get("finalizers") or [])


def finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` once the Job has that condition (True), else None."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in TERMINAL and c.get("status") == "True":
            return str(c["type"])
    return None


def is_active(pod: Obj) -> bool:
    return _phase(pod) not in ("Succeeded", "Failed") and not _meta(pod).get("deletionTimestamp")


def is_terminating(pod: Obj) -> bool:
    return _phase(pod) not in ("Succeeded", "Failed") and bool(_meta(pod).get("deletionTimestamp"))


def is_failed(pod: Obj, spec: Obj) -> bool:
    if _phase(pod) == "Failed":
        return True
    if spec.get("podReplacementPolicy") == "Failed":
        return False
    # A pod deleted before it succeeded counts as failed: it may never reach a phase at all.
    return bool(_meta(pod).get("deletionTimestamp")) and _phase(pod) != "Succeeded"


def is_ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _restarts(pod: Obj) -> int:
    status = pod.get("status") or {}
    listed = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    return sum(int(s.get("restartCount") or 0) for s in listed)


def past_backoff_on_failure(spec: Obj, pods: list[Obj]) -> bool:
    """With ``restartPolicy: OnFailure`` the kubelet restarts in place; those restarts count as failures."""
    if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(_restarts(p) for p in pods if _phase(p) in ("Running", "Pending"))
    limit = int(spec.get("backoffLimit") or 0)
    return restarts > 0 if limit == 0 else restarts >= limit


def _finished_at(pod: Obj) -> datetime | None:
    status = pod.get("status") or {}
    times = [
        s.get("state", {}).get("terminated", {}).get("finishedAt")
        for s in (status.get("containerStatuses") or [])
        if isinstance(s, dict)
    ]
    found = [parse_time(t) for t in times if t] or (
        [parse_time(_meta(pod)["deletionTimestamp"])] if _meta(pod).get("deletionTimestamp") else []
    )
    return max(found) if found else None


def backoff_remaining(spec: Obj, pods: list[Obj], now: datetime, backoff: Backoff) -> float:
    """Seconds before a replacement may be created: failures since the last success, from the last one."""
    successes = [t for p in pods if _phase(p) == "Succeeded" and (t := _finished_at(p)) is not None]
    last_success = max(successes) if successes else None
    failures = [
        t
        for p in pods
        if is_failed(p, spec) and (t := _finished_at(p)) is not None and (last_success is None or t > last_success)
    ]
    if not failures:
        return 0.0
    ready_at = max(failures) + timedelta(seconds=backoff.delay(len(failures)))
    return max((ready_at - now).total_seconds(), 0.0)


def condition(kind: str, status: str, reason: str, message: str, now: str) -> Obj:
    return {
        "type": kind,
        "status": status,
        "lastProbeTime": now,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _find(conditions: list[Obj], kind: str) -> Obj | None:
    return next((c for c in conditions if c.get("type") == kind), None)


def _ensure(conditions: list[Obj], kind: str, status: str, why: tuple[str, str], now: str) -> bool:
    """upstream's ``ensureJobConditionStatus``: set an existing condition, add only a True one."""
    if _find(conditions, kind) is None and status != "True":
        return False
    conditions[:], changed = set_condition(conditions, kind, status, *why, now, lastProbeTime=now)
    return changed


def _ttl(job: Obj, now: datetime, plan: Draft) -> None:
    ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
    if ttl is None or _meta(job).get("deletionTimestamp"):
        return
    status = job.get("status") or {}
    ends = [c.get("lastTransitionTime") for c in status.get("conditions") or [] if c.get("type") in TERMINAL]
    at = status.get("completionTime") or next((t for t in ends if t), None)
    if not at:
        return
    remaining = (parse_time(at) + timedelta(seconds=int(ttl)) - now).total_seconds()
    if remaining <= 0:
        plan.delete_job = True
    else:
        plan.wake(remaining)


def reconcile(job: Obj, pods: list[Obj], now: datetime, backoff: Backoff | None = None) -> Plan:
    """One level-triggered pass over a Job and the pods it controls: the plan."""
    return _draft(job, pods, now, backoff).done()


def _draft(job: Obj, pods: list[Obj], now: datetime, backoff: Backoff | None) -> Draft:
    """One level-triggered pass over a Job and the pods it controls (``pods``: ownerReference to its uid)."""
    backoff = backoff or Backoff()
    plan = Draft()
    stamp = format_time(now)
    if _meta(job).get("deletionTimestamp") or finished(job):
        # Nothing more to count: release every finalizer so the pods can go.
        plan.unfinalize = [_meta(p)["name"] for p in pods if tracked(p)]
        _ttl(job, now, plan)
        return plan
    spec = job.get("spec") or {}
    old = job.get("status") or {}
    status = copy.deepcopy(old)
    conditions: list[Obj] = status.setdefault("conditions", [])
    uncounted = status.setdefault("uncountedTerminatedPods", {})
    with_finalizer = {_meta(p).get("uid") for p in pods if tracked(p)}
    # Pods listed as uncounted whose finalizer is gone are counted now, exactly once.
    for kind in ("succeeded", "failed"):
        listed = uncounted.get(kind) or []
        keep = [uid for uid in listed if uid in with_finalizer]
        status[kind] = int(status.get(kind) or 0) + len(listed) - len(keep)
        if keep:
            uncounted[kind] = keep
        else:
            uncounted.pop(kind, None)
    listed_uids = set(uncounted.get("succeeded") or []) | set(uncounted.get("failed") or [])
    fresh = [p for p in pods if tracked(p) and _meta(p).get("uid") not in listed_uids]
    new_succeeded = [p for p in fresh if _phase(p) == "Succeeded"]
    new_failed = [p for p in fresh if _phase(p) != "Succeeded" and is_failed(p, spec)]
    succeeded = status["succeeded"] + len(uncounted.get("succeeded") or []) + len(new_succeeded)
    failed = status["failed"] + len(uncounted.get("failed") or []) + len(new_failed)
    suspended = spec.get("suspend") is True
    if not status.get("startTime") and not suspended:
        status["startTime"] = stamp
    active = [p for p in pods if is_active(p)]
    terminating = sum(1 for p in pods if is_terminating(p))
    ready = sum(1 for p in active if is_ready(p))

    final = _target(spec, status, conditions, pods, failed, suspended, now, plan)
    if final is None:
        final, terminating, active_count = _manage(
            spec, status, conditions, pods, active, succeeded, now, plan, backoff
        )
        terminating += len(plan.release)
        ready = 0 if plan.release else ready
    else:
        plan.delete = [_meta(p)["name"] for p in active]
        terminating += len(active)
        active_count, ready = 0, 0
    # Finished pods are listed as uncounted now; their finalizers go once that status is written.
    # Once the Job is finishing, every pod that is not Succeeded counts as failed.
    failing_all = final is not None and final["type"] == "Failed"
    for pod in fresh:
        uid = _meta(pod)["uid"]
        if _phase(pod) == "Succeeded":
            uncounted.setdefault("succeeded", []).append(uid)
        elif is_failed(pod, spec) or failing_all:
            uncounted.setdefault("failed", []).append(uid)
        else:
            continue
        plan.unfinalize.append(_meta(pod)["name"])
    if final is not None and not (uncounted.get("succeeded") or uncounted.get("failed")) and terminating == 0:
        _ensure(conditions, final["type"], "True", (final["reason"], final["message"]), stamp)
        if final["type"] == "Complete":
            status["completionTime"] = stamp
            plan.events.append(Event.normal("Completed", "Job completed"))
        else:
            plan.events.append(Event.warning(final["reason"], final["message"]))
    status["active"] = active_count
    status["ready"] = ready
    status["terminating"] = terminating
    for key in ("active", "succeeded", "failed"):  # omitempty, while ready and terminating are pointers
        if not status[key]:
            del status[key]
    if not conditions:
        status.pop("conditions")
    if status != old:
        plan.status = status
    return plan


def _target(
    spec: Obj,
    status: Obj,
    conditions: list[Obj],
    pods: list[Obj],
    failed: int,
    suspended: bool,
    now: datetime,
    plan: Draft,
) -> Obj | None:
    """The end the Job is already heading to (its interim condition written), a failure found now, or None."""
    stamp = format_time(now)
    target = _find(conditions, "FailureTarget")
    if target is not None and target.get("status") == "True":
        return {"type": "Failed", **_why(target)}
    met = _find(conditions, "SuccessCriteriaMet")
    if met is not None and met.get("status") == "True":
        return {"type": "Complete", **_why(met)}
    why: tuple[str, str] | None = None
    if failed > int(spec.get("backoffLimit") or 0) or past_backoff_on_failure(spec, pods):
        why = BACKOFF_LIMIT_EXCEEDED
    elif spec.get("activeDeadlineSeconds") is not None and status.get("startTime") and not suspended:
        left = parse_time(status["startTime"]) + timedelta(seconds=int(spec["activeDeadlineSeconds"])) - now
        if left.total_seconds() <= 0:
            why = DEADLINE_EXCEEDED
        else:
            plan.wake(left.total_seconds())
    if why is None:
        return None
    conditions.append(condition("FailureTarget", "True", *why, stamp))
    return {"type": "Failed", "reason": why[0], "message": why[1]}


def _manage(
    spec: Obj,
    status: Obj,
    conditions: list[Obj],
    pods: list[Obj],
    active: list[Obj],
    succeeded: int,
    now: datetime,
    plan: Draft,
    backoff: Backoff,
) -> tuple[Obj | None, int, int]:
    """upstream's ``manageJob`` and what follows it: pods to run, completion, suspension.

    Returns the final condition (``Complete``) when reached, the pods terminating and the active count.
    """
    stamp = format_time(now)
    terminating = sum(1 for p in pods if is_terminating(p))
    count = len(active)
    if spec.get("suspend") is True:
        plan.release = [_meta(p)["name"] for p in active]
        count = 0
    else:
        parallelism = int(spec.get("parallelism") or 0)
        completions = spec.get("completions")
        if indexed(spec):
            return _manage_indexed(spec, status, conditions, pods, active, now, plan, backoff)
        if completions is None:
            want = count if succeeded > 0 else parallelism
        else:
            want = max(min(int(completions) - succeeded, parallelism), 0)
        if count > want:
            # Too many: the newest go first (upstream prefers unscheduled, then not ready, then newest).
            surplus = sorted(active, key=lambda p: _meta(p).get("creationTimestamp") or "", reverse=True)
            plan.release = [_meta(p)["name"] for p in surplus[: count - want]]
            count = want
        else:
            waiting = terminating if spec.get("podReplacementPolicy") == "Failed" else 0
            missing = want - waiting - count
            if missing > 0:
                remaining = backoff_remaining(spec, pods, now, backoff)
                if remaining > 0:
                    plan.wake(remaining)
                else:
                    plan.create = missing
                    count += missing
        done = succeeded >= int(completions) if completions is not None else succeeded > 0
        if done and count == 0:
            return _success_criteria_met(conditions, stamp), 0, 0
    if spec.get("suspend") is True:
        if _ensure(conditions, "Suspended", "True", SUSPENDED, stamp):
            plan.events.append(Event.normal("Suspended", "Job suspended"))
    else:
        _resume(status, conditions, plan, stamp)
    return None, terminating, count


def _success_criteria_met(conditions: list[Obj], stamp: str) -> Obj:
    """The interim ``SuccessCriteriaMet`` written, and the end it heads to."""
    conditions.append(condition("SuccessCriteriaMet", "True", *COMPLETIONS_REACHED, stamp))
    return {"type": "Complete", "reason": COMPLETIONS_REACHED[0], "message": COMPLETIONS_REACHED[1]}


def _resume(status: Obj, conditions: list[Obj], plan: Draft, stamp: str) -> None:
    if _ensure(conditions, "Suspended", "False", RESUMED, stamp):
        plan.events.append(Event.normal("Resumed", "Job resumed"))
        # The deadline counts the time a Job is continuously active: it starts again on resume.
        status["startTime"] = stamp


def _manage_indexed(
    spec: Obj,
    status: Obj,
    conditions: list[Obj],
    pods: list[Obj],
    active: list[Obj],
    now: datetime,
    plan: Draft,
    backoff: Backoff,
) -> tuple[Obj | None, int, int]:
    """``manageJob`` for ``completionMode: Indexed``: one pod per index not yet succeeded."""
    stamp = format_time(now)
    completions = int(spec.get("completions") or 0)
    parallelism = int(spec.get("parallelism") or 0)
    terminating_pods = [p for p in pods if is_terminating(p)]
    done = parse_indexes(status.get("completedIndexes"))
    done |= {i for p in pods if _phase(p) == "Succeeded" and (i := completion_index(p)) is not None}
    done = {i for i in done if 0 <= i < completions}
    if done:
        status["completedIndexes"] = format_indexes(done)
    running: dict[int, Obj] = {}
    surplus: list[Obj] = []
    for pod in sorted(active, key=lambda p: _meta(p).get("creationTimestamp") or ""):
        i = completion_index(pod)
        if i is None or i in done or i >= completions or i in running:
            surplus.append(pod)  # a duplicate, out-of-range or already succeeded index
        else:
            running[i] = pod
    plan.release = [_meta(p)["name"] for p in surplus]
    count = len(running)
    busy = set(running)
    if spec.get("podReplacementPolicy") == "Failed":
        busy |= {i for p in terminating_pods if (i := completion_index(p)) is not None}
    want = max(min(completions - len(done), parallelism), 0)
    if count < want:
        pending = [i for i in range(completions) if i not in done and i not in busy][: want - count]
        if pending:
            remaining = backoff_remaining(spec, pods, now, backoff)
            if remaining > 0:
                plan.wake(remaining)
            else:
                plan.create_indexes = pending
                plan.create = len(pending)
                count += len(pending)
    if len(done) >= completions and count == 0:
        return _success_criteria_met(conditions, stamp), 0, 0
    _resume(status, conditions, plan, stamp)  # never suspended here: ``_manage`` handles that first
    return None, len(terminating_pods), count


def _why(found: Obj | None) -> Obj:
    found = found or {}
    return {"reason": found.get("reason", ""), "message": found.get("message", "")}
