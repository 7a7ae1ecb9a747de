"""What trainyard knows of one job family at the API: the kinds it serves, its CRDs, how users read it.

A job family is a set of kinds run by one kind of controller: the replica-spec kinds of
``kubeflow.org/v1`` (one controller each), Kubeflow Trainer v2's TrainJob (with its runtimes and
JobSets), the seed's TrainingJob. Its ``Family`` row (``api.families.FAMILIES``) is what the
embedded plane installs (CRDs and seed objects), what the SDK and CLI discover and read (its kinds'
names, its ``JobView``) and what the operator's flags accept; the operator's half of the row
(``operator.families``: its controllers, RBAC and metrics reader) is keyed by the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from trainyard.api.jobshapes import JobSample
from trainyard.api.jobview import JobView
from trainyard.api.kueue.integration import Integration
from trainyard.api.meta import Obj


@dataclass(frozen=True)
class FamilyKind:
    """A kind a family serves as a job, as discovery, ``yard`` and the SDK name it."""

    kind: str
    plural: str
    singular: str
    group: str
    version: str
    short_names: tuple[str, ...] = ()
    default_container: str | None = field(default=None, compare=False)
    """The container ``yard logs`` reads when none is named; None: the pod's first."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


@dataclass(frozen=True)
class Seed:
    """An object the embedded plane installs beside the CRDs, as the family's own installer would."""

    group: str
    version: str
    plural: str
    namespace: str
    name: str
    obj: Obj
    """What is created when no object of that name exists."""
    refresh: Callable[[Obj], Obj | None] = field(default=lambda current: None)
    """For one that exists: the object to write instead (brought up to date), or None to leave it."""


def no_seeds() -> list[Seed]:
    return []


@dataclass(frozen=True)
class Family:
    name: str
    kinds: Callable[[], tuple[FamilyKind, ...]]
    """The kinds it serves as jobs, read when asked (a kind registered in ``api.kinds`` joins its family)."""
    crds: Callable[[], list[Obj]]
    """Every CRD it needs served: its jobs' and their companions' (a TrainJob's runtimes)."""
    view: JobView
    """How ``yard`` and the SDK read its jobs."""
    sample: Callable[[Obj], JobSample]
    """How the operator's per-job metrics read one of its jobs (``api.jobshapes``)."""
    open_groups: bool = False
    """Whether a kind that discovery finds in its kinds' groups, and the family does not list, is
    one of its jobs (v1's groups: a kind the operator serves without a trainyard entry). A closed
    family's groups also serve objects that are no jobs (a TrainJob's TrainingRuntimes)."""
    seeds: Callable[[], list[Seed]] = no_seeds
    """Objects its clients expect to find installed (Trainer v2's namespace, ConfigMap, runtimes)."""
    shipped: Callable[[], list[Obj]] = list
    """Objects of its own CRDs that ``deploy/`` ships, applied once the CRDs exist (the runtimes)."""
    queueing: Callable[[], tuple[Integration, ...]] = tuple
    """How Kueue queues its kinds (``api.kueue.integration``): one row per kind it can queue."""

    def kind_names(self) -> tuple[str, ...]:
        return tuple(k.kind for k in self.kinds())
