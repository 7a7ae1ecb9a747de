"""The pass for a kind run by a launcher Job (``capabilities.LauncherJobs``: MPIJob v2beta1).

The mpi-operator's sync, decided purely (reference §3.7, §8). The job's outcome is its launcher
batch/v1 Job's, which owns the run policy upstream hands it (``backoffLimit``,
``activeDeadlineSeconds``, ``ttlSecondsAfterFinished``, ``suspend``); the engine's own restart
counting and replica verdicts do not apply. One pass:

1. the first pass records Created, a running one ``startTime``;
2. a finished job (``completionTime`` set) only cleans up its workers by ``cleanPodPolicy``
   (``Running`` keeps those that ended; the launcher Job follows its own TTL);
2a. an unsuspended job whose launcher has not finished and whose reported progress fires
   ``runPolicy.earlyStopping`` (``progress.stop_decision``) succeeds with the policy's reason:
   its workers are deleted and its launcher Job suspended, both with their grace period;
3. until the launcher finished: the plugin's companions (Service, hostfile ConfigMap, SSH
   Secret) are kept as wanted; unless suspended, missing worker pods are created and those past
   ``replicas`` deleted; a missing launcher Job is created at once, or, with
   ``WaitForWorkersReady``, once every worker pod is Ready; the workers and the launcher's
   template get the training env (``trainingenv``: progress endpoint, token, resume path);
4. the launcher's ``suspend`` follows the job's. Resuming takes two passes, as the Job API
   demands: its ``status.startTime`` is cleared first (a started Job's template is immutable),
   then the template's labels, annotations, nodeSelector, tolerations and schedulingGates are
   brought up to date (Kueue may have changed them) in the same write that unsuspends it;
5. a suspended job's workers are deleted;
6. the status: Suspended / resumed, the launcher's counts and outcome (``Succeeded`` with its
   completion time; ``Failed`` with its Job's reason, a backoff failure extended with the last
   failed launcher pod's reason and message, or how its container exited when the pod has no
   message: ``restarts.failure_detail``), the workers' counts, any evicted worker failing the
   job, and Running once the launcher runs a pod and every worker runs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Protocol, cast

from trainyard.api import conditions
from trainyard.api.common import CleanPodPolicy, ConditionType, JobCondition, JobStatus, ReplicaStatus, TrainingJob
from trainyard.api.core import Pod, PodPhase
from trainyard.api.meta import TypedObject, parse_time
from trainyard.controller import childdiff, children, gang, lifecycle, progress, restarts, trainingenv
from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import ChildRef, Plan, StatusPatch
from trainyard.frameworks.base import Framework
from trainyard.frameworks.capabilities import LauncherJobs, launcher_jobs
from trainyard.frameworks.network import Network, replica_name
from trainyard.kit.plans import Event, EventType

BATCH_JOB = ("batch", "Job")
EVENT_MESSAGE_LIMIT = 1024
_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")
_LONG_AGO = datetime.min.replace(tzinfo=UTC)  # aware, as the timestamps it is compared with


class Launched(Framework, LauncherJobs, Protocol):
    """A plugin with both contracts (what ``reconcile`` hands this module)."""


def run(observed: Observed, job: TrainingJob, plugin: Launched, settings: ControllerSettings) -> Plan:
    """One pass over a defaulted job of a launched kind; the plan's status only when it changed."""
    return _Pass(observed, job, plugin, settings).plan()


class _Pass:
    def __init__(self, observed: Observed, job: TrainingJob, plugin: Launched, settings: ControllerSettings) -> None:
        self.observed, self.job, self.plugin, self.settings = observed, job, plugin, settings
        self.now = observed.now
        self.kind = plugin.info.kind
        self.qualified = f"{job.namespace}/{job.name}"
        self.suspended = bool(job.run_policy.suspend)
        self.workers = tuple(
            pod
            for pod in observed.pods
            if children.is_owned(pod, job) and children.replica_type_of(pod, plugin) == plugin.worker_type
        )
        self.launcher = self._launcher()
        uid = self.launcher.metadata.uid if self.launcher is not None else None
        self.launcher_pods = tuple(
            pod
            for pod in observed.pods
            if uid and any(r.controller and r.uid == uid for r in pod.metadata.owner_references or [])
        )
        self.events: list[Event] = []

    def _launcher(self) -> TypedObject | None:
        name = self.plugin.launcher_name(self.job)
        found = next(
            (o for o in self.observed.other_children if _group_kind(o) == BATCH_JOB and o.name == name),
            None,
        )
        if found is None or not children.is_owned(found, self.job) or found.metadata.deletion_timestamp is not None:
            return None
        return found

    # -- the pass ------------------------------------------------------------------------------------

    def plan(self) -> Plan:
        status = self.job.status
        if not status.conditions:
            status = self._set(status, ConditionType.CREATED, f"{self.kind} {self.qualified} is created.")
        if conditions.is_finished(status) and status.completion_time is not None:
            return self._finished(status)
        if status.start_time is None and not self.suspended:
            status = status.model_copy(update={"start_time": self.now})

        done = self.launcher is not None and _finished(self.launcher)
        reported = status.training_progress.to_dict() if status.training_progress else None
        stop = progress.stop_decision(reported, self.job.run_policy.early_stopping)
        if stop is not None and not self.suspended and not done:
            return self._stop_early(status, stop)
        plan = Plan()
        if not done:
            plan = self._companions(plan)
            if not self.suspended:
                plan = self._workers(plan)
            if self.launcher is None and self._may_launch():
                launcher = childdiff.adopt(childdiff.as_object(self._launcher_job()), self.job)
                plan = dataclasses.replace(plan, apply=(*plan.apply, launcher))
        if self.launcher is not None:
            plan = self._follow_suspend(plan, self.launcher)
        if self.suspended:
            plan = dataclasses.replace(plan, delete=(*plan.delete, *self._clean_workers()))
        status = self._status(status, done)
        return self._with_status(plan, status)

    def _finished(self, status: JobStatus) -> Plan:
        policy = self.job.run_policy.clean_pod_policy or CleanPodPolicy.NONE
        if policy is CleanPodPolicy.NONE:
            return self._with_status(Plan(), status)
        statuses = dict(status.replica_statuses)
        statuses[self.plugin.worker_type] = ReplicaStatus(active=0)
        status = status.model_copy(update={"replica_statuses": statuses})
        return self._with_status(Plan(delete=self._clean_workers()), status)

    def _stop_early(self, status: JobStatus, stop: progress.Stop) -> Plan:
        """``runPolicy.earlyStopping`` fired (``lifecycle.succeed_early`` for a launched kind).

        The job succeeds with the policy's reason; its workers still there are deleted whatever
        ``cleanPodPolicy``, and its launcher Job is suspended, so the Job controller deletes the
        launcher's pod without replacing it or counting a failure. Both go with their grace
        period (``mpirun`` gets SIGTERM; the ranks it started go with it and with their workers).
        A job whose counts already finished it (an evicted worker) keeps that outcome.
        """
        counted = self._status(status, False)
        if conditions.is_finished(counted):
            return self._with_status(Plan(), counted)
        status = conditions.set_condition(
            counted, ConditionType.SUCCEEDED, reason=stop.reason, message=stop.message, now=self.now
        )
        status = status.model_copy(
            update={
                "completion_time": status.completion_time or self.now,
                "replica_statuses": lifecycle.finished_replica_statuses(status),
            }
        )
        workers = tuple(ChildRef("Pod", p.name) for p in self.workers if p.metadata.deletion_timestamp is None)
        plan = Plan(delete=workers)
        if self.launcher is not None:
            body = self.launcher.to_dict()
            body.setdefault("spec", {})["suspend"] = True
            plan = dataclasses.replace(plan, apply=(TypedObject.model_validate(body),))
        return self._with_status(plan, status)

    def _companions(self, plan: Plan) -> Plan:
        running = [p.name for p in self.workers if p.phase is PodPhase.RUNNING]
        wanted = self.plugin.companions(
            self.job, running, self.observed.other_children, self.observed.key_pairs, self.settings.cluster_domain
        )
        kinds = {_group_kind(childdiff.as_object(w)) for w in wanted}
        have = [o for o in self.observed.other_children if _group_kind(o) in kinds]
        return childdiff.diff(self.job, wanted, have).amend(plan)

    def _workers(self, plan: Plan) -> Plan:
        replicas = _replicas(self.job, self.plugin)
        have = {p.name for p in self.workers}
        network = Network(
            self.settings.network_mode,
            children.allocated_ports(self.job),
            self.settings.node_address,
            None,
            self.settings.cluster_domain,
        )
        creates: list[Pod] = []
        for index in range(replicas):
            if replica_name(self.job.name, self.plugin.worker_type, index) in have:
                continue
            pod = children.build_pod(self.job, self.plugin, self.plugin.worker_type, index, network)
            worker = Pod.model_validate(self.plugin.worker_pod(self.job, index, pod.to_dict()))
            creates.append(
                trainingenv.with_progress_env(worker, self.job, self.plugin.info, self.settings.progress_server)
            )
        # By name: the index label counts from 1 when the launcher is worker 0.
        surplus = [ChildRef("Pod", p.name) for p in self.workers if _name_index(p.name) >= replicas]
        return dataclasses.replace(plan, create=(*plan.create, *creates), delete=(*plan.delete, *surplus))

    def _launcher_job(self) -> dict[str, Any]:
        """The plugin's launcher Job, its pods joined to the job's gang (they count in its minMember)."""
        job = self.plugin.launcher_job(self.job)
        template = gang.template_in_gang(job["spec"]["template"], self.job, self.settings)
        server = self.settings.progress_server
        job["spec"]["template"] = trainingenv.template_with_progress_env(template, self.job, self.plugin.info, server)
        return job

    def _may_launch(self) -> bool:
        if not self.plugin.waits_for_workers(self.job):
            return True
        return all(_ready(p) for p in self.workers) and len(self.workers) == _replicas(self.job, self.plugin)

    def _follow_suspend(self, plan: Plan, launcher: TypedObject) -> Plan:
        body = launcher.to_dict()
        spec = body.get("spec") or {}
        launcher_suspended = bool(spec.get("suspend"))
        if not self.suspended and launcher_suspended:
            if (body.get("status") or {}).get("startTime"):
                ref = ChildRef("Job", launcher.name, launcher.api_version or "batch/v1")
                return dataclasses.replace(
                    plan, patch_status=(*plan.patch_status, StatusPatch(ref, {"startTime": None}))
                )
            wanted = self._launcher_job()["spec"]["template"]
            template = spec.setdefault("template", {})
            meta, pod_spec = template.setdefault("metadata", {}), template.setdefault("spec", {})
            for field in ("labels", "annotations"):
                meta[field] = {**(meta.get(field) or {}), **((wanted.get("metadata") or {}).get(field) or {})}
            for field in _SCHEDULING_DIRECTIVES:
                value = (wanted.get("spec") or {}).get(field)
                if value is None:
                    pod_spec.pop(field, None)
                else:
                    pod_spec[field] = value
            spec["suspend"] = False
            return dataclasses.replace(plan, apply=(*plan.apply, TypedObject.model_validate(body)))
        if self.suspended and not launcher_suspended:
            spec["suspend"] = True
            return dataclasses.replace(plan, apply=(*plan.apply, TypedObject.model_validate(body)))
        return plan

    def _clean_workers(self) -> tuple[ChildRef, ...]:
        """The mpi-operator's worker cleanup: ``Running`` keeps pods that ended, else every one goes."""
        policy = self.job.run_policy.clean_pod_policy or CleanPodPolicy.NONE
        doomed = []
        for pod in self.workers:
            if pod.metadata.deletion_timestamp is not None:
                continue
            if policy is CleanPodPolicy.RUNNING and pod.phase not in (PodPhase.RUNNING, PodPhase.PENDING):
                continue
            doomed.append(ChildRef("Pod", pod.name))
        return tuple(doomed)

    # -- status ----------------------------------------------------------------------------------------

    def _status(self, status: JobStatus, done: bool) -> JobStatus:
        kind, qualified = self.kind, self.qualified
        if self.suspended:
            status = self._set(status, ConditionType.SUSPENDED, f"{kind} suspended")
        elif conditions.find(status, ConditionType.SUSPENDED) is not None:
            resumed = self._set(
                status, ConditionType.SUSPENDED, f"{kind} resumed", value=conditions.FALSE, reason="Resumed"
            )
            if resumed != status:
                status = resumed.model_copy(update={"start_time": self.now})
        running_launchers = sum(1 for p in self.launcher_pods if p.phase is PodPhase.RUNNING)
        if self.launcher is not None:
            status = self._launcher_outcome(status, self.launcher, running_launchers)
        statuses = dict(status.replica_statuses)
        workers = [] if done or self.suspended else self.workers
        running = sum(1 for p in workers if p.phase is PodPhase.RUNNING)
        evicted = sum(1 for p in workers if p.phase is PodPhase.FAILED and p.status.reason == "Evicted")
        statuses[self.plugin.worker_type] = ReplicaStatus(
            active=running,
            succeeded=sum(1 for p in workers if p.phase is PodPhase.SUCCEEDED),
            failed=sum(1 for p in workers if p.phase is PodPhase.FAILED),
        )
        status = status.model_copy(update={"replica_statuses": statuses})
        if evicted:
            message = f"{evicted}/{len(workers)} workers are evicted"
            status = self._set(status, ConditionType.FAILED, message, reason="Evicted")
        if self.suspended:
            message = f"{kind} {qualified} is suspended."
            status = self._set(status, ConditionType.RUNNING, message, value=conditions.FALSE, reason="Suspended")
        elif conditions.is_finished(status):
            if conditions.find(status, ConditionType.RUNNING) is None:
                status = self._never_running(status)
        # Every worker the spec asks for runs (upstream counts the pods it just got or created).
        elif self.launcher is not None and running_launchers >= 1 and running == _replicas(self.job, self.plugin):
            status = self._set(status, ConditionType.RUNNING, f"{kind} {qualified} is running.")
        return status

    def _launcher_outcome(self, status: JobStatus, launcher: TypedObject, running: int) -> JobStatus:
        """The launcher's replica status and, once its Job finished, the job's outcome."""
        launcher_status = launcher.to_dict().get("status") or {}
        counts = ReplicaStatus(active=0, succeeded=0, failed=int(launcher_status.get("failed") or 0))
        if _condition(launcher, "Complete"):
            counts = counts.model_copy(update={"succeeded": 1})
            completed = _parse_time(launcher_status.get("completionTime"))
            if status.completion_time is None:
                status = status.model_copy(update={"completion_time": completed or self.now})
            message = f"{self.kind} {self.qualified} successfully completed."
            status = self._set(status, ConditionType.SUCCEEDED, message)
        elif (failed := _condition(launcher, "Failed")) is not None:
            status = self._failed(status, failed)
        else:
            counts = counts.model_copy(update={"active": running})
        statuses = {**status.replica_statuses, self.plugin.launcher_type: counts}
        return status.model_copy(update={"replica_statuses": statuses})

    def _never_running(self, status: JobStatus) -> JobStatus:
        """A finished job that never ran gets ``Running=False``, as upstream says it."""
        at = status.completion_time or self.now
        never = JobCondition(
            type=ConditionType.RUNNING,
            status=conditions.FALSE,
            reason=f"{self.kind}Running",
            message=f"{self.kind} {self.qualified} is finished but Running condition was never set.",
            last_update_time=at,
            last_transition_time=at,
        )
        # Upstream appends it; here it goes before the outcome, so that the last condition (what
        # `kubectl get` and `yard get` show as the State) stays Succeeded or Failed.
        *rest, outcome = status.conditions
        return status.model_copy(update={"conditions": [*rest, never, outcome]})

    def _failed(self, status: JobStatus, failed: dict[str, Any]) -> JobStatus:
        reason = failed.get("reason") or f"{self.kind}Failed"
        message = failed.get("message") or f"{self.kind} {self.qualified} has failed"
        if reason == "BackoffLimitExceeded":
            last = _newest(p for p in self.launcher_pods if p.phase is PodPhase.FAILED)
            if last is not None:
                reason += f"/{last.status.reason or ''}"
                # Upstream appends the pod's message, which the kubelet leaves empty when a container
                # fails: how mpirun exited (the first failed rank's code) says what went wrong.
                message = _truncate(f"{message}: {last.status.message or restarts.failure_detail(last, self.plugin)}")
            elif (crashed := _newest(p for p in self.launcher_pods if _terminated(p, self.plugin))) is not None:
                # restartPolicy OnFailure: the launcher's container crashed in place, no pod failed.
                message = _truncate(f"{message}: {restarts.failure_detail(crashed, self.plugin)}")
        if status.completion_time is None:
            status = status.model_copy(update={"completion_time": self.now})
        return conditions.set_condition(status, ConditionType.FAILED, reason=reason, message=message, now=self.now)

    def _set(
        self,
        status: JobStatus,
        ctype: ConditionType,
        message: str,
        *,
        value: str = conditions.TRUE,
        reason: str | None = None,
    ) -> JobStatus:
        full = f"{self.kind}{reason or ctype.value}"
        return conditions.set_condition(status, ctype, reason=full, message=message, now=self.now, value=value)

    def _with_status(self, plan: Plan, after: JobStatus) -> Plan:
        """The status if it changed, and an event for each condition that turned true (or resumed)."""
        before = self.observed.job.status
        if after == before:
            return plan
        old = {(c.type, c.status, c.reason) for c in before.conditions}
        events = tuple(
            Event(
                EventType.WARNING if c.type is ConditionType.FAILED else EventType.NORMAL,
                c.reason or c.type.value,
                c.message or "",
            )
            for c in after.conditions
            if (c.type, c.status, c.reason) not in old
            and (c.status == conditions.TRUE or (c.reason or "").endswith("Resumed"))
        )
        return dataclasses.replace(plan, status=after, events=(*plan.events, *events))


# -- helpers -----------------------------------------------------------------------------------------


def _group_kind(obj: TypedObject) -> tuple[str, str]:
    return (obj.api_version or "").rpartition("/")[0], obj.kind or ""


def _condition(job: TypedObject, ctype: str) -> dict[str, Any] | None:
    for cond in (job.to_dict().get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype and cond.get("status") == conditions.TRUE:
            return dict(cond)
    return None


def _finished(job: TypedObject) -> bool:
    return _condition(job, "Complete") is not None or _condition(job, "Failed") is not None


def _ready(pod: Pod) -> bool:
    return any(c.type == "Ready" and c.status == conditions.TRUE for c in pod.status.conditions or [])


def _replicas(job: TrainingJob, plugin: Launched) -> int:
    spec = job.replica_specs.get(plugin.worker_type)
    return (spec.replicas or 0) if spec is not None else 0


def _name_index(name: str) -> int:
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def _parse_time(raw: object) -> datetime | None:
    if not isinstance(raw, str):
        return None
    try:
        return parse_time(raw)
    except ValueError:
        return None


def _newest(pods: Iterable[Pod]) -> Pod | None:
    return max(pods, key=lambda p: p.metadata.creation_timestamp or _LONG_AGO, default=None)


def _terminated(pod: Pod, plugin: Framework) -> bool:
    """Whether the pod's main container has ended at least once (now, or before an in-place restart)."""
    main = restarts.main_status(pod, plugin)
    last = main.last_state.terminated if main is not None and main.last_state is not None else None
    return main is not None and (main.state.terminated is not None or last is not None)


def _truncate(message: str) -> str:
    if len(message) <= EVENT_MESSAGE_LIMIT:
        return message
    return message[: EVENT_MESSAGE_LIMIT - 3] + "..."


def launcher_plugin(plugin: Framework) -> Launched | None:
    """``plugin`` if its kind is run by a launcher Job, else None."""
    return cast(Launched, plugin) if launcher_jobs(plugin) is not None else None
