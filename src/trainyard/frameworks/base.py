"""The framework plugin contract: what differs between PyTorch, TensorFlow, MPI, ...

A plugin is small and declarative: its kind's constants (``KindInfo``), the environment each
replica gets, and the rule that turns replica counts into job conditions. It does no I/O and
never decides whether a job is its own: ``registry`` picks the plugin by kind. The engine in
``trainyard.controller`` owns every mechanic (pods, services, restarts, status bookkeeping).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import Container, EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.frameworks.network import Network


@dataclass(frozen=True)
class ReplicaCounts:
    """Pods of one replica type as observed in this pass."""

    replicas: int
    active: int
    succeeded: int
    failed: int
    restart_policy: str


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
class Verdict:
    """A condition the job should have now, with its upstream message."""

    type: ConditionType
    message: str


class Framework(Protocol):
    @property
    def info(self) -> KindInfo: ...

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        """Variables appended to every container of a replica (operator values win on clashes)."""
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

    def rendezvous_host(self, job: TrainingJob) -> RendezvousHost | None:
        """The rendezvous host the operator runs for a (defaulted) job; None when it runs none."""
        ...

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        """Conditions implied by the replica counts, in the order they must be applied."""
        ...
