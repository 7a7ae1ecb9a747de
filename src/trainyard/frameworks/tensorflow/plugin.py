"""TFJob: ``TF_CONFIG`` and the chief-or-worker-0 success rule (reference §3.2, §8).

``TF_CONFIG`` goes into the ``tensorflow`` container only, and only when the job is distributed
(more than one replica in all). Its cluster lists every replica type the job has, Evaluator
included, as upstream: each task's headless-Service name (``<job>-<type>-<i>.<ns>.svc``, plus the
operator's ``CUSTOM_CLUSTER_DOMAIN``, which ``Network.cluster_domain`` carries) in cluster-dns
mode, the node and the port allocated for the task in host mode. ``enableDynamicWorker`` gives
the sparse form, in which a worker sees only itself and the parameter servers.

The world is static unless ``enableDynamicWorker`` is set: one failed replica restarts the whole
gang. With dynamic workers a worker leaves and rejoins on its own (the sparse form exists so that
no task's configuration names the others), so a failed replica is restarted alone.

Besides ``base.Framework`` it runs Python functions as jobs (``capabilities.FunctionJobs``): the
Kubeflow SDK's ``num_workers`` Workers, plus a Chief and parameter servers when asked for.
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
        # upstream writes null for a job without PS, which tf.train.ClusterSpec refuses
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
        """A Chief and parameter servers when asked, then ``num_workers`` Workers (the Kubeflow SDK's shape).

        A role asked for with a count of 0 is left out (admission refuses a type of no replicas;
        the Kubeflow SDK sends it anyway).
        """
        if num_procs_per_worker is not None:
            raise ValueError("num_procs_per_worker can't be set for TFJob")
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
        """Upstream's ``UpdateJobStatus`` (reference §8): who decides success, and which failures count.

        With a Chief or Master, it decides; without, Worker 0 does (``successPolicy: ""``) or every
        Worker (``AllWorkers``). A failed replica of any type (Chief, Evaluator, Master, PS, Worker,
        in that order) fails the job under ``restartPolicy: Never`` and makes it Restarting
        otherwise; with ``enableDynamicWorker`` a failed Worker that will not restart is ignored.
        Success is final: a replica failing in the same pass does not turn it into a failure.
        """
        assert isinstance(job, TFJob)
        kind, qualified = self.info.kind, f"{job.namespace}/{job.name}"
        leader = next((counts[t] for t in LEADERS if t in counts), None)
        worker = counts.get("Worker")
        if leader is not None:
            deciding = leader
            done = leader.replicas > 0 and leader.succeeded >= leader.replicas
        elif worker is not None:
            deciding = worker
            every = worker.replicas > 0 and worker.succeeded >= worker.replicas
            done = every or (job.spec.success_policy != "AllWorkers" and 0 in worker.succeeded_indices)
        else:
            return self._failures(job, counts, running=[])
        if done:
            return [Verdict(ConditionType.SUCCEEDED, f"{kind} {qualified} successfully completed.")]
        running = [Verdict(ConditionType.RUNNING, f"{kind} {qualified} is running.")] if deciding.active > 0 else []
        return self._failures(job, counts, running=running)

    def _failures(self, job: TFJob, counts: Mapping[str, ReplicaCounts], *, running: list[Verdict]) -> list[Verdict]:
        kind, qualified = self.info.kind, f"{job.namespace}/{job.name}"
        for rtype in self.info.replica_types:
            c = counts.get(rtype)
            if c is None or c.failed == 0:
                continue
            if c.restart_policy != RestartPolicy.NEVER:
                # No Running before it: each would remove the other, rewriting the status every pass.
                msg = f"{kind} {qualified} is restarting because {c.failed} {rtype} replica(s) failed."
                return [Verdict(ConditionType.RESTARTING, msg)]
            if job.spec.enable_dynamic_worker and rtype == "Worker":
                continue
            msg = f"{kind} {qualified} has failed because {c.failed} {rtype} replica(s) failed."
            return [*running, Verdict(ConditionType.FAILED, msg)]
        return running
