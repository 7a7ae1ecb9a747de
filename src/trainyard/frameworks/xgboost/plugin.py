"""XGBoostJob: the Master hosts the collective's tracker; env and success rule (reference §3.3, §8).

Every rank gets ``MASTER_ADDR``/``MASTER_PORT`` (the tracker), ``WORLD_SIZE`` and its ``RANK``;
``WORKER_PORT``/``WORKER_ADDRS`` are upstream's for LightGBM. The Master's success is the job's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.xgboost import XGBOOSTJOB
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network
from trainyard.frameworks.replicas import StaticWorld, declared_port, failure_verdicts, total_replicas

DEFAULT_BASE_IMAGE = "docker.io/kubeflow/xgboost-dist-iris:latest"
"""Function jobs' image when the caller names none (the Kubeflow SDK has none for XGBoost)."""


class XGBoost(StaticWorld):
    info: KindInfo = XGBOOSTJOB
    function_roles: Mapping[str, str] = MappingProxyType({})
    function_image: str = DEFAULT_BASE_IMAGE

    def function_entrypoint(self, num_workers: int, num_procs_per_worker: int | str | None) -> str:
        return "python -u"

    def function_spec(
        self,
        template: dict[str, Any],
        num_workers: int,
        num_procs_per_worker: int | str | None,
        roles: Mapping[str, int],
    ) -> dict[str, Any]:
        """One Master (it hosts the tracker) and ``num_workers - 1`` Workers, all of ``template``."""
        replicas: dict[str, Any] = {"Master": {"replicas": 1, "template": template}}
        if num_workers > 1:
            replicas["Worker"] = {"replicas": num_workers - 1, "template": template}
        return {self.info.replica_specs_field: replicas, "runPolicy": {}}

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return replica_type == "Master"

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        info, total = self.info, total_replicas(job)
        master_port = network.port("Master", 0, info.default_port_name, declared_port(job, "Master", info))
        master = job.replica_specs.get("Master")
        rank = index if replica_type == "Master" else index + (master.replicas or 0 if master else 0)
        out = [
            EnvVar(name="MASTER_PORT", value=str(master_port)),
            EnvVar(name="MASTER_ADDR", value=network.address(job.name, "Master", 0)),
            EnvVar(name="WORLD_SIZE", value=str(total)),
            EnvVar(name="RANK", value=str(rank)),
            EnvVar(name="PYTHONUNBUFFERED", value="1"),
        ]
        if total > 1:
            # one machine gives each worker a port of its own: a worker is told its own
            own = index if replica_type == "Worker" else 0
            port = network.port("Worker", own, info.default_port_name, declared_port(job, "Worker", info))
            addrs = ",".join(network.address(job.name, "Worker", i) for i in range(total - 1))
            out += [EnvVar(name="WORKER_PORT", value=str(port)), EnvVar(name="WORKER_ADDRS", value=addrs)]
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        kind, name = self.info.kind, job.name
        out: list[Verdict] = []
        master = counts.get("Master")
        if master is not None:
            if master.active > 0:
                out.append(Verdict(ConditionType.RUNNING, f"{kind} {name} is running."))
            if master.replicas > 0 and master.succeeded >= master.replicas:
                return [*out, Verdict(ConditionType.SUCCEEDED, f"{kind} {name} is successfully completed.")]
        return [*out, *failure_verdicts(self.info, name, counts)]
