"""A container's configuration on this node: its environment, volumes, mounts and working directory.

What the kubelet's ``generateContainerConfig`` does, and what ``CreateContainerConfigError``
reports when it cannot: the environment is the local Python environment the container's image
stands for (``cluster.environments``: ``PATH`` first to its ``bin`` and ``VIRTUAL_ENV`` set), else
the plane's own, plus the pod's (``podenv``), the container's GPUs (``gpus``) and the thread counts
of its CPU share where it sets none (``threads``); volumes become
directories under the pod's directory (``volumes``), mounted at their ``mountPath`` in a private
mount namespace (``runtime.mountns``) when the container has ``volumeMounts``; an image's
``/workspace`` is the plane's workspace, since images are not pulled. Every container also starts
with what an image would set for this node (``podexec.image_defaults``: the launch agent that lets
``mpirun`` reach other pods here), under its own ``env``.
``config_error`` says, in words the user can act on, why a container cannot be created yet.
``exec_target`` is where a command exec'd into a running pod runs (``podexec``): its container's
environment, mounts, working directory, cgroup and hostname. ``logging`` is where a container's
log goes and how its shim rotates it (``containerlogs``); ``retire_log`` keeps a finished run's.

Callers: ``agent`` (starting containers, exec probes, exec into pods).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from decimal import Decimal
from pathlib import Path

from trainyard.api.meta import Obj
from trainyard.cluster import logs, paths
from trainyard.cluster.clients.node import dnsconfig, gpus, podexec, threads, volumes
from trainyard.cluster.clients.node.capacity import Capacity, machine_cpus
from trainyard.cluster.clients.node.containerlogs import LogRotation
from trainyard.cluster.clients.node.podenv import ConfigError, container_env
from trainyard.cluster.clients.node.podenv import Node as DownwardNode
from trainyard.cluster.clients.node.runs import ContainerRun, PodRun
from trainyard.cluster.clients.node.runtime.shims import ShimRuntime
from trainyard.cluster.environments import Environments, EnvironmentsError, Match
from trainyard.cluster.paths import Layout
from trainyard.kit.informer import Informer

# Images are not pulled here; code in the image's /workspace resolves against the plane's workspace.
IMAGE_WORKSPACE = "/workspace"
_BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TZ", "USER", "LOGNAME", "SHELL", "TERM")


class ContainerConfig:
    def __init__(
        self,
        layout: Layout,
        workspace: Path,
        *,
        node_name: str,
        address: str,
        capacity: Capacity,
        running: Callable[[], Iterable[Obj]],
        rotation: LogRotation | None = None,
        dns: dnsconfig.NodeDns | None = None,
    ) -> None:
        self.layout = layout
        # What pods' /etc/resolv.conf and /etc/hosts say; None: containers keep the machine's.
        self.dns = dns
        self.rotation = rotation or LogRotation()
        self.workspace = workspace
        self.node_name = node_name
        self.address = address
        self.capacity = capacity
        self.running = running  # the node's pods that share its cores (``BoundPods.active``)
        self.cores = threads.node_cores(capacity.cpu, machine_cpus())
        self.environments = Environments(layout.environments_file)
        self._memory_root: Path | None = None  # found on first use (``paths.memory_root``)

    def python_environment(self, container: Obj) -> Match | None:
        """The local environment the container's image runs in; None: the plane's own.

        Raises ``EnvironmentsError`` when the mapping cannot be read or names an environment that
        is not there (a silent fallback would run the code with the wrong packages).
        """
        image = container.get("image") or ""
        found = self.environments.resolve(image)
        if found is not None and not found.environment.exists:
            env = found.environment
            raise EnvironmentsError(
                f'image "{image}" maps to local environment "{env.name}" ({self.environments.path}: entry '
                f'"{env.name}", image glob "{found.glob}"), but {env.bin_dir / "python"} does not exist; create it '
                f"(`yard env create {env.name} --path {env.path} -r REQUIREMENTS`, or `make envs` for the "
                f"project's) or remove the entry (`yard env remove {env.name}`)"
            )
        return found

    def start(self, run: PodRun, pod: Obj, container: Obj) -> tuple[dict[str, str], str, str | None]:
        """The environment one container run starts with, the ``Pulled`` event that says which it is,
        and the ``ThreadsSet`` event that says which thread counts the node set in it (None: none).

        All come from one reading of the mapping and the node's pods, so the events say what ran.
        """
        found = self.python_environment(container)
        env, plan = self._environment(run, pod, container, found)
        return env, self._pulled(container, found), plan.event(container["name"])

    def environment(self, run: PodRun, pod: Obj, container: Obj) -> dict[str, str]:
        return self._environment(run, pod, container, self.python_environment(container))[0]

    def exec_environment(self, run: PodRun, pod: Obj, container: Obj) -> dict[str, str]:
        """An exec probe's environment for a run adopted from an earlier agent (which did not say what it
        started with): as the container's config reads now; ``OSError`` (a probe error) when it cannot be built.
        """
        try:
            return self.environment(run, pod, container)
        except (ConfigError, EnvironmentsError) as exc:
            raise OSError(str(exc)) from exc

    def _pulled(self, container: Obj, found: Match | None) -> str:
        # Kubelet-like wording; images are not pulled here, a local environment stands for them.
        image = container.get("image") or "<none>"
        if found is None:
            return (
                f'Container image "{image}" runs in trainyard\'s own environment ({sys.prefix}): '
                f"no environment in {self.environments.path} maps it"
            )
        env = found.environment
        return (
            f'Container image "{image}" runs in local environment "{env.name}" ({env.path}): '
            f'{self.environments.path.name} maps "{found.glob}"'
        )

    def _environment(
        self, run: PodRun, pod: Obj, container: Obj, found: Match | None
    ) -> tuple[dict[str, str], threads.Threads]:
        env = {k: os.environ[k] for k in _BASE_ENV if k in os.environ}
        # Training code runs with its image's environment, or the one the plane was started from.
        bin_dir = str(found.environment.bin_dir if found else Path(sys.executable).parent)
        # Like an image's ENV: below the pod's own env. Containers run as the plane's user here.
        prefix = found.environment.path if found else Path(sys.prefix)
        env.update(podexec.image_defaults(self.layout.exec_agent, as_root=os.geteuid() == 0, prefix=prefix))
        if found is not None:
            env["VIRTUAL_ENV"] = str(found.environment.path)
        env["PATH"] = os.pathsep.join([bin_dir, env.get("PATH", os.defpath)])
        env["HOSTNAME"] = podexec.pod_hostname(pod)  # as the kubelet: spec.hostname, else the name
        env.update(gpus.environment(run.devices.get(container["name"]), self.capacity.gpus))
        env = container_env(pod, container, env, run.sources, self._downward())
        # After the container's env: what it sets is its own (nothing above sets these variables).
        plan = threads.decide(container, env, cores=self.cores, pods=threads.pods_running(self.running(), run.uid))
        env.update(plan.env)
        return env, plan

    def _downward(self) -> DownwardNode:
        # An unset limit reads as the node's allocatable, the declared one when yard up declared it.
        cpu = Decimal(self.capacity.cpu) / 1000
        return DownwardNode(self.node_name, self.address, cpu, Decimal(self.capacity.memory))

    def _memory(self) -> Path:
        """The node's directory for memory-backed volumes, found (and made) on first use: one per
        node, for each node prunes what its own pods no longer need."""
        if self._memory_root is None:
            root = paths.memory_root(self.layout) / self.node_name
            root.mkdir(mode=0o700, exist_ok=True)
            self._memory_root = root
        return self._memory_root

    def memory_dir(self, run: PodRun) -> Path:
        """Where the pod's memory-backed volumes live; ``release`` removes it."""
        return self._memory() / f"{run.namespace}_{run.name}_{run.uid}"

    def release(self, run: PodRun) -> None:
        """The pod's memory-backed volumes go once its containers are gone for good (a kubelet unmounts them)."""
        shutil.rmtree(self.memory_dir(run), ignore_errors=True)

    def close(self) -> None:
        """The node stopped every pod (``yard down``): its directory in memory goes if nothing is left in it."""
        if self._memory_root is not None:
            with contextlib.suppress(OSError):
                self._memory_root.rmdir()
                self._memory_root.parent.rmdir()  # the last node's to go

    async def prune(self, pods: Informer) -> None:
        """Once the node's ``pods`` are listed, remove the memory-backed volumes of pods not among
        them: those of pods that went while no agent ran."""
        await pods.synced.wait()
        uids = {(p.get("metadata") or {}).get("uid") or "" for p in pods.items()}
        with contextlib.suppress(FileNotFoundError):
            for entry in self._memory().iterdir():
                if entry.name.rpartition("_")[2] not in uids:
                    shutil.rmtree(entry, ignore_errors=True)

    def materialize(self, run: PodRun, pod: Obj) -> str | None:
        pod_dir = self.layout.pod_dir(run.namespace, run.name, run.uid)
        try:
            declared = (pod.get("spec") or {}).get("volumes") or []
            node = self._downward()
            memory = self.memory_dir(run)
            run.volumes = {
                v["name"]: volumes.materialize(pod_dir, v, run.sources, pod, node, memory=memory) for v in declared
            }
            run.read_only = volumes.read_only(declared)
        except volumes.ConfigError as exc:
            return str(exc)
        except OSError as exc:
            return f"volume setup failed: {exc}"
        return None

    def placement(self, run: PodRun, container: Obj) -> Obj:
        """Where a container's process starts, for the shim: ``cwd``, ``mounts``, and ``workDir``, the
        pod's default working directory, which the shim makes (on a slow disk, making a directory
        costs as much CPU as the rest of starting the container)."""
        mounts, cwd = self.mount_spec(run, container)
        return {"cwd": str(cwd), "mounts": mounts, "workDir": str(self._default_dir(run))}

    def logging(self, run: PodRun, container: str) -> Obj:
        """The shim's log settings for a run of ``container``: its file, and when to rotate it."""
        path = self.layout.container_log(run.namespace, run.name, run.uid, container)
        return {"log": str(path), "logMaxSize": self.rotation.max_size, "logMaxFiles": self.rotation.max_files}

    def retire_log(self, run: PodRun, container: str) -> None:
        """A finished run's log becomes the one ``kubectl logs --previous`` reads (its rotated files go)."""
        current = self.layout.container_log(run.namespace, run.name, run.uid, container)
        logs.retire(current, self.layout.container_log(run.namespace, run.name, run.uid, container, previous=True))

    def mount_spec(self, run: PodRun, container: Obj) -> tuple[Obj | None, Path]:
        """The mount namespace (``mountns.enter``'s spec) the container needs, if any, and its host cwd.

        Every container gets one where the node gives pods their DNS files (``dns``); otherwise
        only a container with ``volumeMounts`` does.
        """
        etc = self._etc_files(run, container)
        if not container.get("volumeMounts") and not etc:
            return None, self._working_dir(run, container)
        default = self._default_dir(run)
        wanted = container.get("workingDir") or ""
        cwd = wanted if wanted and volumes.under_mount(wanted, container) else str(self._working_dir(run, container))
        spec = {
            "root": str(self.layout.pod_dir(run.namespace, run.name, run.uid) / "root" / container["name"]),
            "cwd": cwd,
            "mounts": [*etc, *volumes.mounts(container, run.volumes, run.read_only)],
        }
        return spec, default

    def _etc_files(self, run: PodRun, container: Obj) -> list[Obj]:
        """The pod's resolv.conf and hosts (``dnsconfig``), written into its directory, as mounts over ``/etc``'s.

        A container that mounts a volume at either path keeps its own, as with the kubelet.
        """
        if self.dns is None or not run.pod:
            return []
        taken = {m.get("mountPath", "").rstrip("/") for m in container.get("volumeMounts") or []}
        pod_dir = self.layout.pod_dir(run.namespace, run.name, run.uid)
        files = {
            "/etc/resolv.conf": (pod_dir / "resolv.conf", dnsconfig.resolver(run.pod, self.dns).text()),
            "/etc/hosts": (pod_dir / "etc-hosts", dnsconfig.hosts(run.pod, self.dns, self.address)),
        }
        out: list[Obj] = []
        for target, (path, text) in files.items():
            if target in taken:
                continue
            if not path.exists() or path.read_text() != text:
                path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
                _write_owner_only(path, text)
            out.append({"path": target, "source": str(path), "readOnly": False})
        return out

    def joining_spec(self, run: PodRun, container: Obj, cr: ContainerRun) -> tuple[Obj | None, Path]:
        """``mount_spec`` for a process joining the running container ``cr`` (exec, exec probe): its own namespace.

        Only that namespace holds what the container wrote outside its volumes (``mountns``' tmpfs covers).
        """
        mounts, cwd = self.mount_spec(run, container)
        if mounts is not None and cr.process is not None and cr.process.exit is None and cr.process.pid:
            mounts["join"] = {"pid": cr.process.pid, "start": cr.process.state.get("procStart")}
        return mounts, cwd

    def _default_dir(self, run: PodRun) -> Path:
        return self.layout.pod_dir(run.namespace, run.name, run.uid) / "work"

    def _working_dir(self, run: PodRun, container: Obj) -> Path:
        wanted: str | None = container.get("workingDir")
        if not wanted:
            return self._default_dir(run)  # made by the shim when the container first starts
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
        if container.get("workingDir") and not cwd.is_dir():
            return (
                f"workingDir {container.get('workingDir')} is {cwd} on this node, which does not exist; an image's "
                "/workspace is the plane's workspace (yard up --workspace DIR)"
            )
        return None

    def exec_target(self, runs: dict[str, PodRun], runtime: ShimRuntime, request: podexec.Request) -> podexec.Target:
        """Where an exec request runs: a running container of the one pod among ``runs`` (by uid) its host names.

        Raises ``podexec.Refused`` when no pod, several pods, or no running container fit: in ssh's words
        for a host name, in the kubelet's for a pod named by the API server.
        """
        cgroup_root = runtime.cgroup_root
        by_uid = {uid: run for uid, run in runs.items() if run.pod}
        named = podexec.select(request, (run.pod for run in by_uid.values()))
        if not named:
            raise podexec.Refused(podexec.not_found(request))
        if len(named) > 1:
            pods = ", ".join(sorted(f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in named))
            raise podexec.Refused(f"ssh: {request.host} names several pods ({pods}): add <subdomain>.<namespace>")
        pod = named[0]
        run = by_uid[pod["metadata"]["uid"]]
        key = f"{run.namespace}/{run.name}"
        name = request.container or podexec.default_container(pod)
        found = [(c, cr) for c, cr in zip(pod["spec"]["containers"], run.containers, strict=False) if c["name"] == name]
        running = bool(found) and not (
            run.stopping or found[0][1].process is None or found[0][1].process.exit is not None
        )
        if request.pod is not None and not (running and found[0][1].exit_code is None):
            # The kubelet looks among running containers only: a stopped one is as absent.
            raise podexec.Refused(f'container not found ("{name}")')
        if not found:
            raise podexec.Refused(f"ssh: {request.host}: pod {key} has no container {name!r}")
        container, cr = found[0]
        if not running or cr.exit_code is not None:
            raise podexec.Refused(f"ssh: {request.host}: pod {key} is not running (container {name!r} is not)")
        try:
            env = cr.env or self.exec_environment(run, pod, container)
        except OSError as exc:
            raise podexec.Refused(f"ssh: {request.host}: pod {key}: {exc}") from exc
        mounts, cwd = self.joining_spec(run, container, cr)
        return podexec.Target(
            pod=key,
            hostname=podexec.pod_hostname(pod),
            env=env,
            cwd=str(cwd),
            mounts=mounts,
            cgroup=str(cgroup_root / f"{run.uid}_{cr.name}") if cgroup_root else None,
            sessions=run.exec_sessions,
        )


def _write_owner_only(path: Path, text: str) -> None:
    """``text`` into ``path``, readable by the plane's user only (everything under its home is)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
