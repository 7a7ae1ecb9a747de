"""How a family's jobs read to a user: the ``JobView`` record and the column helpers views share.

Each job family (``api.families``) carries one ``JobView``: how its STATE, outcome, pods, replicas
and columns are read, so no verb of the SDK or CLI names a family. Functions of API objects as the
server returns them (plain dicts); only the ages read the clock, as their ``now`` default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainyard.api import training
from trainyard.api.meta import Obj, parse_time
from trainyard.api.searchview import SearchView
from trainyard.api.training import Training

Column = tuple[str, Callable[[Obj], str]]
"""A column of ``yard get <kind>``: its header and how a job's cell is read."""


def conditions(job: Obj) -> list[Obj]:
    return list((job.get("status") or {}).get("conditions") or [])


def true_conditions(job: Obj) -> set[str]:
    return {str(c["type"]) for c in conditions(job) if c.get("status") == "True"}


def age(since: str | None, now: datetime | None = None) -> str:
    """kubectl's short ages: 45s, 3m, 2h, 4d."""
    if not since:
        return "<unknown>"
    try:
        seconds = int(((now or datetime.now(UTC)) - parse_time(since)).total_seconds())
    except ValueError:
        return "<unknown>"
    seconds = max(seconds, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * 2:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def job_age(job: Obj) -> str:
    return age(job["metadata"].get("creationTimestamp"))


def spec_of(job: Obj) -> Obj:
    return job.get("spec") or {}


def status_of(job: Obj) -> Obj:
    return job.get("status") or {}


@dataclass(frozen=True)
class JobView:
    """What generic code needs to read a family's jobs; every field is data or a pure function."""

    family: str
    state: Callable[[Obj], str]
    """The STATE column."""
    succeeded: str
    """The condition type whose True status is success ("Succeeded", "Complete")."""
    pod_labels: Callable[[str], dict[str, str]]
    """Labels that select a job's pods, by the job's name."""
    summary: Callable[[Obj], str]
    """The REPLICAS cell in a table of several kinds."""
    wanted: Callable[[Obj], list[str]]
    """The replicas (``worker-0``, ``node-1``) the spec asks for, as ``replica_name`` names pods."""
    columns: tuple[Column, ...]
    """The columns after NAME and STATE in a table of this family's jobs only."""
    wide_columns: tuple[Column, ...] = ()
    owned_pods_only: bool = True
    """Keep only the selected pods owned by the job (or by a batch Job it owns): v1's job-name label
    alone could match another kind's job of the same name."""
    event_owners: tuple[str, ...] = ()
    """Kinds of the pods' owners whose events ``describe`` shows with the job's (a TrainJob's Jobs)."""
    fields: Callable[[Obj], list[tuple[str, str]]] = field(default=lambda job: [])
    """``describe``'s summary of the spec, after the common fields."""
    sections: Callable[[Obj], list[tuple[str, list[str], list[list[str]]]]] = field(default=lambda job: [])
    """``describe``'s status tables (title, headers, rows), before the replicas."""
    replicas_title: str = "Replicas"
    suspend_field: str | None = "spec.runPolicy.suspend"
    """The boolean field that suspends a job; None for a kind that cannot be suspended."""
    deadline: Callable[[Obj], Any] = field(default=lambda job: None)
    """The active deadline (seconds) that failed a job "past its deadline", for ``explain``."""
    deadline_field: str = "spec.runPolicy.activeDeadlineSeconds"
    backoff_field: str = "spec.runPolicy.backoffLimit"
    handled: Callable[[Obj], bool] = field(default=lambda job: bool(conditions(job)))
    """Whether a controller has written the job's status yet (else: is an operator running?)."""
    failed: str = "Failed"
    training: Callable[[Obj], Training | None] = field(default=lambda job: None)
    """The job's reported training progress, by its status shape (``api.training``); None if none."""
    search: SearchView | None = None
    """How a hyperparameter search's trials read (``api.searchview``); None for a job that is no search."""

    def outcome(self, job: Obj) -> str | None:
        """``succeeded`` or ``failed`` (the kind's own words) once the job is over, else None."""
        true = true_conditions(job)
        return next((t for t in (self.succeeded, self.failed) if t in true), None)

    def is_running(self, job: Obj) -> bool:
        return self.state(job) == "Running" or "Running" in true_conditions(job)


def training_columns(
    read: Callable[[Obj], Training | None], over: Callable[[Obj], bool], *, wide: bool = False
) -> tuple[Column, ...]:
    """PROGRESS and EPOCH (``wide``: LOSS, ACCURACY and ETA) of a family whose status shape ``read``
    reads; ``over`` says a job has finished (it has no ETA then)."""

    def column(header: str) -> Column:
        return header, lambda job: training.cell(header, read(job), over=over(job))

    return tuple(column(h) for h in (training.WIDE_COLUMNS if wide else training.COLUMNS))


def ended(*words: str) -> Callable[[Obj], bool]:
    """Whether a job has one of these conditions True (its family's words for finished)."""
    return lambda job: bool(true_conditions(job) & set(words))


COMMON_COLUMNS: tuple[Column, ...] = (("AGE", job_age),)
"""The columns after NAME and STATE in a table of several families, before REPLICAS (each job's ``summary``)."""
