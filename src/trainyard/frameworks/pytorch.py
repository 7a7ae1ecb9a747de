"""PyTorchJob: torchrun/``env://`` wiring and the Master-decides success rule (reference §3.1, §8)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import Container, EnvVar, RestartPolicy
from trainyard.api.kinds import PYTORCHJOB, KindInfo
from trainyard.api.pytorch import PyTorchJob
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode, wait_container


def declared_port(job: TrainingJob, replica_type: str, info: KindInfo) -> int:
    """The default-named port of the default container of a replica type (after defaulting)."""
    spec = job.replica_specs[replica_type]
    for container in spec.template.spec.containers:
        if container.name == info.default_container:
            for port in container.ports or []:
                if port.name == info.default_port_name:
                    return port.container_port
    return info.default_port


class PyTorch:
    info: KindInfo = PYTORCHJOB

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        if "Master" in job.replica_specs:
            return replica_type == "Master"
        return replica_type == "Worker" and index == 0

    def is_elastic(self, job: TrainingJob) -> bool:
        assert isinstance(job, PyTorchJob)
        return job.spec.elastic_policy is not None

    def init_containers(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[Container]:
        """Cluster mode: Workers of a job with a Master wait until the master's port accepts connections.

        Upstream's ``init-pytorch`` (reference §3.1) with a TCP check instead of ``nslookup``; in
        host mode (one machine) nothing waits: the master's port is on this node.
        """
        wait = network.wait_for_master
        if wait is None or network.mode is NetworkMode.HOST:
            return []
        if replica_type != "Worker" or "Master" not in job.replica_specs:
            return []
        host = network.address(job.name, "Master", 0)
        port = network.port("Master", 0, self.info.default_port_name, declared_port(job, "Master", self.info))
        return [wait_container("init-pytorch", wait, host, port)]

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        assert isinstance(job, PyTorchJob)
        specs = job.replica_specs
        total = sum(s.replicas or 0 for s in specs.values())
        nproc = job.spec.nproc_per_node
        out = [EnvVar(name="PYTHONUNBUFFERED", value="1")]
        if "Master" in specs:
            port = str(network.port("Master", 0, self.info.default_port_name, declared_port(job, "Master", self.info)))
            addr = network.address(job.name, "Master", 0)
            nproc_int = int(nproc) if nproc is not None and nproc.isdigit() else 1
            rank = index if replica_type == "Master" else index + 1
            out += [
                EnvVar(name="MASTER_PORT", value=port),
                EnvVar(name="PET_MASTER_PORT", value=port),
                EnvVar(name="MASTER_ADDR", value=addr),
                EnvVar(name="PET_MASTER_ADDR", value=addr),
                EnvVar(name="WORLD_SIZE", value=str(total * nproc_int)),
                EnvVar(name="RANK", value=str(rank)),
                EnvVar(name="PET_NODE_RANK", value=str(rank)),
            ]
        if nproc is not None:
            out.append(EnvVar(name="PET_NPROC_PER_NODE", value=nproc))
        if job.spec.elastic_policy is None:
            out.append(EnvVar(name="PET_NNODES", value=str(total)))
        else:
            out += self._elastic_env(job, network)
        return out

    def _elastic_env(self, job: PyTorchJob, network: Network) -> list[EnvVar]:
        policy = job.spec.elastic_policy
        assert policy is not None
        host = policy.rdzv_host or network.address(job.name, "Worker", 0)
        port = policy.rdzv_port or network.port(
            "Worker", 0, self.info.default_port_name, declared_port(job, "Worker", self.info)
        )
        out = [
            EnvVar(name="PET_RDZV_ENDPOINT", value=f"{host}:{port}"),
            EnvVar(name="PET_RDZV_BACKEND", value=policy.rdzv_backend or "c10d"),
            EnvVar(name="PET_NNODES", value=f"{policy.min_replicas}:{policy.max_replicas}"),
        ]
        if policy.max_restarts is not None:
            out.append(EnvVar(name="PET_MAX_RESTARTS", value=str(policy.max_restarts)))
        if policy.n_proc_per_node is not None:
            out.append(EnvVar(name="PET_NPROC_PER_NODE", value=str(policy.n_proc_per_node)))
        if policy.rdzv_id is not None:
            out.append(EnvVar(name="PET_RDZV_ID", value=policy.rdzv_id))
        if policy.rdzv_conf is not None:
            out.append(EnvVar(name="PET_RDZV_CONF", value=",".join(f"{c.key}={c.value}" for c in policy.rdzv_conf)))
        if policy.standalone:
            out.append(EnvVar(name="PET_STANDALONE", value=""))
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        assert isinstance(job, PyTorchJob)
        kind, name, qualified = self.info.kind, job.name, f"{job.namespace}/{job.name}"
        out: list[Verdict] = []
        master = counts.get("Master")
        worker = counts.get("Worker")
        if master is not None:
            if master.active > 0:
                out.append(Verdict(ConditionType.RUNNING, f"{kind} {name} is running."))
            if master.replicas > 0 and master.succeeded >= master.replicas:
                return [*out, Verdict(ConditionType.SUCCEEDED, f"{kind} {name} is successfully completed.")]
        elif worker is not None:
            elastic = job.spec.elastic_policy is not None
            if worker.replicas > 0 and (worker.succeeded >= worker.replicas or (elastic and worker.succeeded > 0)):
                return [*out, Verdict(ConditionType.SUCCEEDED, f"{kind} {qualified} successfully completed.")]
            if worker.active > 0:
                out.append(Verdict(ConditionType.RUNNING, f"{kind} {qualified} is running."))
        for rtype in self.info.replica_types:
            c = counts.get(rtype)
            if c is None or c.failed == 0 or c.replicas <= c.succeeded + c.active:
                continue
            if c.restart_policy == RestartPolicy.NEVER:
                msg = f"{kind} {name} is failed because {c.failed} {rtype} replica(s) failed."
                return [*out, Verdict(ConditionType.FAILED, msg)]
            msg = f"{kind} {name} is restarting because {c.failed} {rtype} replica(s) failed."
            out.append(Verdict(ConditionType.RESTARTING, msg))
        return out
