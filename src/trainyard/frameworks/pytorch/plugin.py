"""PyTorchJob: torchrun/``env://`` wiring and the Master-decides success rule (reference §3.1, §8).

Besides ``base.Framework`` it has two optional capabilities (``frameworks.capabilities``): its
operator flags (``flags``) and jobs from a Python function (one Master, the rest Workers, run
under ``torchrun`` when distributed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from trainyard.api.common import TrainingJob
from trainyard.api.core import Container, EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.pytorch import PYTORCHJOB, PyTorchJob
from trainyard.frameworks.base import Child, ChildKind, EnvScope, RendezvousHost, ReplicaCounts, Verdict
from trainyard.frameworks.capabilities import OperatorFlag
from trainyard.frameworks.network import Network, NetworkMode, wait_container
from trainyard.frameworks.pytorch import elastic
from trainyard.frameworks.pytorch.flags import INIT_CONTAINER_FLAGS, wait_for_master
from trainyard.frameworks.replicas import declared_port, master_or_workers_verdicts

DEFAULT_BASE_IMAGE = "docker.io/pytorch/pytorch:2.1.2-cuda11.8-cudnn8-runtime"
"""The Kubeflow SDK's default image for function jobs; the embedded plane records and does not pull it."""

C10D_PORT = 29400
"""torchrun's default c10d rendezvous port: the rendezvous host's in cluster-dns mode."""

# The rendezvous host's program (``python -c``, the port as its argument): a c10d TCPStore server
# and nothing else. It needs only torch, which a PyTorch image has (trainyard need not be there).
STORE_SCRIPT = """\
import signal, sys
from torch.distributed import TCPStore
port = int(sys.argv[1])
store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False)
print(f"c10d rendezvous store listening on port {port}", flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
while True:
    signal.pause()
"""

RDZV_CONF_DEFAULTS: tuple[tuple[str, str], ...] = (
    # the store is the rendezvous host's, never an agent's (an agent's dies with its pod)
    ("is_host", "false"),
    # a round with fewer than maxReplicas nodes closes this long after minReplicas joined (30 s)
    ("last_call_timeout", "3"),
    # a node whose agent is gone is dropped after interval x attempts without heartbeat (5 s x 3)
    ("keep_alive_interval", "1"),
    ("keep_alive_max_attempt", "5"),
)
"""``PET_RDZV_CONF`` entries an operator-hosted rendezvous gets unless ``rdzvConf`` sets the key."""

ENV_DEFAULTS: tuple[tuple[str, str], ...] = (
    # torch's shared store keeps the first round's MASTER_ADDR/PORT (rank 0's agent) for later
    # rounds: once that agent is gone, workers of the next round connect to nothing
    ("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1"),
)
"""Variables an operator-hosted rendezvous gets unless the container sets them itself."""


class PyTorch:
    info: KindInfo = PYTORCHJOB
    child_kinds: tuple[ChildKind, ...] = (elastic.HPA,)
    env_scope: EnvScope = EnvScope.EVERY_CONTAINER
    function_roles: Mapping[str, str] = MappingProxyType({})
    function_image: str = DEFAULT_BASE_IMAGE

    operator_flags: tuple[OperatorFlag, ...] = INIT_CONTAINER_FLAGS

    def controller_settings(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"wait_for_master": wait_for_master(values)}

    def function_entrypoint(self, num_workers: int, num_procs_per_worker: int | str | None) -> str:
        # torchrun takes its rendezvous from the PET_* variables the operator sets; one process alone needs none
        distributed = num_workers > 1 or num_procs_per_worker is not None
        return "torchrun" if distributed else "python -u"

    def function_spec(
        self,
        template: dict[str, Any],
        num_workers: int,
        num_procs_per_worker: int | str | None,
        roles: Mapping[str, int],
    ) -> dict[str, Any]:
        """One Master and ``num_workers - 1`` Workers, the same pod template for both (the Kubeflow SDK's shape)."""
        replicas: dict[str, Any] = {"Master": {"replicas": 1, "template": template}}
        if num_workers > 1:
            replicas["Worker"] = {"replicas": num_workers - 1, "template": template}
        spec: dict[str, Any] = {self.info.replica_specs_field: replicas, "runPolicy": {}}
        if num_procs_per_worker is not None:
            spec["nprocPerNode"] = str(num_procs_per_worker)
        return spec

    def children(self, job: TrainingJob) -> Sequence[Child]:
        assert isinstance(job, PyTorchJob)
        return elastic.children(job, self.info)

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        if "Master" in job.replica_specs:
            return replica_type == "Master"
        return replica_type == "Worker" and index == 0

    def is_elastic(self, job: TrainingJob) -> bool:
        assert isinstance(job, PyTorchJob)
        return job.spec.elastic_policy is not None

    def rendezvous_host(self, job: TrainingJob) -> RendezvousHost | None:
        """Elastic c10d jobs get a c10d store of their own, unless ``rdzvHost`` names one.

        Upstream points every agent at worker-0, whose agent then hosts the store: deleting that
        pod ends the rendezvous for everyone. A store in a pod of its own outlives any worker.
        """
        assert isinstance(job, PyTorchJob)
        policy = job.spec.elastic_policy
        if policy is None or policy.rdzv_host or policy.standalone or (policy.rdzv_backend or "c10d") != "c10d":
            return None
        rtype = "Worker" if "Worker" in job.replica_specs else next(iter(job.replica_specs), None)
        if rtype is None:
            return None
        return RendezvousHost(
            replica_type=rtype,
            command=("python", "-c", STORE_SCRIPT),
            port=policy.rdzv_port or C10D_PORT,
            allocate=policy.rdzv_port is None,
        )

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
            out += self._elastic_env(job, replica_type, network)
        return out

    def _elastic_env(self, job: PyTorchJob, replica_type: str, network: Network) -> list[EnvVar]:
        policy = job.spec.elastic_policy
        assert policy is not None
        hosted = self.rendezvous_host(job)
        if hosted is not None:
            host = network.rendezvous_address(job.name)
            port = hosted.port if not hosted.allocate else network.rendezvous_port(hosted.port) or hosted.port
        else:
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
        conf = [(c.key, c.value) for c in policy.rdzv_conf or []]
        if hosted is not None:
            # the user's rdzvConf wins over every default, key by key
            conf += [(k, v) for k, v in RDZV_CONF_DEFAULTS if k not in {key for key, _ in conf}]
        if policy.rdzv_conf is not None or conf:
            out.append(EnvVar(name="PET_RDZV_CONF", value=",".join(f"{k}={v}" for k, v in conf)))
        if policy.standalone:
            out.append(EnvVar(name="PET_STANDALONE", value=""))
        if hosted is not None:
            own = _container_env_names(job, replica_type, self.info)
            out += [EnvVar(name=k, value=v) for k, v in ENV_DEFAULTS if k not in own]
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        assert isinstance(job, PyTorchJob)
        elastic = job.spec.elastic_policy is not None
        return master_or_workers_verdicts(self.info, job, counts, one_worker_suffices=elastic)


def _container_env_names(job: TrainingJob, replica_type: str, info: KindInfo) -> set[str]:
    """Names the replica's default container sets itself (the operator's defaults yield to them)."""
    for container in job.replica_specs[replica_type].template.spec.containers:
        if container.name == info.default_container:
            return {e.name for e in container.env or []}
    return set()
