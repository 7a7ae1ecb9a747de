"""``coordination.k8s.io/v1`` Lease: the record client-go style leader election reads and writes.

The API server only stores leases; what a lease means (who leads, until when) is decided by the
clients that compete for it, through resourceVersion-guarded updates. This module holds the
parts the server needs: the JSON shape, the validation of ``ValidateLeaseSpec`` (worded as
kube-apiserver words it) and kubectl's ``NAME HOLDER AGE`` columns.

Pure; callers: ``registry`` (the resource), ``shapes``, ``admission``, ``tables``.
"""

from __future__ import annotations

from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import causes
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "coordination.k8s.io/leases"
STRATEGIES = ("OldestEmulationVersion",)

SHAPE: dict[str, Any] = {
    "spec": {
        "holderIdentity": "string",
        "leaseDurationSeconds": "integer",
        "acquireTime": "string",
        "renewTime": "string",
        "leaseTransitions": "integer",
        "strategy": "string",
        "preferredHolder": "string",
    }
}


def validate(obj: Obj) -> list[Cause]:
    """The 422 causes of a Lease's spec."""
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        out.append(causes.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        out.append(causes.invalid("spec.leaseTransitions", transitions, "must be greater than or equal to 0"))
    strategy = spec.get("strategy")
    if strategy is not None and strategy not in STRATEGIES:
        out.append(causes.not_supported("spec.strategy", strategy, STRATEGIES))
    if spec.get("preferredHolder") and not spec.get("strategy"):
        out.append(causes.forbidden("spec.preferredHolder", "may only be specified if `strategy` is defined"))
    return out


def holder(obj: Obj) -> str:
    """kubectl's HOLDER column: the holder identity, empty where nobody holds it (as ``printLease``)."""
    spec = obj.get("spec") or {}
    value = spec.get("holderIdentity") if isinstance(spec, dict) else None
    return value if isinstance(value, str) else ""
