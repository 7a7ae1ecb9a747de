"""What the node agent knows of each pod it runs and of each container run, and how a run's status reads.

A ``PodRun`` lives from the moment the agent takes a pod until its processes are gone: its
containers (init containers apart), what they were configured from (``sources``, ``volumes``,
``devices``), the sessions of commands exec'd into it, and the events that coordinate stopping. A
``ContainerRun`` is one container across its restarts: the shim handle of the current run, how it
ended, ``restartCount`` and ``lastState``; ``status`` renders it as the kubelet's
``ContainerStatus``. ``restarts`` is the ``restartPolicy`` rule. Kept apart from ``agent`` so
``containerconfig`` can read a run without importing the agent.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node.podenv import Sources
from trainyard.cluster.clients.node.probes import ContainerProbes
from trainyard.cluster.clients.node.runtime import shims


@dataclass
class ContainerRun:
    name: str
    image: str
    process: shims.Handle | None = None
    started_at: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    message: str | None = None
    finished_at: str | None = None
    waiting: str = "ContainerCreating"
    restart_count: int = 0
    last_state: Obj = field(default_factory=dict)
    started_mono: float = 0.0
    init: bool = False
    # This run's probe workers (main containers with probes only).
    probes: ContainerProbes | None = None
    # The environment this run started with: exec probes run in it, as in the container itself (the
    # image's mapping may have changed since). None for a run adopted from an earlier agent.
    env: dict[str, str] | None = None

    def status(self) -> Obj:
        state: Obj
        if self.exit_code is not None:
            term: Obj = {
                "exitCode": self.exit_code,
                "reason": self.reason or ("Completed" if self.exit_code == 0 else "Error"),
            }
            term |= {
                k: v
                for k, v in (
                    ("message", self.message),
                    ("startedAt", self.started_at),
                    ("finishedAt", self.finished_at),
                )
                if v
            }
            state = {"terminated": term}
        elif self.started_at is not None:
            state = {"running": {"startedAt": self.started_at}}
        else:
            state = {"waiting": {"reason": self.waiting, **({"message": self.message} if self.message else {})}}
        running = self.exit_code is None and self.started_at is not None
        # Like the kubelet: an init container is ready once it completed; a main one while running,
        # once its startup probe passed (started) and its readiness probe says so.
        if self.init:
            ready, started = self.exit_code == 0, running
        else:
            ready = running and (self.probes is None or self.probes.ready)
            started = running and (self.probes is None or self.probes.started)
        return {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": ready,
            "restartCount": self.restart_count,
            "started": started,
            "state": state,
            "lastState": self.last_state,
        }

    @property
    def has_run(self) -> bool:
        """Whether this container was started (by this agent or one before it) and not restarted since."""
        return self.process is not None or self.exit_code is not None

    def restarted(self) -> None:
        """Forget the finished run; its status moves to ``lastState`` (as the kubelet keeps it)."""
        self.last_state = self.status()["state"]
        self.process = self.probes = self.env = None
        self.started_at = self.exit_code = self.reason = self.message = self.finished_at = None
        self.waiting = "ContainerCreating"


def restarts(policy: str, exit_code: int | None) -> bool:
    """Whether the kubelet restarts a container that exited with ``exit_code`` under ``policy``."""
    return policy == "Always" or (policy == "OnFailure" and exit_code != 0)


@dataclass
class PodRun:
    namespace: str
    name: str
    uid: str
    containers: list[ContainerRun] = field(default_factory=list)
    init_containers: list[ContainerRun] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    # Set when the pod is being stopped, so a container waiting out its back-off stops waiting.
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    sources: Sources = field(default_factory=Sources)
    volumes: dict[str, Path] = field(default_factory=dict)
    # Status patches go out one at a time, and none after the terminal one (probes report too).
    reporting: asyncio.Lock = field(default_factory=asyncio.Lock)
    final: bool = False
    # GPU indices per container name (``gpus``), fixed before any container starts.
    devices: dict[str, list[int]] = field(default_factory=dict)
    # Volumes mounted read-only whatever the mount says (a claim mounted with readOnly).
    read_only: set[str] = field(default_factory=set)
    # The pod as the agent took it (what an exec into it resolves against), and the sessions its
    # exec'd commands run in: they are the pod's, and go when it stops (``podexec``).
    pod: Obj = field(default_factory=dict)
    exec_sessions: set[int] = field(default_factory=set)
    # Stopped by the node's graceful shutdown: reported Failed (Terminated) whatever the exits.
    shutdown: bool = False
