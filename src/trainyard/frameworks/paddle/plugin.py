"""PaddleJob: ``PADDLE_*`` for ``paddle.distributed.launch`` and the success rule (reference §3.4, §8).

Collective mode (Workers only): worker 0 hosts the launch master and learns its own address from
the downward API (``POD_IP_DUMMY``, expanded by the kubelet in ``PADDLE_MASTER``); the others
reach it by name. Parameter-server mode (a Master spec): the Master hosts it.

The launcher elects its master by address: the one whose ``PADDLE_MASTER`` host is its own starts
the store and takes rank 0. In host network mode every replica's address is the node's, so every
launcher would think it is the host and whichever binds the port first would be rank 0; there
each replica also gets ``PADDLE_RANK`` (the launcher's ``--rank``), its place in the job, so
worker 0 is rank 0 as on a cluster (where upstream's env alone pins rank 0 and no other rank).

Upstream defaults ``elasticPolicy`` but acts on none of it, and the launcher gets a fixed
``PADDLE_NNODES``, so a Paddle world is static: one lost replica restarts the whole gang.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from trainyard.api.common import TrainingJob
from trainyard.api.core import EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.paddle import PADDLEJOB
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.replicas import StaticWorld, declared_port, master_or_workers_verdicts, total_replicas


class Paddle(StaticWorld):
    info: KindInfo = PADDLEJOB

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return replica_type == "Master"

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        info = self.info
        host_type = "Master" if "Master" in job.replica_specs else "Worker"
        port = network.port(host_type, 0, info.default_port_name, declared_port(job, host_type, info))
        out = [
            EnvVar(name="PYTHONUNBUFFERED", value="1"),
            EnvVar(name="PADDLE_JOB_ID", value=job.name),
            EnvVar(name="PADDLE_NNODES", value=str(total_replicas(job))),
        ]
        if replica_type == host_type and index == 0:
            # defined before PADDLE_MASTER, so the kubelet's $(VAR) expansion sees it
            pod_ip = {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}
            out += [
                EnvVar.model_validate({"name": "POD_IP_DUMMY", "valueFrom": pod_ip}),
                EnvVar(name="PADDLE_MASTER", value=f"$(POD_IP_DUMMY):{port}"),
            ]
        else:
            out.append(EnvVar(name="PADDLE_MASTER", value=f"{network.address(job.name, host_type, 0)}:{port}"))
        if host_type == "Master":
            out.append(
                EnvVar(name="PADDLE_SERVER_NUM", value="1")
                if replica_type == "Master"
                else EnvVar(name="PADDLE_TRAINER_NUM", value="1")
            )
        if network.mode is NetworkMode.HOST:
            out.append(EnvVar(name="PADDLE_RANK", value=str(_node_rank(job, replica_type, index))))
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        return master_or_workers_verdicts(self.info, job, counts)


def _node_rank(job: TrainingJob, replica_type: str, index: int) -> int:
    """The replica's place in the job: Masters first, then Workers, each by index."""
    before = 0
    for rtype in PADDLEJOB.replica_types:
        if rtype == replica_type:
            return before + index
        spec = job.replica_specs.get(rtype)
        before += spec.replicas or 0 if spec else 0
    return index
