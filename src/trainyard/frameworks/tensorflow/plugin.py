"""TFJob: ``TF_CONFIG`` and the chief-or-worker-0 success rule (reference §3.2, §8).

``TF_CONFIG`` goes into the ``tensorflow`` container only, and only when the job is distributed
(more than one replica in all). Its cluster lists every replica type the job has, Evaluator
included, as upstream; ``enableDynamicWorker`` gives the sparse form, in which a worker sees only
itself and the parameter servers, and worker failures do not fail the job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import EnvVar, RestartPolicy
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.tensorflow import TFJOB, TFJob
from trainyard.frameworks.base import EnvScope, ReplicaCounts, Verdict
from trainyard.frameworks.network import Network, NetworkMode
from trainyard.frameworks.replicas import StaticWorld, declared_port

DEFAULT_BASE_IMAGE = "docker.io/tensorflow/tensorflow:2.9.1"
"""The Kubeflow SDK's default image for TFJob function jobs (a local environment may stand for it)."""

LEADERS = ("Chief", "Master")


def endpoint(job: TrainingJob, info: KindInfo, network: Network, replica_type: str, index: int) -> str:
    """``<job>-<type>-<i>.<ns>.svc[.<domain>]:<port>`` on a cluster; the node and its allocated port in host mode."""
    port = network.port(replica_type, index, info.default_port_name, declared_port(job, replica_type, info))
    host = network.address(job.name, replica_type, index)
    if network.mode is NetworkMode.CLUSTER_DNS:
        host = f"{host}.{job.namespace}.svc" + (f".{network.cluster_domain}" if network.cluster_domain else "")
    return f"{host}:{port}"


def is_distributed(job: TrainingJob) -> bool:
    # an unset count is one replica, as upstream counts it before defaulting
    return sum(1 if s.replicas is None else s.replicas for s in job.replica_specs.values()) != 1


def tf_config(job: TFJob, info: KindInfo, network: Network, replica_type: str, index: int) -> dict[str, Any]:
    """The ``TF_CONFIG`` object, keys in the order upstream's JSON has them (cluster keys sorted)."""
    cluster = {
        rtype.lower(): [endpoint(job, info, network, rtype, i) for i in range(spec.replicas or 0)]
        for rtype, spec in sorted(job.replica_specs.items(), key=lambda item: item[0].lower())
    }
    task = {"type": replica_type.lower(), "index": index}
    if not job.spec.enable_dynamic_worker:
        return {"cluster": cluster, "task": task, "environment": "cloud"}
    workers: dict[str, str] = {}
    ps: list[str] = []
    if replica_type == "Worker":
        workers = {str(index): cluster["worker"][index]}
        ps = cluster.get("ps", [])
    elif replica_type == "PS":
        ps = [cluster["ps"][index]]
    return {"cluster": {"worker": workers, "ps": ps}, "task": task}


class TensorFlow(StaticWorld):
    info: KindInfo = TFJOB
    env_scope: EnvScope = EnvScope.DEFAULT_CONTAINER
    function_image: str = DEFAULT_BASE_IMAGE
    function_roles: Mapping[str, str] = MappingProxyType({"num_chief_replicas": "Chief", "num_ps_replicas": "PS"})

    def function_entrypoint(self, num_workers: int, num_procs_per_worker: int | str | None) -> str:
        return "python -u"

    def function_spec(
        self,
        template: dict[str, Any],
        num_workers: int,
        num_procs_per_worker: int | str | None,
        roles: Mapping[str, int],
    ) -> dict[str, Any]:
        """``num_workers`` Workers, plus a Chief and parameter servers when asked (the Kubeflow SDK's shape)."""
        replicas: dict[str, Any] = {
            rtype: {"replicas": count, "template": template} for rtype, count in roles.items() if count
        }
        replicas["Worker"] = {"replicas": num_workers, "template": template}
        return {self.info.replica_specs_field: replicas, "runPolicy": {}}

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        if any(t in job.replica_specs for t in LEADERS):
            return replica_type in LEADERS
        return replica_type == "Worker" and index == 0

    def is_elastic(self, job: TrainingJob) -> bool:
        """Dynamic workers join and leave a running job one by one; every other world is static."""
        assert isinstance(job, TFJob)
        return bool(job.spec.enable_dynamic_worker)

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        assert isinstance(job, TFJob)
        if not is_distributed(job):
            return []
        config = tf_config(job, self.info, network, replica_type, index)
        return [EnvVar(name="TF_CONFIG", value=json.dumps(config, separators=(",", ":")))]

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        assert isinstance(job, TFJob)
        kind, qualified = self.info.kind, f"{job.namespace}/{job.name}"
        out: list[Verdict] = []
        leader = next((counts[t] for t in LEADERS if t in counts), None)
        worker = counts.get("Worker")
        if leader is not None:
            if leader.active > 0:
                out.append(Verdict(ConditionType.RUNNING, f"{kind} {qualified} is running."))
            if leader.replicas > 0 and leader.succeeded >= leader.replicas:
                return [*out, Verdict(ConditionType.SUCCEEDED, f"{kind} {qualified} successfully completed.")]
        elif worker is not None and worker.replicas > 0:
            if job.spec.success_policy == "AllWorkers":
                done = worker.succeeded >= worker.replicas
            else:
                done = 0 in worker.succeeded_indices
            if done:
                return [*out, Verdict(ConditionType.SUCCEEDED, f"{kind} {qualified} successfully completed.")]
            if worker.active > 0:
                out.append(Verdict(ConditionType.RUNNING, f"{kind} {qualified} is running."))
        for rtype in self.info.replica_types:
            c = counts.get(rtype)
            if c is None or c.failed == 0:
                continue
            if job.spec.enable_dynamic_worker and rtype == "Worker":
                continue
            if c.restart_policy == RestartPolicy.NEVER:
                msg = f"{kind} {qualified} has failed because {c.failed} {rtype} replica(s) failed."
                return [*out, Verdict(ConditionType.FAILED, msg)]
            msg = f"{kind} {qualified} is restarting because {c.failed} {rtype} replica(s) failed."
            out.append(Verdict(ConditionType.RESTARTING, msg))
        return out
