"""A job's replica pods as the API server would return them, for reconciling a plugin's job in unit tests.

``observed(job, plugin, {"worker-1": "Failed", ...})`` builds each named pod with the engine's own
builder and gives it that phase (and the default container's exit code once it has ended), so a
test drives ``controller.reconcile`` through counts, restarts and the plugin's verdicts together.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from trainyard.api import Pod
from trainyard.api.common import TrainingJob
from trainyard.api.defaults import apply_defaults
from trainyard.controller import Observed
from trainyard.controller.children import build_pod
from trainyard.frameworks.base import Framework
from trainyard.frameworks.network import Network, NetworkMode

NOW = datetime(2026, 1, 1, tzinfo=UTC)
_EARLIER = "2025-12-31T23:59:00Z"


def seen_running(body: dict[str, Any], kind: str) -> dict[str, Any]:
    """``body`` with the status a pass that saw it run wrote: Created and Running."""
    condition = {"status": "True", "lastUpdateTime": _EARLIER, "lastTransitionTime": _EARLIER}
    conditions = [{"type": t, "reason": f"{kind}{t}", **condition} for t in ("Created", "Running")]
    return {**body, "status": {"conditions": conditions, "startTime": _EARLIER}}


def observed(job: TrainingJob, plugin: Framework, phases: Mapping[str, str], exit_code: int = 1) -> Observed:
    """``job`` and the pods named ``<type>-<index>`` in ``phases``, as the API server returns them."""
    info = plugin.info
    defaulted = apply_defaults(job, info)
    pods = []
    for name, phase in phases.items():
        rtype, index = name.split("-")
        canonical = next(t for t in info.replica_types if t.lower() == rtype)
        body = build_pod(defaulted, plugin, canonical, int(index), Network(NetworkMode.CLUSTER_DNS)).to_dict()
        body["metadata"]["uid"] = f"uid-{name}"
        body["status"] = {"phase": phase}
        if phase in ("Failed", "Succeeded"):
            state = {"terminated": {"exitCode": exit_code if phase == "Failed" else 0}}
            body["status"]["containerStatuses"] = [{"name": info.default_container, "state": state}]
        pods.append(Pod.model_validate(body))
    return Observed(job, tuple(pods), (), NOW)
