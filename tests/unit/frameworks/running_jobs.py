"""A job some pass already saw running, and its pods: what a plugin's rules meet in the reconciler.

``observed(owner, plugin, phases)`` stores ``owner`` (a defaulted job) as Created and Running and
builds its pods with the real pod builder, each in the phase ``phases`` names
(``{"worker-1": "Failed"}``), a finished one with its default container's exit code.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from trainyard.api import Pod, TrainingJob
from trainyard.controller import Observed
from trainyard.controller.children import build_pod
from trainyard.frameworks.base import Framework
from trainyard.frameworks.network import Network, NetworkMode

NOW = datetime(2026, 1, 1, tzinfo=UTC)
BEFORE = "2025-12-31T23:59:00Z"


def observed(owner: TrainingJob, plugin: Framework, phases: Mapping[str, str], exit_code: int = 1) -> Observed:
    kind = plugin.info.kind
    body = owner.to_dict()
    true = {"status": "True", "lastUpdateTime": BEFORE, "lastTransitionTime": BEFORE}
    body["status"] = {
        "conditions": [
            {"type": "Created", "reason": f"{kind}Created", **true},
            {"type": "Running", "reason": f"{kind}Running", **true},
        ],
        "startTime": BEFORE,
    }
    types = {rtype.lower(): rtype for rtype in owner.replica_specs}
    pods = []
    for name, phase in phases.items():
        rtype, _, index = name.rpartition("-")
        pod = build_pod(owner, plugin, types[rtype], int(index), Network(NetworkMode.CLUSTER_DNS)).to_dict()
        pod["metadata"]["uid"] = f"uid-{name}"
        pod["status"] = {"phase": phase}
        if phase in ("Failed", "Succeeded"):
            state = {"terminated": {"exitCode": exit_code if phase == "Failed" else 0}}
            pod["status"]["containerStatuses"] = [{"name": plugin.info.default_container, "state": state}]
        pods.append(Pod.model_validate(pod))
    return Observed(type(owner).model_validate(body), tuple(pods), (), NOW)
