"""A container's configuration on this node: its environment, volumes, mounts and working directory.

What the kubelet's ``generateContainerConfig`` does, and what ``CreateContainerConfigError``
reports when it cannot: the environment is the local Python environment the container's image
stands for (``cluster.environments``: ``PATH`` first to its ``bin`` and ``VIRTUAL_ENV`` set), else
the plane's own, plus the pod's (``podenv``) and the container's GPUs (``gpus``); volumes become
directories under the pod's directory (``volumes``), mounted at their ``mountPath`` in a private
mount namespace (``runtime.mountns``) when the container has ``volumeMounts``; an image's
``/workspace`` is the plane's workspace, since images are not pulled.
``config_error`` says, in words the user can act on, why a container cannot be created yet.

Callers: ``agent`` (starting containers, exec probes).
"""

from __future__ import annotations

import os
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

from trainyard.cluster.environments import Environments, EnvironmentsError, Match
from trainyard.cluster.node import gpus, volumes
from trainyard.cluster.node.capacity import Capacity
from trainyard.cluster.node.podenv import ConfigError, container_env
from trainyard.cluster.node.podenv import Node as DownwardNode
from trainyard.cluster.node.runs import PodRun
from trainyard.cluster.paths import Layout

Obj = dict[str, Any]
# Images are not pulled here; code in the image's /workspace resolves against the plane's workspace.
IMAGE_WORKSPACE = "/workspace"
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER", "LOGNAME", "SHELL", "TERM")


class ContainerConfig:
    def __init__(self, layout: Layout, workspace: Path, *, node_name: str, address: str, capacity: Capacity) -> None:
        self.layout = layout
        self.workspace = workspace
        self.node_name = node_name
        self.address = address
        self.capacity = capacity
        self.environments = Environments(layout.environments_file)

    def python_environment(self, container: Obj) -> Match | None:
        """The local environment the container's image runs in; None: the plane's own.

        Raises ``EnvironmentsError`` when the mapping cannot be read or names an environment that
        is not there (a silent fallback would run the code with the wrong packages).
        """
        found = self.environments.resolve(container.get("image") or "")
        if found is not None and not found.environment.exists:
            env = found.environment
            raise EnvironmentsError(
                f"image {container.get('image')!r} maps to local environment {env.name!r} "
                f"({self.environments.path}: {found.glob!r}), but {env.bin_dir / 'python'} does not exist; "
                f"create it (`yard env create {env.name} -r REQUIREMENTS`, or `make envs` for the project's) "
                f"or remove the entry (`yard env remove {env.name}`)"
            )
        return found

    def environment_message(self, container: Obj) -> str:
        """What the ``Pulled`` event says: which environment stands for the image, and why."""
        image = container.get("image") or "<none>"
        try:
            found = self.python_environment(container)
        except EnvironmentsError as exc:
            return str(exc)
        if found is None:
            own = Path(sys.executable).parent.parent
            return (
                f"Container image {image!r} runs in trainyard's own environment ({own}): "
                f"no environment in {self.environments.path} maps it (`yard env` to add one)"
            )
        env = found.environment
        return (
            f"Container image {image!r} runs in local environment {env.name!r} ({env.path}): "
            f"{self.environments.path.name} maps {found.glob!r}"
        )

    def environment(self, run: PodRun, pod: Obj, container: Obj) -> dict[str, str]:
        env = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        found = self.python_environment(container)
        # Training code runs with its image's environment, or the one the plane was started from.
        bin_dir = str(found.environment.bin_dir if found else Path(sys.executable).parent)
        if found is not None:
            env["VIRTUAL_ENV"] = str(found.environment.path)
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", os.defpath)])
        env["HOSTNAME"] = pod["metadata"]["name"]
        env.update(gpus.environment(run.devices.get(container["name"]), self.capacity.gpus))
        return container_env(pod, container, env, run.sources, self._downward())

    def _downward(self) -> DownwardNode:
        # An unset limit reads as the node's allocatable, the declared one when yard up declared it.
        cpu = Decimal(self.capacity.cpu) / 1000
        return DownwardNode(self.node_name, self.address, cpu, Decimal(self.capacity.memory))

    def materialize(self, run: PodRun, pod: Obj) -> str | None:
        pod_dir = self.layout.pod_dir(run.namespace, run.name, run.uid)
        try:
            declared = (pod.get("spec") or {}).get("volumes") or []
            node = self._downward()
            run.volumes = {v["name"]: volumes.materialize(pod_dir, v, run.sources, pod, node) for v in declared}
            run.read_only = volumes.read_only(declared)
        except volumes.ConfigError as exc:
            return str(exc)
        except OSError as exc:
            return f"volume setup failed: {exc}"
        return None

    def mount_spec(self, run: PodRun, container: Obj) -> tuple[Obj | None, Path]:
        """The mount namespace (``mountns.enter``'s spec) the container needs, if any, and its host cwd."""
        if not container.get("volumeMounts"):
            return None, self._working_dir(run, container)
        default = self.layout.pod_dir(run.namespace, run.name, run.uid) / "work"
        default.mkdir(parents=True, exist_ok=True)
        wanted = container.get("workingDir") or ""
        cwd = wanted if wanted and volumes.under_mount(wanted, container) else str(self._working_dir(run, container))
        spec = {
            "root": str(self.layout.pod_dir(run.namespace, run.name, run.uid) / "root" / container["name"]),
            "cwd": cwd,
            "mounts": volumes.mounts(container, run.volumes, run.read_only),
        }
        return spec, default

    def _working_dir(self, run: PodRun, container: Obj) -> Path:
        wanted: str | None = container.get("workingDir")
        if not wanted:
            path = self.layout.pod_dir(run.namespace, run.name, run.uid) / "work"
            path.mkdir(parents=True, exist_ok=True)
            return path
        if wanted == IMAGE_WORKSPACE or wanted.startswith(IMAGE_WORKSPACE + "/"):
            return self.workspace / wanted[len(IMAGE_WORKSPACE) :].lstrip("/")
        return Path(wanted)

    def config_error(self, run: PodRun, pod: Obj, container: Obj) -> str | None:
        """What stops a container from being created at all, said so the user can fix it."""
        try:
            self.environment(run, pod, container)
        except (ConfigError, EnvironmentsError) as exc:
            return str(exc)
        if not container.get("command"):
            return (
                f"container {container['name']!r} has no command; the local node runs a container's command "
                "and args (images are not run here): set spec.containers[].command"
            )
        try:
            volumes.mounts(container, run.volumes, run.read_only)
        except volumes.ConfigError as exc:
            return str(exc)
        if volumes.under_mount(container.get("workingDir") or "", container):
            return None
        cwd = self._working_dir(run, container)
        if not cwd.is_dir():
            return (
                f"workingDir {container.get('workingDir')} is {cwd} on this node, which does not exist; an image's "
                "/workspace is the plane's workspace (yard up --workspace DIR)"
            )
        return None
