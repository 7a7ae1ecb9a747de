"""XGBoostJob: the Master hosts the collective's tracker; env and success rule (reference §3.3, §8).

Every rank gets ``MASTER_ADDR``/``MASTER_PORT`` (the tracker), ``WORLD_SIZE`` and its ``RANK``;
``WORKER_PORT``/``WORKER_ADDRS`` are upstream's for LightGBM. The Master's success is the job's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import EnvVar, RestartPolicy
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.xgboost import XGBOOSTJOB
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network
from trainyard.frameworks.replicas import StaticWorld, declared_port, total_replicas

FUNCTION_IMAGE = "ghcr.io/trainyard/examples-xgboost:latest"
"""The image of function jobs that name none (the Kubeflow SDK has none for XGBoost): the examples'
XGBoost image, which the project's ``xgboost`` environment stands for locally."""


class XGBoost(StaticWorld):
    info: KindInfo = XGBOOSTJOB
    function_roles: Mapping[str, str] = MappingProxyType({})
    function_image: str = FUNCTION_IMAGE

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
        if num_procs_per_worker is not None:
            raise ValueError("num_procs_per_worker is a PyTorchJob parameter; an XGBoostJob replica is one process")
        replicas: dict[str, Any] = {"Master": {"replicas": 1, "template": template}}
        if num_workers > 1:
            replicas["Worker"] = {"replicas": num_workers - 1, "template": template}
        return {self.info.replica_specs_field: replicas, "runPolicy": {}}

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return replica_type == "Master"

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        info, total = self.info, total_replicas(job)
        if "Master" not in job.replica_specs:
            # admission refuses such a job; without a Master there is no tracker to point at
            return [EnvVar(name="PYTHONUNBUFFERED", value="1")]
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
        if total > 1 and "Worker" in job.replica_specs:
            # one value for all, as upstream: on one machine, worker-0's allocated port
            port = network.port("Worker", 0, info.default_port_name, declared_port(job, "Worker", info))
            addrs = ",".join(network.address(job.name, "Worker", i) for i in range(total - 1))
            out += [EnvVar(name="WORKER_PORT", value=str(port)), EnvVar(name="WORKER_ADDRS", value=addrs)]
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        """Upstream's rules: the Master's success is the job's; a failed replica fails it.

        Running is also set when the Master succeeds or a replica fails the job, as upstream
        does, so a finished job always shows it (False). A failed replica whose policy restarts
        it (ExitCode, and here OnFailure and Always too) makes the job Restarting instead:
        upstream fails the job for OnFailure/Always, but there the kubelet restarts their
        containers in place, so a pod rarely fails; here a static world restarts as a gang, and
        every crash surfaces as a failed pod first.
        """
        kind, name = self.info.kind, job.name
        running = Verdict(ConditionType.RUNNING, f"{kind} {name} is running.")
        out: list[Verdict] = []
        master = counts.get("Master")
        if master is not None:
            if master.replicas > 0 and master.succeeded >= master.replicas:
                return [running, Verdict(ConditionType.SUCCEEDED, f"{kind} {name} is successfully completed.")]
            if master.active > 0:
                out.append(running)
        for rtype in self.info.replica_types:
            c = counts.get(rtype)
            if c is None or c.failed == 0:
                continue
            if c.restart_policy == RestartPolicy.NEVER:
                msg = f"{kind} {name} is failed because {c.failed} {rtype} replica(s) failed."
                # Running as upstream sets it, only when absent (a Restarting before it removed it)
                if not out or out[-1] != running:
                    out.append(running)
                return [*out, Verdict(ConditionType.FAILED, msg)]
            # no Running first: Restarting would drop it again, and re-adding Restarting on every
            # pass would rewrite its transition time each time
            msg = f"{kind} {name} is restarting because {c.failed} {rtype} replica(s) failed."
            out.append(Verdict(ConditionType.RESTARTING, msg))
        return out
