"""How Kueue reads and drives one kind of job: the row a job family registers (``Family.queueing``).

Kueue's ``jobframework.GenericJob`` asks every integration the same questions: is it suspended,
suspend it, run it, its pod sets, has it finished, is it still active, its priority class. Here
each is data or a pure function over the job as JSON, so the embedded Kueue controller and the
plane's suspend-on-create webhook serve every registered kind without naming one. Batch/v1 Job,
which is no job family of ours, has its row here (``BATCH_JOB``), as Kueue's ``jobs/job``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trainyard.api.meta import Obj


@dataclass(frozen=True)
class Finish:
    finished: bool
    success: bool = False
    message: str = ""


Lookup = Callable[[str, str, str], Obj | None]
"""(kind, namespace, name) → the object a job refers to (its runtime), from the controller's caches."""


@dataclass(frozen=True)
class Referenced:
    """A kind a job's pod sets are read from (a TrainJob's runtimes): the Kueue controller watches it."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool


def _no_references() -> tuple[Referenced, ...]:
    return ()


@dataclass(frozen=True)
class Integration:
    group: str
    version: str
    kind: str
    plural: str
    suspend_path: tuple[str, ...]
    """Where the job's ``suspend`` flag sits (``spec.runPolicy.suspend``, ``spec.suspend``)."""
    podsets: Callable[[Obj, Lookup], list[Obj] | None]
    """Kueue's pod sets of the job: ``{"name", "count", "template"}``, in the kind's replica order;
    None while what they are read from (``references``) is not there."""
    finished: Callable[[Obj], Finish]
    active: Callable[[Obj], bool]
    """Whether pods of the job still run (a stopped job's quota is released once none does)."""
    priority_class: Callable[[Obj], str]
    """The PriorityClass its pods name (Kueue's fallback when no WorkloadPriorityClass label is set)."""
    references: Callable[[], tuple[Referenced, ...]] = _no_references

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def suspended(self, job: Obj) -> bool:
        return _get(job, self.suspend_path) is True

    def suspend_patch(self, suspend: bool) -> Obj:
        """A merge patch setting the job's suspend flag."""
        patch: Obj = {}
        node = patch
        for part in self.suspend_path[:-1]:
            node = node.setdefault(part, {})
        node[self.suspend_path[-1]] = suspend
        return patch

    def set_suspended(self, job: Obj) -> None:
        node = job
        for part in self.suspend_path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[self.suspend_path[-1]] = True


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def true_condition(job: Obj, *types: str) -> Obj | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in types and c.get("status") == "True":
            return dict(c)
    return None


def _batch_podsets(job: Obj, lookup: Lookup) -> list[Obj] | None:
    spec = job.get("spec") or {}
    count = spec.get("parallelism", 1)
    completions = spec.get("completions")
    if isinstance(completions, int) and isinstance(count, int):
        count = min(count, completions)
    return [{"name": "main", "count": count if isinstance(count, int) else 1, "template": spec.get("template") or {}}]


def _batch_finished(job: Obj) -> Finish:
    found = true_condition(job, "Complete", "Failed")
    if found is None:
        return Finish(False)
    return Finish(True, found["type"] == "Complete", str(found.get("message") or ""))


def _batch_active(job: Obj) -> bool:
    return bool((job.get("status") or {}).get("active"))


def _batch_priority_class(job: Obj) -> str:
    template = (job.get("spec") or {}).get("template") or {}
    return str((template.get("spec") or {}).get("priorityClassName") or "")


BATCH_JOB = Integration(
    group="batch",
    version="v1",
    kind="Job",
    plural="jobs",
    suspend_path=("spec", "suspend"),
    podsets=_batch_podsets,
    finished=_batch_finished,
    active=_batch_active,
    priority_class=_batch_priority_class,
)
