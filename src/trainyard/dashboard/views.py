"""What the dashboard shows of a job, as JSON values: its row, its metric points, its detail's parts.

Every job of every family reads through its family's ``JobView`` (``api.families``), so no kind is
named here: the STATE cell ``yard get`` shows, the True conditions, the reported training (one of
``api.training``'s shapes; a search's progress and best value, which reports none), the REPLICAS
summary. Pure: API objects (plain dicts) in, JSON-ready
values out; nothing here reads a clock.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from trainyard.api import families, jobset, labels
from trainyard.api.family import Family, FamilyKind
from trainyard.api.jobview import JobView, conditions, true_conditions
from trainyard.api.meta import Obj
from trainyard.api.training import Training

Json = dict[str, Any]


def family_kind(kind: str) -> tuple[Family, FamilyKind] | None:
    """The family serving ``kind`` and its entry, or None for a kind no family serves."""
    family = families.family_of(kind)
    if family is None:
        return None
    entry = next(k for k in family.kinds() if k.kind == kind)
    return family, entry


def job_kinds() -> list[FamilyKind]:
    """Every kind of every family, in table order (what the recorder and the list watch)."""
    return [k for f in families.FAMILIES.values() for k in f.kinds()]


def view_of(job: Obj) -> JobView:
    found = families.family_of(str(job.get("kind", "")))
    return (found or families.default_family()).view


def training_of(job: Obj) -> Training | None:
    return view_of(job).training(job)


def finished_at(job: Obj) -> str | None:
    """When the job's outcome condition turned True; None while it runs."""
    view = view_of(job)
    outcome = view.outcome(job)
    if outcome is None:
        return None
    for condition in conditions(job):
        if condition.get("type") == outcome and condition.get("status") == "True":
            return condition.get("lastTransitionTime") or condition.get("lastUpdateTime")
    return None


def suspended(job: Obj) -> bool:
    value: Any = job
    path = view_of(job).suspend_field
    if path is None:
        return False
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value is True


def row(job: Obj, *, deleted: str | None = None) -> Json:
    """The job as the jobs list and the history list show it (the contract's JobRow)."""
    meta = job.get("metadata") or {}
    kind = str(job.get("kind", ""))
    api_version = str(job.get("apiVersion", ""))
    group, _, version = api_version.rpartition("/")
    found = family_kind(kind)
    view = view_of(job)
    report = view.training(job)
    finished = finished_at(job)
    progress: float | None = report.percent if report else None
    metrics = dict(report.metrics) if report else {}
    if report is None and view.search is not None and found is not None:
        # A search reports no training of its own: its trials finished of the budget, its best value.
        progress = found[0].sample(job).progress
        metrics = {f"best {name}": value for name, value in view.search.best(job).items()}
    return {
        "uid": meta.get("uid", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "kind": kind,
        "group": group,
        "version": version,
        "plural": found[1].plural if found else kind.lower() + "s",
        "family": found[0].name if found else "",
        "state": view.state(job),
        "conditions": sorted(true_conditions(job)),
        "progress": progress,
        "epoch": report.epoch if report else None,
        "totalEpochs": report.total_epochs if report else None,
        "step": report.step if report else None,
        "totalSteps": report.total_steps if report else None,
        "eta": report.eta_seconds if report and finished is None and deleted is None else None,
        "metrics": metrics,
        "replicas": view.summary(job),
        "created": meta.get("creationTimestamp"),
        "finished": finished,
        "deleted": deleted,
        "suspended": suspended(job),
    }


def _number(value: Any) -> int | float | None:
    """A metric as a chart draws it: a finite number, or a string that reads as one (Trainer v2's
    ``trainerStatus`` carries every value as a string); None for words, booleans, "nan", "inf"."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = int(value) if value.strip().lstrip("+-").isdigit() else float(value)
        except ValueError:
            return None
    if isinstance(value, int):
        return value
    return value if isinstance(value, float) and math.isfinite(value) else None


def point(job: Obj, observed: str | None = None) -> Json | None:
    """The job's latest report as one chart point (numeric metrics only); None before any report
    or when it has no number to draw. A status shape that stamps no time on its report (seed
    004's flat one) gets ``observed``, when the report was seen; without either, None."""
    report = training_of(job)
    if report is None or not (report.updated or observed):
        return None
    numbers = {k: n for k, n in ((k, _number(v)) for k, v in report.metrics.items()) if n is not None}
    if not numbers:
        return None
    return {"time": report.updated or observed, "step": report.step, "epoch": report.epoch, "metrics": numbers}


def checkpoint(job: Obj) -> Json | None:
    """The job's latest checkpoint as its status names it, or None."""
    report = training_of(job)
    if report is None or report.checkpoint is None:
        return None
    found = report.checkpoint
    return {"path": found.path, "epoch": found.epoch, "time": found.time}


def condition_timeline(job: Obj) -> list[Json]:
    """Every condition the job's status holds, oldest transition first."""
    keep = ("type", "status", "reason", "message", "lastTransitionTime", "lastUpdateTime")
    rows = [{k: c.get(k) for k in keep} for c in conditions(job)]
    return sorted(rows, key=lambda c: str(c.get("lastTransitionTime") or c.get("lastUpdateTime") or ""))


def as_yaml(obj: Obj) -> str:
    """The object as ``kubectl get -o yaml`` prints it, less ``managedFields``."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return yaml.safe_dump({**obj, "metadata": meta}, sort_keys=False, default_flow_style=False)


def pod_row(pod: Obj) -> Json:
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    statuses = list(status.get("containerStatuses") or [])
    reason = status.get("reason")
    for container in statuses:
        state = container.get("state") or {}
        for phase in ("waiting", "terminated"):
            if (state.get(phase) or {}).get("reason"):
                reason = reason or state[phase]["reason"]
    return {
        "name": meta.get("name", ""),
        "phase": "Terminating" if meta.get("deletionTimestamp") else status.get("phase", "Pending"),
        "node": (pod.get("spec") or {}).get("nodeName"),
        "restarts": sum(int(c.get("restartCount") or 0) for c in statuses),
        "ready": bool(statuses) and all(c.get("ready") for c in statuses),
        "containers": [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []],
        "started": status.get("startTime"),
        "reason": reason,
    }


REPLICA_TYPE_LABELS = (labels.REPLICA_TYPE, jobset.REPLICATED_JOB_NAME)
"""The labels that name a pod's replica group: v1's replica type, a JobSet's replicated job (a TrainJob's)."""


def replica_groups(pods: Iterable[Obj]) -> list[Json]:
    """The job's pods grouped by replica type, groups and pods in name order."""
    groups: dict[str, list[Json]] = {}
    for pod in pods:
        found = (pod.get("metadata") or {}).get("labels") or {}
        kind = next((str(found[label]) for label in REPLICA_TYPE_LABELS if found.get(label)), "pod")
        groups.setdefault(kind, []).append(pod_row(pod))
    return [{"type": kind, "pods": sorted(rows, key=lambda p: str(p["name"]))} for kind, rows in sorted(groups.items())]


def event_row(event: Obj) -> Json:
    involved = event.get("involvedObject") or event.get("regarding") or {}
    return {
        "type": event.get("type"),
        "reason": event.get("reason"),
        "message": event.get("message") or event.get("note"),
        "count": event.get("count") or (event.get("series") or {}).get("count") or 1,
        "firstTimestamp": event.get("firstTimestamp") or event.get("eventTime"),
        "lastTimestamp": event.get("lastTimestamp") or event.get("eventTime") or event.get("firstTimestamp"),
        "object": f"{involved.get('kind', '')}/{involved.get('name', '')}",
    }


def events_table(events: Iterable[Obj]) -> list[Json]:
    rows = [event_row(e) for e in events]
    return sorted(rows, key=lambda e: str(e["lastTimestamp"] or ""))
