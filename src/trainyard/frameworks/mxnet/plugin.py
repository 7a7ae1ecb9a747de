"""MXJob (Training Operator v1.7): ``MX_CONFIG`` and the ``DMLC_*`` variables of MXNet's parameter server.

Every container gets ``MX_CONFIG`` (the cluster of every replica type, the ``tuner-server-key``
annotation of each type's template, and its own task) and the ``DMLC_*`` values a ps-lite process
reads (the Scheduler is the root). The leading replica decides success: the Scheduler (MXTrain),
the Tuner (MXTune), else every Worker.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.mxnet import MXJOB, MXJob
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network
from trainyard.frameworks.replicas import StaticWorld, declared_port, failure_verdicts

TUNER_SERVER_KEY = "tuner-server-key"


def mx_config(job: TrainingJob, info: KindInfo, network: Network, replica_type: str, index: int) -> dict[str, Any]:
    cluster: dict[str, list[dict[str, Any]]] = {}
    labels: dict[str, str] = {}
    for rtype, spec in sorted(job.replica_specs.items(), key=lambda item: item[0].lower()):
        declared = declared_port(job, rtype, info)
        cluster[rtype.lower()] = [
            {
                "url": network.address(job.name, rtype, i),
                "port": network.port(rtype, i, info.default_port_name, declared),
            }
            for i in range(spec.replicas or 0)
        ]
        labels[rtype.lower()] = (spec.template.metadata.annotations or {}).get(TUNER_SERVER_KEY, "")
    return {"cluster": cluster, "labels": labels, "task": {"type": replica_type.lower(), "index": index}}


class MXNet(StaticWorld):
    info: KindInfo = MXJOB

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return replica_type == self._leader(job)

    def _leader(self, job: TrainingJob) -> str:
        assert isinstance(job, MXJob)
        wanted = "Tuner" if job.spec.job_mode == "MXTune" else "Scheduler"
        return wanted if wanted in job.replica_specs else "Worker"

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        config = mx_config(job, self.info, network, replica_type, index)
        root = (config["cluster"].get("scheduler") or [{"url": "", "port": 0}])[0]
        out = [
            EnvVar(name="MX_CONFIG", value=json.dumps(config, separators=(",", ":"))),
            EnvVar(name="DMLC_PS_ROOT_PORT", value=str(root["port"])),
            EnvVar(name="DMLC_PS_ROOT_URI", value=root["url"]),
            EnvVar(name="DMLC_NUM_SERVER", value=str(len(config["cluster"].get("server", [])))),
            EnvVar(name="DMLC_NUM_WORKER", value=str(len(config["cluster"].get("worker", [])))),
            EnvVar(name="DMLC_ROLE", value=replica_type.lower()),
            EnvVar(name="DMLC_USE_KUBERNETES", value="1"),
        ]
        if replica_type == "Worker":
            out.append(EnvVar(name="DMLC_WORKER_ID", value=str(index)))  # BytePS reads it
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        kind, name = self.info.kind, job.name
        out: list[Verdict] = []
        leader = counts.get(self._leader(job))
        if leader is not None:
            if leader.replicas > 0 and leader.succeeded >= leader.replicas:
                return [Verdict(ConditionType.SUCCEEDED, f"{kind} {name} is successfully completed.")]
            if leader.active > 0:
                out.append(Verdict(ConditionType.RUNNING, f"{kind} {name} is running."))
        return [*out, *failure_verdicts(self.info, name, counts)]
