"""The kinds a Trial's job may be, and how its pods and its reported metrics are found.

Every kind a job family serves (``api.families``: the ``kubeflow.org/v1`` kinds, TrainJob,
TrainingJob) and the core ``batch/v1`` Job, which Katib's own examples use. A family's kinds bring
their ``JobView``: the labels that select a job's pods (the StdOut collector reads its primary
container) and the reader of its reported training status (the Push collector). The search
families' kinds (Katib's own, Trainer's OptimizationJob) are no trial kinds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trainyard.api.katib import family as experiments
from trainyard.api.meta import Obj
from trainyard.api.trainer import optfamily as optimizationjobs
from trainyard.api.training import Training

BATCH_JOB_NAME = "batch.kubernetes.io/job-name"
SEARCH_FAMILIES = (experiments.NAME, optimizationjobs.NAME)
"""The families that run searches (``api.katib.family``, ``api.trainer.optfamily``): no trial is one."""


@dataclass(frozen=True)
class TrialKind:
    api_version: str
    kind: str
    plural: str
    pod_labels: Callable[[str], dict[str, str]]
    """The labels that select the pods of the job of that name."""
    reported: Callable[[Obj], Training | None]
    """The training progress the job's status carries (what ``trainyard.runtime.report`` wrote)."""
    reports: bool = True
    """Whether its status can carry reports at all (the Push collector needs it)."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        return self.api_version.rpartition("/")[2]


def _nothing_reported(job: Obj) -> Training | None:
    return None


def trial_kinds() -> dict[tuple[str, str], TrialKind]:
    """By (apiVersion, kind)."""
    from trainyard.api.families import FAMILIES  # the table of families imports the Katib family

    found = {
        ("batch/v1", "Job"): TrialKind(
            "batch/v1", "Job", "jobs", lambda name: {BATCH_JOB_NAME: name}, _nothing_reported, reports=False
        ),
    }
    for family in FAMILIES.values():
        if family.name in SEARCH_FAMILIES:
            continue
        for k in family.kinds():
            found[(k.api_version, k.kind)] = TrialKind(
                k.api_version, k.kind, k.plural, family.view.pod_labels, family.view.training
            )
    return found


def trial_kind(job: Obj) -> TrialKind | None:
    return trial_kinds().get((str(job.get("apiVersion") or ""), str(job.get("kind") or "")))
