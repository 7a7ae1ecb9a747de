"""kubectl's STATUS and RESTARTS of a pod (its ``printPod``), from the few fields they read.

The fields are msgspec structs named as on the wire, so a stored pod decodes straight into
them and the decoder skips everything else without building it (``decoder``); ``as_pod`` reads
the same from a pod already decoded, leniently (stored objects vary). ``gc=False``: these hold
no cycles, and tracking 10,000 of them would cost more in collector passes than decoding them.

Pure; callers: ``tables`` (the pod columns, generic and from encoded pods).
"""

from __future__ import annotations

from typing import Any

import msgspec

from trainyard.api.meta import Obj


class Waiting(msgspec.Struct, gc=False):
    reason: str | None = None


class Terminated(msgspec.Struct, gc=False):
    reason: str | None = None
    exitCode: int | None = None
    signal: int | None = None


class Running(msgspec.Struct, gc=False):
    pass


class State(msgspec.Struct, gc=False):
    waiting: Waiting | None = None
    running: Running | None = None
    terminated: Terminated | None = None


class LastTerminated(msgspec.Struct, gc=False):
    finishedAt: str | None = None


class LastState(msgspec.Struct, gc=False):
    terminated: LastTerminated | None = None


class ContainerStatus(msgspec.Struct, gc=False):
    ready: bool | None = None
    restartCount: int | None = None
    state: State | None = None
    lastState: LastState | None = None


class Condition(msgspec.Struct, gc=False):
    type: str | None = None
    status: str | None = None
    reason: str | None = None


class PodStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    reason: str | None = None
    podIP: str | None = None
    nominatedNodeName: str | None = None
    initContainerStatuses: list[ContainerStatus] | None = None
    containerStatuses: list[ContainerStatus] | None = None
    conditions: list[Condition] | None = None


class Gate(msgspec.Struct, gc=False):
    conditionType: str | None = None


class PodSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    initContainers: list[msgspec.Raw] | None = None
    containers: list[msgspec.Raw] | None = None
    readinessGates: list[Gate] | None = None


class PodMeta(msgspec.Struct, gc=False):
    name: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None


class Pod(msgspec.Struct, gc=False):
    metadata: msgspec.Raw = msgspec.Raw(b"{}")  # Raw cannot be in a union: absent is {}
    spec: PodSpec | None = None
    status: PodStatus | None = None


decoder = msgspec.json.Decoder(Pod)
meta_decoder = msgspec.json.Decoder(PodMeta)


def _dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _as_status(cs: Any) -> ContainerStatus:
    """A container status read leniently from a decoded object (the generic path takes any shape)."""
    cs = _dict(cs)
    state, last = _dict(cs.get("state")), _dict(_dict(cs.get("lastState")).get("terminated"))
    waiting, terminated = state.get("waiting"), state.get("terminated")
    return ContainerStatus(
        ready=bool(cs.get("ready")),
        restartCount=int(cs.get("restartCount") or 0),
        state=State(
            waiting=Waiting(_dict(waiting).get("reason")) if isinstance(waiting, dict) else None,
            running=Running() if isinstance(state.get("running"), dict) else None,
            terminated=(
                Terminated(terminated.get("reason"), terminated.get("exitCode"), terminated.get("signal"))
                if isinstance(terminated, dict)
                else None
            ),
        ),
        lastState=LastState(LastTerminated(last.get("finishedAt"))) if last else None,
    )


def as_pod(pod: Obj) -> Pod:
    spec, status = _dict(pod.get("spec")), _dict(pod.get("status"))
    return Pod(
        spec=PodSpec(initContainers=[msgspec.Raw(b"{}")] * len(spec.get("initContainers") or [])),
        status=PodStatus(
            phase=status.get("phase"),
            reason=status.get("reason"),
            initContainerStatuses=[_as_status(cs) for cs in status.get("initContainerStatuses") or []],
            containerStatuses=[_as_status(cs) for cs in status.get("containerStatuses") or []],
            conditions=[
                Condition(c.get("type"), c.get("status"), c.get("reason"))
                for c in status.get("conditions") or []
                if isinstance(c, dict)
            ],
        ),
    )


def initializing(status: PodStatus) -> bool:
    """Whether kubectl's STATUS column speaks of init containers (``Init:0/2``, ``Init:Error``...)."""
    for cs in status.initContainerStatuses or []:
        state = cs.state or State()
        if state.terminated is not None and state.terminated.exitCode == 0:
            continue
        return not any(c.type == "Initialized" and c.status == "True" for c in status.conditions or [])
    return False


def reason(pod: Pod, deleting: bool) -> str:
    """kubectl's STATUS column (its ``printPod``): phase or reason, refined by init then main containers."""
    spec, status = pod.spec or PodSpec(), pod.status or PodStatus()
    reason = status.reason or status.phase or "Pending"
    if any(c.type == "PodScheduled" and c.reason == "SchedulingGated" for c in status.conditions or []):
        reason = "SchedulingGated"
    initializing = False
    for index, cs in enumerate(status.initContainerStatuses or []):
        state = cs.state or State()
        term = state.terminated
        if term is not None and term.exitCode == 0:
            continue
        initializing = True
        if term is not None:
            if term.reason:
                reason = f"Init:{term.reason}"
            else:
                reason = f"Init:Signal:{term.signal}" if term.signal else f"Init:ExitCode:{term.exitCode}"
        elif state.waiting is not None and state.waiting.reason and state.waiting.reason != "PodInitializing":
            reason = f"Init:{state.waiting.reason}"
        else:
            reason = f"Init:{index}/{len(spec.initContainers or [])}"
        break
    initialized = any(c.type == "Initialized" and c.status == "True" for c in status.conditions or [])
    if not initializing or initialized:
        running = False
        for cs in reversed(status.containerStatuses or []):
            state = cs.state or State()
            if state.waiting is not None and state.waiting.reason:
                reason = state.waiting.reason
            elif state.terminated is not None:
                term = state.terminated
                reason = term.reason or (f"Signal:{term.signal}" if term.signal else f"ExitCode:{term.exitCode}")
            elif cs.ready and state.running is not None:
                running = True
        if reason == "Completed" and running:
            ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or [])
            reason = "Running" if ready else "NotReady"
    if deleting and status.reason == "NodeLost":
        return "Unknown"
    if deleting and status.phase not in ("Succeeded", "Failed"):
        return "Terminating"
    return str(reason)


def restart_counts(pod: Pod) -> tuple[int, list[str | None]]:
    """RESTARTS of init containers while the pod initializes, else of its main containers (as kubectl)."""
    status = pod.status or PodStatus()
    counted = status.initContainerStatuses if initializing(status) else status.containerStatuses
    statuses = counted or []
    finished = [cs.lastState.terminated.finishedAt for cs in statuses if cs.lastState and cs.lastState.terminated]
    return sum(cs.restartCount or 0 for cs in statuses), finished
