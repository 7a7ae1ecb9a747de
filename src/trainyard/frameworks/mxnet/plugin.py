"""MXJob (Training Operator v1.7): ``MX_CONFIG`` and the ``DMLC_*`` variables of MXNet's parameter server.

Every container gets, in v1.7's order, ``MX_CONFIG`` (JSON: the ``cluster`` of every replica
type, the ``labels`` holding each type's ``tuner-server-key`` template annotation, and this
container's ``task``) and the ``DMLC_*`` values a ps-lite process reads: the Scheduler's address
as the root, the number of Servers and Workers, its role; Workers also ``DMLC_WORKER_ID`` (BytePS).
No ``PYTHONUNBUFFERED``: v1.7 added none for this kind.

Success is the leader's: the Scheduler, or a lone Worker when the job has no Scheduler and no
Server (v1.7's rule). Where v1.7 has no leader (an ``MXTune`` job, Workers without a Scheduler) its
job never succeeds; here the Tuner, else every Worker, decides. The master-role label goes to the
Servers, as v1.7 put it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from trainyard.api.common import ConditionType, TrainingJob
from trainyard.api.core import EnvVar
from trainyard.api.kindinfo import KindInfo
from trainyard.api.kubeflow.mxnet import MXJOB
from trainyard.frameworks.base import ReplicaCounts, Verdict
from trainyard.frameworks.network import Network
from trainyard.frameworks.replicas import StaticWorld, declared_port, failure_verdicts

TUNER_SERVER_KEY = "tuner-server-key"

# Go's encoding/json escapes these inside strings (HTML safety, JavaScript line separators) and
# writes other non-ASCII characters as they are; MX_CONFIG is byte for byte what v1.7 wrote.
_GO_ESCAPES = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def go_json(value: Any) -> str:
    """``json.Marshal``'s text for ``value`` (keys in the order given: Go sorts map keys, keeps struct order)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).translate(_GO_ESCAPES)


def mx_config(job: TrainingJob, info: KindInfo, network: Network, replica_type: str, index: int) -> dict[str, Any]:
    """The ``MX_CONFIG`` object of one replica: maps keyed by the lower-cased replica types, sorted."""
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


def leader(job: TrainingJob) -> str | None:
    """The replica type whose success is the job's (None when there is none to ask)."""
    specs = job.replica_specs
    replicas = {rtype: spec.replicas or 0 for rtype, spec in specs.items()}
    if "Scheduler" in specs:
        return "Scheduler"
    if replicas.get("Worker") == 1 and "Server" not in specs:
        return "Worker"  # v1.7's "single training": one Worker alone
    if "Tuner" in specs:
        return "Tuner"
    return "Worker" if "Worker" in specs else None


class MXNet(StaticWorld):
    info: KindInfo = MXJOB

    def is_master_role(self, job: TrainingJob, replica_type: str, index: int) -> bool:
        return replica_type == "Server"

    def env(self, job: TrainingJob, replica_type: str, index: int, network: Network) -> Sequence[EnvVar]:
        config = mx_config(job, self.info, network, replica_type, index)
        cluster = config["cluster"]
        root = (cluster.get("scheduler") or [{"url": "", "port": 0}])[0]
        out = [
            EnvVar(name="MX_CONFIG", value=go_json(config)),
            EnvVar(name="DMLC_PS_ROOT_PORT", value=str(root["port"])),
            EnvVar(name="DMLC_PS_ROOT_URI", value=root["url"]),
            EnvVar(name="DMLC_NUM_SERVER", value=str(len(cluster.get("server", [])))),
            EnvVar(name="DMLC_NUM_WORKER", value=str(len(cluster.get("worker", [])))),
            EnvVar(name="DMLC_ROLE", value=replica_type.lower()),
            EnvVar(name="DMLC_USE_KUBERNETES", value="1"),
        ]
        if replica_type == "Worker":
            out.append(EnvVar(name="DMLC_WORKER_ID", value=str(index)))
        return out

    def verdicts(self, job: TrainingJob, counts: Mapping[str, ReplicaCounts]) -> Sequence[Verdict]:
        """v1.7's rules and words (its failure messages say ``mxjob``, in lower case).

        A failed replica fails the job under ``restartPolicy: Never``; under the other policies
        the job is Restarting (v1.7: only ``ExitCode``; it failed OnFailure/Always jobs, whose
        containers the kubelet restarts in place there, while here a static world restarts as a
        gang and every crash surfaces as a failed pod first).
        """
        name = job.name
        running: list[Verdict] = []
        lead = counts.get(leader(job) or "")
        if lead is not None:
            if lead.active > 0:
                running.append(Verdict(ConditionType.RUNNING, f"MXJob {name} is running."))
            if lead.replicas > 0 and lead.succeeded >= lead.replicas:
                return [*running, Verdict(ConditionType.SUCCEEDED, f"MXJob {name} is successfully completed.")]
        # v1.7 failed on any failed pod, even with the type's replicas covered by others; here no
        # failed pod outlives its replacement, so upstream's common rule says the same.
        fails = failure_verdicts(self.info, name, counts, subject="mxjob")
        if fails and fails[-1].type is ConditionType.FAILED:
            return [*running, fails[-1]]
        # Running and Restarting exclude each other: both in one pass would rewrite both every pass.
        return fails or running
