"""A pod's conditions as the kubelet derives them from its container statuses. Pure.

``Initialized`` waits for every init container to complete; ``ContainersReady`` and ``Ready``
for every main container to be ready (running, started, and passing its readiness probe), with
the kubelet's reasons and messages (``ContainersNotReady``: ``containers with unready status:
[web]``; ``PodCompleted`` once the pod is terminal).
"""

from __future__ import annotations

from trainyard.api.meta import Obj

TERMINAL = ("Succeeded", "Failed")


def _condition(kind: str, ok: bool, reason: str = "", message: str = "") -> Obj:
    out: Obj = {"type": kind, "status": "True" if ok else "False"}
    if not ok and reason:
        out["reason"] = reason
    if not ok and message:
        out["message"] = message
    return out


def pod_conditions(phase: str, init_statuses: list[Obj], statuses: list[Obj]) -> list[Obj]:
    incomplete = [
        s["name"] for s in init_statuses if ((s.get("state") or {}).get("terminated") or {}).get("exitCode") != 0
    ]
    unready = [s["name"] for s in statuses if not s.get("ready")]
    if phase in TERMINAL:
        ready_reason, ready_message = "PodCompleted", ""
    else:
        ready_reason, ready_message = "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]"
    ready = phase == "Running" and not unready
    return [
        {"type": "PodScheduled", "status": "True"},
        _condition(
            "Initialized",
            not incomplete,
            "ContainersNotInitialized",
            f"containers with incomplete status: [{' '.join(incomplete)}]",
        ),
        _condition("Ready", ready, ready_reason, ready_message),
        _condition("ContainersReady", ready, ready_reason, ready_message),
    ]
