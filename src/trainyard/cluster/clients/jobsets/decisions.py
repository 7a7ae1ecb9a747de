"""What JobSet's controller decides for one JobSet, as a pure function.

``reconcile(jobset, jobs, now, service_exists=...)`` reads a JobSet, the batch/v1 Jobs it controls and
the time, and returns a ``Plan``: Jobs to create, delete (foreground) or (un)suspend, the headless
Service to create, the status to write, events, the JobSet to delete (TTL) and when to look again.
Nothing here does I/O. The rules follow upstream's ``reconcile``:

* a JobSet with ``spec.managedBy`` other than JobSet's controller is left alone;
* child Jobs are ``<jobset>-<replicatedJob>-<index>`` with upstream's labels and annotations (also
  on their pod templates) and, with ``network.enableDNSHostnames``, the pod ``subdomain``; a
  headless Service of that name selects the JobSet's pods. Indexed Jobs give their pods the
  hostname ``<job>-<podIndex>``, so a pod is ``<jobset>-<rjob>-<jobIdx>-<podIdx>.<subdomain>``;
* Jobs labelled with a ``restart-attempt`` below ``status.restarts`` belong to an earlier attempt
  and are deleted; their replacements are created once they are gone;
* a failed Job: without ``failurePolicy`` the JobSet fails (``FailedJobs``); otherwise the first
  matching rule's action (``FailJobSet``, ``RestartJobSet``, ``RestartJobSetAndIgnoreMaxRestarts``)
  or, when none matches, ``RestartJobSet``, which fails with ``ReachedMaxRestarts`` once
  ``restartsCountTowardsMax`` reached ``maxRestarts``;
* ``successPolicy``: All (every Job of the target replicated Jobs) or Any (one) succeeded →
  ``Completed``; a finished JobSet deletes its active Jobs and, with ``ttlSecondsAfterFinished``,
  itself once that has passed;
* ``startupPolicy`` InOrder creates a replicated Job's Jobs only when the ones before it are all
  ready (``StartupPolicyInProgress`` / ``StartupPolicyCompleted``);
* ``dependsOn``: a replicated Job's Jobs are created (and, on resume, unsuspended) only once every
  replicated Job it depends on has all its Jobs Ready (ready, succeeded or failed, as counted in
  ``status.replicatedJobsStatus``) or Complete (succeeded);
* ``suspend`` is propagated to the child Jobs (``Suspended`` True ``SuspendedJobs``); resuming
  copies the replicated Jobs' pod-template labels, annotations, ``nodeSelector``, ``tolerations``
  and ``schedulingGates`` (which a suspended JobSet may change) into the Jobs as it unsuspends them
  (``Suspended`` False ``ResumeJobs``).

Not covered: ``coordinator``, ``BlockingRecreate``, per-Job restarts
(``RestartJob``), in-place restart, ``volumeClaimPolicies``, exclusive placement, elastic scaling.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from trainyard.api import jobset as api
from trainyard.api.meta import Obj, format_time, parse_time
from trainyard.kit.conditions import find, set_condition
from trainyard.kit.plans import Event, EventType

COMPONENT = "jobset-controller"
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = ("FailedJobs", "jobset failed due to one or more job failures")
MAX_RESTARTS = ("ReachedMaxRestarts", "jobset failed due to reaching max number of restarts")
FAIL_ACTION = ("FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action")
RESTART_ACTION = ("RestartJobSetFailurePolicyAction", "applying RestartJobSet failure policy action")
RESTART_IGNORING_MAX = (
    "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
    "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
)
SUSPENDED = ("SuspendedJobs", "jobset is suspended")
RESUMED = ("ResumeJobs", "jobset is resumed")
IN_ORDER_PROGRESS = ("InOrderStartupPolicyInProgress", "in order startup policy is in progress")
IN_ORDER_DONE = ("InOrderStartupPolicyCompleted", "in order startup policy has completed")
RESTARTING = "RestartingJobSet"
TERMINAL = ("Completed", "Failed")
# Conditions that cannot both be True (upstream's exclusiveConditions).
EXCLUSIVE = ({"StartupPolicyInProgress", "StartupPolicyCompleted"},)


@dataclass(frozen=True)
class Plan:
    """What one pass decided, as the controller applies it (in this order)."""

    delete: tuple[str, ...] = ()  # Job names, deleted in the foreground
    service: Obj | None = None  # the headless Service to create
    create: tuple[Obj, ...] = ()  # whole Job objects
    suspend: Mapping[str, bool] = field(default_factory=dict)  # Job name -> new spec.suspend
    # Job name -> pod-template fields to merge as it is unsuspended (a merge patch of spec.template)
    templates: Mapping[str, Obj] = field(default_factory=dict)
    status: Obj | None = None  # the whole new status, when it changed
    events: tuple[Event, ...] = ()
    delete_jobset: bool = False
    requeue_after: float | None = None


@dataclass
class Draft:
    """A plan as one pass builds it, step by step; ``done`` is the ``Plan`` it returns."""

    create: list[Obj] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    suspend: dict[str, bool] = field(default_factory=dict)
    templates: dict[str, Obj] = field(default_factory=dict)
    service: Obj | None = None
    status: Obj | None = None
    events: list[Event] = field(default_factory=list)
    delete_jobset: bool = False
    requeue_after: float | None = None

    def done(self) -> Plan:
        return Plan(
            delete=tuple(self.delete),
            service=self.service,
            create=tuple(self.create),
            suspend=dict(self.suspend),
            templates=dict(self.templates),
            status=self.status,
            events=tuple(self.events),
            delete_jobset=self.delete_jobset,
            requeue_after=self.requeue_after,
        )


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def job_finished(job: Obj) -> str | None:
    """``Complete`` or ``Failed`` when the Job has that condition True."""
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def finished(jobset: Obj) -> str | None:
    for c in (jobset.get("status") or {}).get("conditions") or []:
        if c.get("type") in TERMINAL and c.get("status") == "True":
            return str(c["type"])
    return None


def managed_elsewhere(jobset: Obj) -> bool:
    manager = _spec(jobset).get("managedBy")
    return bool(manager) and manager != api.CONTROLLER_NAME


def dns_hostnames(jobset: Obj) -> bool:
    return ((_spec(jobset).get("network") or {}).get("enableDNSHostnames")) is True


def job_key(namespace: str, name: str) -> str:
    """Upstream's ``jobHashKey``: the SHA-1 of ``<namespace>/<job>``."""
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()


# -- building child objects -----------------------------------------------------------------------------


def _identity(jobset: Obj, rjob: Obj, index: int) -> dict[str, str]:
    m, spec = _meta(jobset), _spec(jobset)
    rjobs = spec.get("replicatedJobs") or []
    name = api.job_name(m["name"], rjob["name"], index)
    group = str(rjob.get("groupName") or "default")
    global_index = sum(int(r.get("replicas") or 1) for r in rjobs[: rjobs.index(rjob)]) + index
    in_group = [r for r in rjobs if str(r.get("groupName") or "default") == group]
    group_index = sum(int(r.get("replicas") or 1) for r in in_group[: in_group.index(rjob)]) + index
    return {
        api.JOBSET_NAME: m["name"],
        api.JOBSET_UID: str(m.get("uid") or ""),
        api.REPLICATED_JOB_NAME: rjob["name"],
        api.RESTARTS: str(int((jobset.get("status") or {}).get("restarts") or 0)),
        api.REPLICATED_JOB_REPLICAS: str(int(rjob.get("replicas") or 1)),
        api.GLOBAL_REPLICAS: str(sum(int(r.get("replicas") or 1) for r in rjobs)),
        api.JOB_INDEX: str(index),
        api.JOB_KEY: job_key(m.get("namespace") or "", name),
        api.JOB_GLOBAL_INDEX: str(global_index),
        api.GROUP_NAME: group,
        api.GROUP_REPLICAS: str(sum(int(r.get("replicas") or 1) for r in in_group)),
        api.JOB_GROUP_INDEX: str(group_index),
    }


def _label(meta: Obj, identity: dict[str, str]) -> None:
    for key in ("labels", "annotations"):
        meta[key] = {**(meta.get(key) or {}), **identity}


def owner_reference(jobset: Obj) -> Obj:
    m = _meta(jobset)
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "name": m["name"],
        "uid": m["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def build_job(jobset: Obj, rjob: Obj, index: int) -> Obj:
    """Upstream's ``constructJob``: the replicated Job's template, named and labelled, owned by the JobSet."""
    m = _meta(jobset)
    template = copy.deepcopy(rjob.get("template") or {})
    tmeta = template.get("metadata") or {}
    meta: Obj = {
        "name": api.job_name(m["name"], rjob["name"], index),
        "namespace": m.get("namespace") or "",
        "ownerReferences": [owner_reference(jobset)],
    }
    for key in ("labels", "annotations"):
        if tmeta.get(key):
            meta[key] = dict(tmeta[key])
    identity = _identity(jobset, rjob, index)
    _label(meta, identity)
    spec: Obj = template.get("spec") or {}
    pod = spec.setdefault("template", {})
    _label(pod.setdefault("metadata", {}), identity)
    if dns_hostnames(jobset):
        pod.setdefault("spec", {})["subdomain"] = api.subdomain(jobset)
    spec["suspend"] = _spec(jobset).get("suspend") is True
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def build_service(jobset: Obj) -> Obj:
    m = _meta(jobset)
    network = _spec(jobset).get("network") or {}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": api.subdomain(jobset),
            "namespace": m.get("namespace") or "",
            "ownerReferences": [owner_reference(jobset)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {api.JOBSET_NAME: m["name"]},
            "publishNotReadyAddresses": network.get("publishNotReadyAddresses") is not False,
        },
    }


# -- conditions -----------------------------------------------------------------------------------------


def _set(status: Obj, kind: str, value: str, why: tuple[str, str], now: str, plan: Draft, type_: str) -> bool:
    """Upstream's ``updateCondition`` + event: add only a True condition; exclusive ones turn False."""
    conditions: list[Obj] = status.setdefault("conditions", [])
    changed = False
    for c in conditions:
        if value == "True" and c.get("status") == "True" and any({kind, c.get("type")} == e for e in EXCLUSIVE):
            c["status"] = "False"
            changed = True
    if find(conditions, kind) is not None or value == "True":
        conditions[:], updated = set_condition(conditions, kind, value, *why, now)
        changed = changed or updated
    if changed:
        plan.events.append(Event(EventType(type_), why[0], why[1]))
    return changed


def _fail(status: Obj, why: tuple[str, str], now: str, plan: Draft) -> None:
    _set(status, "Failed", "True", why, now, plan, "Warning")
    _set(status, RESTARTING, "False", ("JobSetFailed", "jobset failed"), now, plan, "Normal")
    status["terminalState"] = "Failed"


def _complete(status: Obj, now: str, plan: Draft) -> None:
    _set(status, "Completed", "True", COMPLETED, now, plan, "Normal")
    _set(status, RESTARTING, "False", ("JobSetCompleted", COMPLETED[1]), now, plan, "Normal")
    status["terminalState"] = "Completed"


# -- the pass -------------------------------------------------------------------------------------------


@dataclass
class Children:
    active: list[Obj] = field(default_factory=list)
    succeeded: list[Obj] = field(default_factory=list)
    failed: list[Obj] = field(default_factory=list)
    previous: list[Obj] = field(default_factory=list)  # from an earlier restart attempt


def classify(jobs: list[Obj], restarts: int) -> Children:
    out = Children()
    for job in jobs:
        try:
            attempt = int((_meta(job).get("labels") or {}).get(api.RESTARTS, ""))
        except ValueError:
            attempt = -1
        if attempt < restarts:
            out.previous.append(job)
            continue
        state = job_finished(job)
        {None: out.active, "Complete": out.succeeded, "Failed": out.failed}[state].append(job)
    return out


def _rjob_of(job: Obj) -> str:
    return str((_meta(job).get("labels") or {}).get(api.REPLICATED_JOB_NAME) or "")


def replicated_statuses(jobset: Obj, children: Children) -> list[Obj]:
    """Upstream's ``calculateReplicatedJobStatuses``, in the spec's order."""
    counts: dict[str, Obj] = {
        r["name"]: {"name": r["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
        for r in _spec(jobset).get("replicatedJobs") or []
    }
    for job in children.active:
        row = counts.get(_rjob_of(job))
        if row is None:
            continue
        spec, st = _spec(job), job.get("status") or {}
        pods = int(spec.get("parallelism") or 1)
        if spec.get("completions") is not None:
            pods = min(pods, int(spec["completions"]))
        if int(st.get("succeeded") or 0) + int(st.get("ready") or 0) >= pods:
            row["ready"] += 1
        if int(st.get("active") or 0) > 0:
            row["active"] += 1
        if spec.get("suspend") is True:
            row["suspended"] += 1
    for kind, jobs in (("succeeded", children.succeeded), ("failed", children.failed)):
        for job in jobs:
            row = counts.get(_rjob_of(job))
            if row is not None:
                row[kind] += 1
    return list(counts.values())


def _failure_time(job: Obj) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("lastTransitionTime") or "")
    return ""


def _job_failure(job: Obj) -> tuple[str, str]:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("reason") or ""), str(c.get("message") or "")
    return "", ""


def _matching_rule(rules: list[Obj], failed: list[Obj]) -> tuple[Obj | None, Obj]:
    """The first rule that some failed Job matches, with the earliest such Job; else (None, first failed)."""
    ordered = sorted(failed, key=_failure_time)
    for rule in rules:
        for job in ordered:
            reason, message = _job_failure(job)
            reasons, patterns = rule.get("onJobFailureReasons") or [], rule.get("onJobFailureMessagePatterns") or []
            targets = rule.get("targetReplicatedJobs") or []
            if reasons and reason not in reasons:
                continue
            if patterns and not any(re.search(p, message) for p in patterns):
                continue
            if targets and _rjob_of(job) not in targets:
                continue
            return rule, job
    return None, ordered[0]


def _failure_policy(jobset: Obj, status: Obj, failed: list[Obj], now: str, plan: Draft) -> None:
    policy = _spec(jobset).get("failurePolicy")
    if not policy:
        first = sorted(failed, key=_failure_time)[0]
        _fail(status, (FAILED_JOBS[0], f"{FAILED_JOBS[1]} (first failed job: {_meta(first)['name']})"), now, plan)
        return
    rule, job = _matching_rule(policy.get("rules") or [], failed)
    action = (rule or {}).get("action") or "RestartJobSet"
    first = _meta(job)["name"]
    if action == "FailJobSet":
        _fail(status, (FAIL_ACTION[0], f"{FAIL_ACTION[1]} (first failed job: {first})"), now, plan)
        return
    counted = action == "RestartJobSet"
    if counted and int(status.get("restartsCountTowardsMax") or 0) >= int(policy.get("maxRestarts") or 0):
        _fail(status, (MAX_RESTARTS[0], f"{MAX_RESTARTS[1]} (first failed job: {first})"), now, plan)
        return
    why = RESTART_ACTION if counted else RESTART_IGNORING_MAX
    message = f"{why[1]} (first failed job: {first})"
    status["restarts"] = int(status.get("restarts") or 0) + 1
    if counted:
        status["restartsCountTowardsMax"] = int(status.get("restartsCountTowardsMax") or 0) + 1
    reason = f"FailurePolicy_{rule['name']}" if rule is not None else "DefaultFailurePolicy"
    _set(status, RESTARTING, "True", (reason, message), now, plan, "Warning")
    plan.events.append(Event.warning(why[0], message))


def _success(jobset: Obj, succeeded: list[Obj]) -> bool:
    policy = _spec(jobset).get("successPolicy") or {}
    targets = policy.get("targetReplicatedJobs") or []
    matching = sum(1 for j in succeeded if not targets or _rjob_of(j) in targets)
    if policy.get("operator") == "Any":
        return matching >= 1
    expected = sum(
        int(r.get("replicas") or 1)
        for r in _spec(jobset).get("replicatedJobs") or []
        if not targets or r["name"] in targets
    )
    return matching >= expected


def _ttl(jobset: Obj, status: Obj, now: datetime, plan: Draft) -> None:
    ttl = _spec(jobset).get("ttlSecondsAfterFinished")
    if ttl is None or _meta(jobset).get("deletionTimestamp"):
        return
    ends = [c.get("lastTransitionTime") for c in status.get("conditions") or [] if c.get("type") in TERMINAL]
    at = next((t for t in ends if t), None)
    if not at:
        return
    remaining = (parse_time(at) + timedelta(seconds=int(ttl)) - now).total_seconds()
    if remaining <= 0:
        plan.delete_jobset = True
    else:
        plan.requeue_after = remaining


def _started(rjob: Obj, row: Obj | None) -> bool:
    """``allReplicasStarted``: every Job of the replicated Job is ready, succeeded or failed."""
    if row is None:
        return False
    return int(rjob.get("replicas") or 1) == int(row["failed"] + row["ready"] + row["succeeded"])


def dependencies_reached(jobset: Obj, rjob: Obj, rows: list[Obj]) -> bool:
    """Upstream's ``dependencyReachedStatus``: every ``dependsOn`` entry of ``rjob`` has reached its status.

    Ready: the named replicated Job's ready + succeeded + failed Jobs equal its replicas; Complete:
    its succeeded Jobs do. A name with no status row (not a replicated Job) is never reached.
    """
    replicas = {r["name"]: int(r.get("replicas") or 1) for r in _spec(jobset).get("replicatedJobs") or []}
    by_name = {r["name"]: r for r in rows}
    for dep in rjob.get("dependsOn") or []:
        row, wanted = by_name.get(dep.get("name")), replicas.get(dep.get("name"))
        if row is None or wanted is None:
            return False
        if dep.get("status") == "Complete" and row["succeeded"] != wanted:
            return False
        if dep.get("status") == "Ready" and row["ready"] + row["succeeded"] + row["failed"] != wanted:
            return False
    return True


# What resuming copies from a replicated Job's pod template: (part, key, whether it is a map).
_RESUMED_FIELDS = (
    ("metadata", "labels", True),
    ("metadata", "annotations", True),
    ("spec", "nodeSelector", True),
    ("spec", "tolerations", False),
    ("spec", "schedulingGates", False),
)


def _merge_list(first: list[Any] | None, second: list[Any] | None) -> list[Any]:
    out = list(first or [])
    out += [item for item in second or [] if item not in out]
    return out


def resume_template(job: Obj, rjob: Obj) -> Obj:
    """Upstream's ``resumeJob``: the replicated Job's pod-template labels, annotations and scheduling
    directives merged into the Job's (maps: the replicated Job's values win; lists: union), as the
    fields of ``spec.template`` that change (empty when none does)."""
    current = _spec(job).get("template") or {}
    wanted = (_spec(rjob.get("template") or {})).get("template") or {}
    out: Obj = {}
    for part, key, is_map in _RESUMED_FIELDS:
        have, add = (current.get(part) or {}).get(key), (wanted.get(part) or {}).get(key)
        merged: Any = {**(have or {}), **(add or {})} if is_map else _merge_list(have, add)
        if merged != (have or ({} if is_map else [])):
            out.setdefault(part, {})[key] = merged
    return out


def _replicated_jobs(jobset: Obj, children: Children, rows: list[Obj], status: Obj, now: str, plan: Draft) -> None:
    """``reconcileReplicatedJobs``: create the missing Jobs, in order under InOrder."""
    spec = _spec(jobset)
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    suspended = spec.get("suspend") is True
    existing = {_meta(j)["name"] for j in [*children.active, *children.succeeded, *children.failed, *children.previous]}
    by_name = {r["name"]: r for r in rows}
    for rjob in spec.get("replicatedJobs") or []:
        if not dependencies_reached(jobset, rjob, rows):
            continue
        if not suspended and in_order and _started(rjob, by_name.get(rjob["name"])):
            continue
        for index in range(int(rjob.get("replicas") or 1)):
            if api.job_name(_meta(jobset)["name"], rjob["name"], index) not in existing:
                plan.create.append(build_job(jobset, rjob, index))
        if not suspended and in_order:
            _set(status, "StartupPolicyInProgress", "True", IN_ORDER_PROGRESS, now, plan, "Normal")
            return
    if not suspended and in_order:
        _set(status, "StartupPolicyCompleted", "True", IN_ORDER_DONE, now, plan, "Normal")


def _suspend_or_resume(jobset: Obj, children: Children, rows: list[Obj], status: Obj, now: str, plan: Draft) -> None:
    spec = _spec(jobset)
    if spec.get("suspend") is True:
        for job in children.active:
            if _spec(job).get("suspend") is not True:
                plan.suspend[_meta(job)["name"]] = True
        _set(status, "Suspended", "True", SUSPENDED, now, plan, "Normal")
        _set(status, RESTARTING, "False", ("JobSetSuspended", SUSPENDED[1]), now, plan, "Normal")
        return
    in_order = (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
    by_name = {r["name"]: r for r in rows}
    for rjob in spec.get("replicatedJobs") or []:
        if not dependencies_reached(jobset, rjob, rows):
            continue
        if in_order and _started(rjob, by_name.get(rjob["name"])):
            continue
        for job in children.active:
            if _rjob_of(job) == rjob["name"] and _spec(job).get("suspend") is True:
                plan.suspend[_meta(job)["name"]] = False
                template = resume_template(job, rjob)
                if template:
                    plan.templates[_meta(job)["name"]] = template
        if in_order:
            _set(status, "StartupPolicyInProgress", "True", IN_ORDER_PROGRESS, now, plan, "Normal")
            return
    _set(status, "Suspended", "False", RESUMED, now, plan, "Normal")


def reconcile(jobset: Obj, jobs: list[Obj], now: datetime, *, service_exists: bool = False) -> Plan:
    """One level-triggered pass over a JobSet and the Jobs it controls (``jobs``: ownerReference to its uid)."""
    return _draft(jobset, jobs, now, service_exists=service_exists).done()


def _draft(jobset: Obj, jobs: list[Obj], now: datetime, *, service_exists: bool) -> Draft:
    plan = Draft()
    if managed_elsewhere(jobset) or _meta(jobset).get("deletionTimestamp"):
        return plan
    stamp = format_time(now)
    old = jobset.get("status") or {}
    status = copy.deepcopy(old)
    children = classify(jobs, int(status.get("restarts") or 0))
    rows = replicated_statuses(jobset, children)
    status["replicatedJobsStatus"] = rows
    if finished(jobset):
        plan.delete = [_meta(j)["name"] for j in children.active if not _meta(j).get("deletionTimestamp")]
        _ttl(jobset, status, now, plan)
    else:
        _reconcile(jobset, children, rows, status, stamp, plan, service_exists=service_exists)
    if status != old:
        plan.status = status
    return plan


def _reconcile(
    jobset: Obj, children: Children, rows: list[Obj], status: Obj, now: str, plan: Draft, *, service_exists: bool
) -> None:
    plan.delete = [_meta(j)["name"] for j in children.previous if not _meta(j).get("deletionTimestamp")]
    total = sum(int(r.get("replicas") or 1) for r in _spec(jobset).get("replicatedJobs") or [])
    if _spec(jobset).get("suspend") is not True and total == sum(r["ready"] + r["succeeded"] for r in rows):
        _set(status, RESTARTING, "False", ("JobsReady", "all jobs are ready"), now, plan, "Normal")
    if children.failed:
        _failure_policy(jobset, status, children.failed, now, plan)
        return
    if children.succeeded and _success(jobset, children.succeeded):
        _complete(status, now, plan)
        return
    if dns_hostnames(jobset) and not service_exists:
        plan.service = build_service(jobset)
    _replicated_jobs(jobset, children, rows, status, now, plan)
    _suspend_or_resume(jobset, children, rows, status, now, plan)
