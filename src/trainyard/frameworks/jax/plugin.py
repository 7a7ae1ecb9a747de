"""JAXJob: the coordinator env of ``jax.distributed.initialize`` and the all-workers rule (§3.5, §8).

Worker 0 hosts the coordinator; every process gets its address (a host, no port), the port, the
number of processes and its own id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.api.common import TrainingJob
from trainyard.api.core import EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.jax import JAXJOB
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network
from trainyard.frameworks.replicas import StaticWorld, declared_port, master_or_workers_verdicts, total_replicas


class JAX(StaticWorld):
    info: KindInfo = JAXJOB

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return index == 0

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        info = self.info
        port = network.port("Worker", 0, info.default_port_name, declared_port(job, "Worker", info))
        return [
            EnvVar(name="PYTHONUNBUFFERED", value="1"),
            EnvVar(name="COORDINATOR_PORT", value=str(port)),
            EnvVar(name="COORDINATOR_ADDRESS", value=network.address(job.name, "Worker", 0)),
            EnvVar(name="NUM_PROCESSES", value=str(total_replicas(job))),
            EnvVar(name="PROCESS_ID", value=str(index)),
        ]

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        return master_or_workers_verdicts(self.info, job, counts)  # a JAXJob has Workers only
