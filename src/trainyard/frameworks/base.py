"""The framework plugin contract: what differs between PyTorch, TensorFlow, MPI, ...

A plugin is small and declarative: its kind's constants (``KindInfo``), the environment each
replica gets, the children its jobs own beside their replicas (and their kinds), and the rule
that turns replica counts into job conditions. It does no I/O and never decides whether a job is
its own: ``registry`` picks the plugin by kind. The engine in ``trainyard.controller`` owns every
mechanic (pods, services, owned children, restarts, status bookkeeping).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import Container, EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.meta import TypedObject
from trainyard.frameworks.network import Network


@dataclass(frozen=True)
class ReplicaCounts:
    """Pods of one replica type as observed in this pass."""

    replicas: int
    active: int
    succeeded: int
    failed: int
    restart_policy: str
    succeeded_indices: frozenset[int] = frozenset()
    """The replica indices whose pod Succeeded (some kinds' rules name one: TFJob's worker 0)."""


@dataclass(frozen=True)
class RendezvousHost:
    """A small pod the operator runs beside a job's replicas to host its rendezvous (not a replica).

    It outlives any one replica, so losing a replica never takes the rendezvous with it. It runs
    ``command`` followed by the port as the last argument, in the image of ``replica_type``'s
    default container, and listens on ``port`` (in host network mode, on an allocated port
    unless ``allocate`` is false because the user fixed it).
    """

    replica_type: str
    command: tuple[str, ...]
    port: int
    allocate: bool = True
    container_name: str = "rendezvous"
    port_name: str = "c10d"


@dataclass(frozen=True)
class ChildKind:
    """A namespaced kind whose objects jobs own: the operator watches, reads and writes it by this.

    ``deploy/``'s RBAC grants what the operator does with every declared kind, so declaring a kind
    is all it takes for a plugin to own objects of it.
    """

    api_version: str
    kind: str
    plural: str
    purpose: str = field(default="", compare=False)
    """Why jobs own such objects (documents the RBAC rule that grants them); not part of the kind."""
    patches_status: bool = field(default=False, compare=False)
    """Whether the operator patches such objects' ``status`` too (``Plan.patch_status``; RBAC grants it)."""
    verbs: tuple[str, ...] | None = field(default=None, compare=False)
    """What the operator asks of such objects when not all of the owned-children verbs (get, watch,
    create, update, delete): RBAC grants no more than that (a kind never deleted gets no delete)."""

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]


Child = TypedObject | Mapping[str, Any]
"""An owned child as a plugin describes it: a typed model or a plain manifest (apiVersion, kind,
metadata.name and the fields the job decides). The engine sets its namespace and controller owner."""


@dataclass(frozen=True)
class Verdict:
    """A condition the job should have now, with its upstream message."""

    type: ConditionType
    message: str


class EnvScope(StrEnum):
    """Which containers of a replica get the plugin's ``env``."""

    EVERY_CONTAINER = "every-container"
    DEFAULT_CONTAINER = "default-container"
    """Only the container named after the kind (upstream's TFJob puts ``TF_CONFIG`` there alone)."""
    FIRST_CONTAINER = "first-container"
    """Only the template's first container (the mpi-operator's main container)."""


class Framework(Protocol):
    @property
    def info(self) -> KindInfo: ...

    @property
    def env_scope(self) -> EnvScope: ...

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        """Variables appended to the replica's containers (``env_scope``; operator values win on clashes)."""
        ...

    def init_containers(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[Container]:
        """Init containers appended after the template's own (e.g. waiting for the master)."""
        ...

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool: ...

    def is_elastic(self, job: TrainingJob) -> bool:
        """Whether one replica may leave and rejoin the running world (an elastic rendezvous).

        A static world (every rank fixed at start) cannot take one restarted replica back: the
        engine then restarts the whole gang together (``controller.restarts``).
        """
        ...

    @property
    def child_kinds(self) -> Sequence[ChildKind]:
        """The kinds ``children`` may return (the operator watches them; RBAC grants them)."""
        ...

    def children(self, job: TrainingJob) -> Sequence[Child]:
        """What a (defaulted) job owns now beside its replicas, suspended or not, finished or not.

        The engine creates what is missing, replaces what differs and deletes what the job owns
        but no longer lists (``controller.childdiff``); an empty answer deletes them all.
        """
        ...

    def rendezvous_host(self, job: TrainingJob) -> RendezvousHost | None:
        """The rendezvous host the operator runs for a (defaulted) job; None when it runs none."""
        ...

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        """Conditions implied by the replica counts, in the order they must be applied."""
        ...
