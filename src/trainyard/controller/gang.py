"""Gang scheduling: the job's PodGroup, its pods' decoration and the pod-creation gate (reference §6.6).

Active only when ``ControllerSettings.gang_scheduler_name`` is set (upstream's
``--gang-scheduler-name``): ``volcano`` selects Volcano's ``scheduling.volcano.sh/v1beta1``
PodGroup, any other name scheduler-plugins' ``scheduling.x-k8s.io/v1alpha1`` one, with pods sent to
that scheduler. ``schedule`` runs after the rest of the pass and amends its plan:

* a finished or suspended job has its PodGroup deleted (upstream also on backoff/deadline
  failure, which finishes the job in that same pass);
* otherwise the PodGroup is created, or replaced when its spec differs (as ``childdiff.diff``
  compares: quantities by value) from the one the job asks for: ``minMember`` (``minAvailable``,
  else every replica), ``minResources`` (given, else what the first ``minMember`` pods request,
  replica types taken by their PriorityClass value, highest first), and per flavour ``queue`` +
  ``priorityClassName`` (Volcano; a queue the group already has is kept) or
  ``scheduleTimeoutSeconds`` (scheduler-plugins);
* pods to create get the scheduler's name (unless their template names one, which earns the
  ``SetPodTemplateSchedulerName`` warning) and the group's label (scheduler-plugins) or
  annotations (Volcano);
* no pod or Service is created until the PodGroup exists, and for Volcano until it has left
  the ``Pending`` phase (enqueued); a Volcano wait stamps ``lastReconcileTime`` as upstream.

Waiting for the group to exist (upstream creates pods in the pass that creates the group) means
a pod never reaches the scheduler before its gang does, where it would be placed on its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any, TypeVar

from trainyard.api import conditions, labels
from trainyard.api import quantity as quantities
from trainyard.api.common import SchedulingPolicy, TrainingJob
from trainyard.api.core import Pod
from trainyard.api.meta import ObjectMeta, TypedObject
from trainyard.api.podgroup import (
    DEFAULT_QUEUE,
    POD_GROUP_LABEL,
    VOLCANO_GROUP_ANNOTATION,
    VOLCANO_TASK_ANNOTATION,
    Flavour,
    PodGroup,
    PodGroupSpec,
    Quantity,
    flavour,
)
from trainyard.api.quantity import BINARY_SUFFIXES, SUFFIXES
from trainyard.controller import childdiff
from trainyard.controller.children import is_owned, owner_reference
from trainyard.controller.observed import ControllerSettings, Observed
from trainyard.controller.plan import Plan
from trainyard.frameworks.base import ChildKind, Framework
from trainyard.frameworks.capabilities import launcher_jobs
from trainyard.kit.plans import DeletionEvents, Event, EventType

SCHEDULER_NAME_REASON = "SetPodTemplateSchedulerName"
SCHEDULER_NAME_MESSAGE = "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten"
_WAITING_PHASES = ("", "Pending")
G = TypeVar("G", bound=TypedObject)


def enabled(settings: ControllerSettings) -> bool:
    return bool(settings.gang_scheduler_name)


def needs_priority_classes(job: TrainingJob, settings: ControllerSettings) -> bool:
    """Whether computing the PodGroup needs PriorityClass values (the operator reads them only then)."""
    if not enabled(settings) or _policy(job).min_resources is not None:
        return False
    return any(_template_priority_class(spec.template.spec.model_extra) for spec in job.replica_specs.values())


def group_kind(settings: ControllerSettings) -> ChildKind | None:
    """The PodGroup kind jobs own with gang scheduling on (the operator watches it); None when off."""
    if not enabled(settings):
        return None
    kind = flavour(settings.gang_scheduler_name)
    return ChildKind(kind.api_version, "PodGroup", "podgroups", purpose="gang scheduling: one PodGroup per job")


def schedule(observed: Observed, job: TrainingJob, plugin: Framework, settings: ControllerSettings, plan: Plan) -> Plan:
    """``plan`` (the rest of the pass) amended for gang scheduling; unchanged when it is off.

    ``job`` is the defaulted one. Only for jobs this operator manages and that are not being
    deleted (``reconcile`` sees to it).
    """
    podgroups = group_kind(settings)
    if podgroups is None:
        return plan
    kind = flavour(settings.gang_scheduler_name)
    groups = [_group(g) for g in observed.of_kind(podgroups)]
    status = plan.status or observed.job.status
    if conditions.is_finished(status) or job.run_policy.suspend:
        return childdiff.diff(job, (), groups, told=_deletion).amend(plan)

    ours = _ours(groups, job)
    plan = childdiff.diff(job, (pod_group(job, plugin, kind, ours, observed.priority_classes),), groups).amend(plan)
    if _waits(kind.volcano, ours):
        if kind.volcano:
            # Upstream's way to be called again; here the PodGroup watch does that, so the stamp
            # is informative (second precision, so a wait writes it at most once a second).
            status = status.model_copy(update={"last_reconcile_time": observed.now.replace(microsecond=0)})
        return dataclasses.replace(plan, create=(), status=None if status == observed.job.status else status)
    creates = tuple(in_gang(o, job, kind) if isinstance(o, Pod) else o for o in plan.create)
    events = plan.events
    if any(isinstance(o, Pod) for o in creates) and other_scheduler(job, kind):
        events = (*events, Event(EventType.WARNING, SCHEDULER_NAME_REASON, SCHEDULER_NAME_MESSAGE))
    return dataclasses.replace(plan, create=creates, events=events)


def holds_creates(observed: Observed, job: TrainingJob, settings: ControllerSettings) -> bool:
    """Whether ``schedule`` will hold this pass's pods and Services back (no group of the job's
    yet, or a Volcano one not enqueued), so that the pass need not build them. ``job`` is the
    defaulted one; a job that is finished or suspended creates nothing anyway."""
    podgroups = group_kind(settings)
    if podgroups is None:
        return False
    return _waits(flavour(settings.gang_scheduler_name).volcano, _ours(observed.of_kind(podgroups), job))


def _waits(volcano: bool, ours: TypedObject | None) -> bool:
    """No pod is created until the job's group exists, and with Volcano until it is enqueued."""
    return ours is None or (volcano and (_group(ours).status.phase or "") in _WAITING_PHASES)


def _ours(groups: Sequence[G], job: TrainingJob) -> G | None:
    """The job's group among ``groups``; one left by an older job of the same name is not ours
    (the garbage collector removes it), nor one on its way out."""
    group = next((g for g in groups if g.name == job.name), None)
    if group is None or not is_owned(group, job) or group.metadata.deletion_timestamp is not None:
        return None
    return group


def _group(obj: TypedObject) -> PodGroup:
    return obj if isinstance(obj, PodGroup) else PodGroup.model_validate(obj.to_dict())


def _deletion(name: str) -> DeletionEvents:
    """Upstream's words for a finished or suspended job's group, once it is deleted (or not)."""
    terminated = Event(EventType.NORMAL, "JobTerminated", "Job has been terminated. Deleting PodGroup")
    deleted = Event(EventType.NORMAL, "SuccessfulDeletePodGroup", f"Deleted PodGroup: {name}")
    return DeletionEvents(done=(terminated, deleted), failed="FailedDeletePodGroup")


# -- the PodGroup ------------------------------------------------------------------------------------


def pod_group(
    job: TrainingJob,
    plugin: Framework,
    kind: Flavour,
    existing: PodGroup | None,
    priority_classes: Mapping[str, int],
) -> PodGroup:
    """The PodGroup ``job`` (defaulted) asks for; a Volcano queue ``existing`` already has is kept."""
    policy = _policy(job)
    members = min_member(job, plugin)
    given = policy.min_resources
    resources = dict(given) if given is not None else min_resources(job, plugin, members, priority_classes)
    spec = PodGroupSpec(min_member=members, min_resources=resources or None)
    if kind.volcano:
        kept = existing.spec.queue if existing is not None else None
        spec.queue = kept or policy.queue or DEFAULT_QUEUE
        spec.priority_class_name = policy.priority_class or None
    else:
        spec.schedule_timeout_seconds = policy.schedule_timeout_seconds
    return PodGroup(
        api_version=kind.api_version,
        kind="PodGroup",
        metadata=ObjectMeta(
            name=job.name,
            namespace=job.namespace,
            annotations=dict(job.metadata.annotations) if job.metadata.annotations else None,
            owner_references=[owner_reference(job)],
        ),
        spec=spec,
    )


def min_member(job: TrainingJob, plugin: Framework) -> int:
    given = _policy(job).min_available
    if given is not None:
        return given
    gang = _gang(job, plugin)
    return sum(s.replicas if s.replicas is not None else 1 for t, s in job.replica_specs.items() if t in gang)


def _gang(job: TrainingJob, plugin: Framework) -> set[str]:
    """The replica types whose pods must start together: all, but a launcher created only once the
    workers are Ready (MPIJob's ``WaitForWorkersReady``), which cannot be in their all-or-nothing
    start; counting it, as the mpi-operator does, leaves such a job waiting for ever."""
    types = set(job.replica_specs)
    launcher = launcher_jobs(plugin)
    if launcher is not None and launcher.waits_for_workers(job):
        types.discard(launcher.launcher_type)
    return types


def min_resources(
    job: TrainingJob, plugin: Framework, members: int, priority_classes: Mapping[str, int]
) -> dict[str, Quantity]:
    """What the first ``members`` pods request, replica types by PriorityClass value (unknown: 0).

    Per container, its ``requests``, or its ``limits`` only when it has no ``requests`` at all.
    Ties keep the kind's replica-type order (upstream's order among equals is unspecified).
    """
    gang = _gang(job, plugin)
    order = [t for t in plugin.info.replica_types if t in gang]
    order += [t for t in job.replica_specs if t not in order and t in gang]

    def priority(rtype: str) -> int:
        return priority_classes.get(_template_priority_class(job.replica_specs[rtype].template.spec.model_extra), 0)

    ranked = sorted(order, key=lambda t: -priority(t))
    total: dict[str, tuple[Decimal, bool]] = {}
    counted = 0
    for rtype in ranked:
        spec = job.replica_specs[rtype]
        for _ in range(spec.replicas or 0):
            if counted >= members:
                break
            counted += 1
            for container in spec.template.spec.containers:
                resources = (container.model_extra or {}).get("resources") or {}
                requests = resources.get("requests")
                _add(total, requests if requests is not None else resources.get("limits") or {})
    return {name: _format(value, binary) for name, (value, binary) in sorted(total.items())}


# -- pods --------------------------------------------------------------------------------------------


def in_gang(pod: Pod, job: TrainingJob, kind: Flavour) -> Pod:
    """``pod`` sent to the gang scheduler (unless its template names another) and joined to the group."""
    body = pod.to_dict()
    spec = body.setdefault("spec", {})
    if not spec.get("schedulerName"):
        spec["schedulerName"] = kind.scheduler
    meta = body.setdefault("metadata", {})
    if kind.volcano:
        annotations = meta.setdefault("annotations", {})
        annotations[VOLCANO_GROUP_ANNOTATION] = job.name
        annotations[VOLCANO_TASK_ANNOTATION] = (meta.get("labels") or {}).get(labels.REPLICA_TYPE, "")
    else:
        meta.setdefault("labels", {})[POD_GROUP_LABEL] = job.name
    return Pod.model_validate(body)


def template_in_gang(template: dict[str, Any], job: TrainingJob, settings: ControllerSettings) -> dict[str, Any]:
    """A pod template (a launcher Job's, whose pods the job does not create itself) decorated as
    ``in_gang`` does the job's own pods; unchanged with gang scheduling off."""
    if not enabled(settings):
        return template
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    pod = Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
    body = in_gang(pod, job, flavour(settings.gang_scheduler_name)).to_dict()
    return {**template, "metadata": body["metadata"], "spec": body["spec"]}


def other_scheduler(job: TrainingJob, kind: Flavour) -> bool:
    """Whether some replica template names a scheduler other than the gang scheduler."""
    names = ((spec.template.spec.model_extra or {}).get("schedulerName") for spec in job.replica_specs.values())
    return any(name and name != kind.scheduler for name in names)


# -- helpers -----------------------------------------------------------------------------------------


def _policy(job: TrainingJob) -> SchedulingPolicy:
    return job.run_policy.scheduling_policy or SchedulingPolicy()


def _template_priority_class(extra: Mapping[str, Any] | None) -> str:
    value = (extra or {}).get("priorityClassName")
    return value if isinstance(value, str) else ""


def _parse(text: object) -> tuple[Decimal, bool]:
    """A quantity's value and whether it was written with a binary suffix; ValueError if malformed."""
    value, suffix = quantities.parse(text)
    return value, suffix in BINARY_SUFFIXES


def _add(total: dict[str, tuple[Decimal, bool]], resources: Mapping[str, object]) -> None:
    for name, quantity in resources.items():
        try:
            value, binary = _parse(quantity)
        except ValueError:
            continue  # the pod's own admission refuses it; it cannot count toward the gang
        before, all_binary = total.get(name, (Decimal(0), True))
        total[name] = (before + value, all_binary and binary)


def _format(value: Decimal, binary: bool) -> str:
    """A quantity string for ``value``: binary units when every addend had one, else plain or milli."""
    if value == value.to_integral_value():
        whole = int(value)
        if binary and whole:
            for suffix in BINARY_SUFFIXES:
                size = int(SUFFIXES[suffix])
                if whole % size == 0:
                    return f"{whole // size}{suffix}"
        return str(whole)
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return f"{math.ceil(value * 10**9)}n"
