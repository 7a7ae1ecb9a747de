"""What several plugins share: a replica's declared port, upstream's common success and replica-failure
rules, and the defaults of a plugin whose world is static (``StaticWorld``).

Kind-free: it reads a job only through ``KindInfo`` and ``ReplicaCounts``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import Container, RestartPolicy
from trainyard.api.kindinfo import KindInfo
from trainyard.frameworks.base import Child, ChildKind, EnvScope, RendezvousHost, ReplicaCounts, Verdict
from trainyard.frameworks.network import Network


def declared_port(job: TrainingJob, replica_type: str, info: KindInfo) -> int:
    """The default-named port of the default container of a replica type (after defaulting)."""
    spec = job.replica_specs.get(replica_type)
    for container in spec.template.spec.containers if spec else []:
        if container.name == info.default_container:
            for port in container.ports or []:
                if port.name == info.default_port_name:
                    return port.container_port
    return info.default_port


def total_replicas(job: TrainingJob) -> int:
    return sum(s.replicas or 0 for s in job.replica_specs.values())


def failure_verdicts(
    info: KindInfo, name: str, counts: Mapping[str, ReplicaCounts], *, subject: str | None = None
) -> list[Verdict]:
    """Upstream's rule for a replica type that lost pods it still needs (reference §8).

    ``failed > 0`` while fewer than ``replicas`` are running or done: with ``restartPolicy: Never``
    the job fails; otherwise it is restarting (the engine restarts the pods, counted against
    ``backoffLimit``). Types are checked in ``info.replica_types`` order; the first failure ends it.
    The messages begin with ``subject``, the kind unless upstream wrote it otherwise (MXJob: ``mxjob``).
    """
    who = subject or info.kind
    out: list[Verdict] = []
    for rtype in info.replica_types:
        c = counts.get(rtype)
        if c is None or c.failed == 0 or c.replicas <= c.succeeded + c.active:
            continue
        if c.restart_policy == RestartPolicy.NEVER:
            msg = f"{who} {name} is failed because {c.failed} {rtype} replica(s) failed."
            return [*out, Verdict(ConditionType.FAILED, msg)]
        msg = f"{who} {name} is restarting because {c.failed} {rtype} replica(s) failed."
        out.append(Verdict(ConditionType.RESTARTING, msg))
    return out


def master_or_workers_verdicts(
    info: KindInfo, job: TrainingJob, counts: Mapping[str, ReplicaCounts], *, one_worker_suffices: bool = False
) -> list[Verdict]:
    """Upstream's status rule of PyTorchJob, PaddleJob and JAXJob (reference §8), in its words.

    With a ``Master`` it decides (Running while it runs, Succeeded once it has); without, the
    ``Worker``s do: Succeeded once every one has (``one_worker_suffices``: once any has, as elastic
    PyTorch), else Running while any runs. Then ``failure_verdicts``. The Master's messages name
    the job, the Workers' its namespace too, as upstream's do.
    """
    kind, name, qualified = info.kind, job.name, f"{job.namespace}/{job.name}"
    out: list[Verdict] = []
    master, worker = counts.get("Master"), counts.get("Worker")
    if master is not None:
        if master.active > 0:
            out.append(Verdict(ConditionType.RUNNING, f"{kind} {name} is running."))
        if master.replicas > 0 and master.succeeded >= master.replicas:
            return [*out, Verdict(ConditionType.SUCCEEDED, f"{kind} {name} is successfully completed.")]
    elif worker is not None:
        enough = worker.replicas if not one_worker_suffices else 1
        if worker.replicas > 0 and worker.succeeded >= enough:
            return [Verdict(ConditionType.SUCCEEDED, f"{kind} {qualified} successfully completed.")]
        if worker.active > 0:
            out.append(Verdict(ConditionType.RUNNING, f"{kind} {qualified} is running."))
    return [*out, *failure_verdicts(info, name, counts)]


class StaticWorld:
    """Defaults for a plugin whose replicas form a fixed world and own nothing else.

    No rendezvous host, no init containers, no children; every container gets the env; one lost
    replica restarts the whole gang (``controller.restarts``). A plugin overrides what differs.
    """

    child_kinds: tuple[ChildKind, ...] = ()
    env_scope: EnvScope = EnvScope.EVERY_CONTAINER

    def children(self, job: TrainingJob) -> Sequence[Child]:
        return []

    def rendezvous_host(self, job: TrainingJob) -> RendezvousHost | None:
        return None

    def init_containers(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[Container]:
        return []

    def is_elastic(self, job: TrainingJob) -> bool:
        return False
