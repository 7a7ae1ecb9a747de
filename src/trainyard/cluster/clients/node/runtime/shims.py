"""The node agent's side of container supervision: start containers through shims, watch them, adopt them again.

``ShimRuntime.start`` hands a container's spec to the shim fork server (``runtime.shim``, started
on first use) and returns a ``Handle`` once the container's process exists. ``Handle.wait``
watches the shim through a pidfd registered with the event loop (no polling) and returns the
exit the shim recorded in its state file. ``ShimRuntime.adopt`` builds the same handle from a
state file alone, which is how a restarted agent takes over containers that kept running
while it was away, or learns how those that stopped meanwhile ended.

When a shim is gone without having recorded an exit, nothing more can be known: the container
is reported like the kubelet reports a container it cannot find, terminated with exit code 137
and reason ``ContainerStatusUnknown`` (``LOST_MESSAGE``), and its process group is killed if
any of it is left.

``prepare_cgroups`` finds a delegated cgroup v2 hierarchy for memory and CPU limits;
``stop_all`` stops containers from state files alone (``yard down`` after the plane was killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import signal
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainyard.cluster.clients.node.runtime import shim

log = logging.getLogger(__name__)

Obj = dict[str, Any]
LOST_REASON = "ContainerStatusUnknown"
LOST_MESSAGE = (
    "The container could not be located when the node agent looked for it (its supervisor ended without "
    "recording an exit status). The container used to be Running"
)
# A shim reports that its container started within milliseconds; this is only against a wedged machine.
START_TIMEOUT = 30.0
# Without pidfd_open (kernels before 5.3), how often a shim's liveness is checked.
POLL_SECONDS = 0.5
_SRC = Path(__file__).resolve().parents[5]  # the directory that holds the trainyard package


class ShimError(RuntimeError):
    """A container could not be handed to a shim at all."""


@dataclass(frozen=True)
class Exit:
    """How a container run ended, as its shim recorded it (or as ``LOST_REASON`` says when it could not)."""

    exit_code: int
    reason: str
    finished_at: float
    message: str | None = None
    signal: int | None = None
    oom: Obj | None = None


def _exit_of(state: Obj) -> Exit | None:
    info = state.get("exit")
    if not isinstance(info, dict):
        return None
    return Exit(
        exit_code=int(info.get("exitCode", 137)),
        reason=str(info.get("reason") or "Error"),
        finished_at=float(info.get("finishedAt") or time.time()),
        message=info.get("message"),
        signal=info.get("signal"),
        oom=info.get("oom"),
    )


class Handle:
    """One run of a container, started by this agent or adopted from its state file."""

    def __init__(self, state_path: Path, state: Obj) -> None:
        self.state_path = state_path
        self.state = state
        self.exit = _exit_of(state)
        self._waiter: asyncio.Task[Exit] | None = None

    @property
    def pid(self) -> int:
        return int(self.state.get("pid") or 0)

    @property
    def started_at(self) -> float:
        return float(self.state.get("startedAt") or time.time())

    @property
    def restart_count(self) -> int:
        return int(self.state.get("restartCount") or 0)

    def supervised(self) -> bool:
        """Whether this run's shim still runs."""
        pid = int(self.state.get("shimPid") or 0)
        return bool(pid) and shim.alive(pid, self.state.get("shimStart"))

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the container's process group, if the run is still supervised."""
        if self.exit is None and self.pid and self.supervised():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, sig)

    async def wait(self) -> Exit:
        if self.exit is not None:
            return self.exit
        if self._waiter is None:
            self._waiter = asyncio.ensure_future(self._watch())
        return await asyncio.shield(self._waiter)

    async def _watch(self) -> Exit:
        pid = int(self.state.get("shimPid") or 0)
        pidfd: int | None = None
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid) if pid else None
        try:
            # Checked after the pidfd is open, so that the pidfd is known to name this shim.
            if self.supervised() and _exit_of(shim.read_state(self.state_path) or {}) is None:
                if pidfd is not None:
                    await _readable(pidfd)
                else:
                    while self.supervised():  # noqa: ASYNC110 (no pidfd: nothing else tells when it exits)
                        await asyncio.sleep(POLL_SECONDS)
        finally:
            if pidfd is not None:
                os.close(pidfd)
        self.exit = self._final()
        return self.exit

    def _final(self) -> Exit:
        state = shim.read_state(self.state_path) or {}
        if state.get("key") == self.state.get("key") and (done := _exit_of(state)) is not None:
            self.state = state
            return done
        pid, ticks = self.pid, self.state.get("procStart")
        if pid and shim.alive(pid, ticks):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        return Exit(exit_code=137, reason=LOST_REASON, finished_at=time.time(), message=LOST_MESSAGE)


async def _readable(fd: int) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)


class ShimRuntime:
    """Starts shims through one fork server, restarted when it is gone."""

    def __init__(self, *, cgroup_root: Path | None = None) -> None:
        self.cgroup_root = cgroup_root
        self._server: asyncio.subprocess.Process | None = None
        self._requests: socket.socket | None = None
        self._notify: socket.socket | None = None
        self._waiting: dict[str, asyncio.Future[Obj]] = {}
        self._keys = itertools.count()
        self._lock = asyncio.Lock()

    async def start(self, spec: Obj) -> Handle:
        """Start the container ``spec`` describes; the handle carries a ``StartError`` exit if it could not run.

        ``spec``: ``container``, ``argv``, ``env``, ``cwd``, ``log``, ``state`` (paths), ``restartCount``,
        and optionally ``mounts`` (``mountns.enter``'s spec), ``workDir`` (a directory the container's
        process makes before it starts), ``memoryLimit`` (bytes), ``cpuMillis``, ``cgroup`` (a
        directory name under the cgroup root).
        """
        key = f"{os.getpid()}-{next(self._keys)}"
        body = {**spec, "key": key}
        if self.cgroup_root is not None and spec.get("cgroup"):
            body["cgroup"] = str(self.cgroup_root / spec["cgroup"])
        else:
            body.pop("cgroup", None)
        loop = asyncio.get_running_loop()
        started = self._waiting[key] = loop.create_future()
        try:
            await self._send(shim.frame(body))
            state = await asyncio.wait_for(started, START_TIMEOUT)
        except TimeoutError:
            state = shim.read_state(Path(spec["state"])) or {}
            if state.get("key") != key:
                raise ShimError(f"the container's shim did not start within {START_TIMEOUT:.0f}s") from None
        finally:
            self._waiting.pop(key, None)
        return Handle(Path(spec["state"]), state)

    def adopt(self, state_path: Path) -> Handle | None:
        """The run a state file describes (alive, ended, or lost), or None when there is none."""
        state = shim.read_state(state_path)
        return None if state is None or "shimPid" not in state else Handle(state_path, state)

    async def close(self) -> None:
        """Stop the fork server (shims and their containers keep running)."""
        if self._notify is not None:
            asyncio.get_running_loop().remove_reader(self._notify.fileno())
            self._notify.close()
            self._notify = None
        if self._requests is not None:
            self._requests.close()
            self._requests = None
        if self._server is not None:
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(self._server.wait(), timeout=5)
            if self._server.returncode is None:
                self._server.kill()
                await self._server.wait()
            self._server = None

    async def _send(self, data: bytes) -> None:
        loop = asyncio.get_running_loop()
        async with self._lock:
            for attempt in range(2):
                await self._ensure_server()
                assert self._requests is not None
                try:
                    await loop.sock_sendall(self._requests, data)
                    return
                except OSError as exc:
                    log.warning("the shim server is gone (%s); starting another", exc)
                    await self.close()
                    if attempt:
                        raise ShimError(f"cannot reach the shim server: {exc}") from exc

    async def _ensure_server(self) -> None:
        if self._server is not None and self._server.returncode is None:
            return
        await self.close()
        requests, server_requests = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        notify, server_notify = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        fds = (server_requests.fileno(), server_notify.fileno())
        # -I -S: no site-packages and no PYTHON* variables; the shim needs only the standard library and us.
        code = (
            f"import sys; sys.path.insert(0, {str(_SRC)!r}); "
            f"from trainyard.cluster.clients.node.runtime.shim import serve; serve{fds}"
        )
        try:
            self._server = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                "-c",
                code,
                pass_fds=fds,
                stdin=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        finally:
            server_requests.close()
            server_notify.close()
        requests.setblocking(False)
        notify.setblocking(False)
        self._requests, self._notify = requests, notify
        asyncio.get_running_loop().add_reader(notify.fileno(), self._on_notify)

    def _on_notify(self) -> None:
        assert self._notify is not None
        while True:
            try:
                data = self._notify.recv(1 << 20)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            try:
                message = json.loads(data)
            except ValueError:
                continue
            waiter = self._waiting.get(str(message.get("key")))
            if waiter is not None and not waiter.done():
                waiter.set_result(message.get("state") or {})


CGROUP_ENV = "TRAINYARD_CGROUP"


def prepare_cgroups() -> Path | None:
    """A cgroup v2 directory where each limited container gets a cgroup of its own, or None.

    Used only where writing there is sanctioned: ``$TRAINYARD_CGROUP`` names such a directory, or
    this process's own cgroup is delegated to it (systemd marks those with a ``delegate`` extended
    attribute, as under ``systemd-run --user -p Delegate=yes``). Controllers can be enabled for
    child cgroups only while no process sits in the parent, so in a delegated cgroup this process
    first moves itself into a leaf ``trainyard-plane``.
    """
    base = Path("/sys/fs/cgroup")
    if not (base / "cgroup.controllers").exists():
        return None
    try:
        if explicit := os.environ.get(CGROUP_ENV):
            pods = Path(explicit)
            pods.mkdir(exist_ok=True)
        else:
            lines = Path("/proc/self/cgroup").read_text().splitlines()
            own = base / next(line[3:] for line in lines if line.startswith("0::")).lstrip("/")
            if own == base or not _delegated(own):
                return None
            leaf = own / "trainyard-plane"
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            (own / "cgroup.subtree_control").write_text(_enable(own))
            pods = own / "trainyard-pods"
            pods.mkdir(exist_ok=True)
        enable = _enable(pods)
        if "+memory" not in enable:
            return None
        (pods / "cgroup.subtree_control").write_text(enable)
    except (OSError, StopIteration) as exc:
        log.info("no usable cgroup v2 hierarchy (%s): memory limits are enforced by polling, CPU limits not", exc)
        return None
    log.info("containers with resource limits get cgroups under %s", pods)
    return pods


def _enable(path: Path) -> str:
    available = set((path / "cgroup.controllers").read_text().split())
    return " ".join(f"+{name}" for name in ("cpu", "memory") if name in available)


def _delegated(path: Path) -> bool:
    for name in ("trusted.delegate", "user.delegate"):
        with contextlib.suppress(OSError):
            if os.getxattr(path, name) == b"1":
                return True
    return False


def live_runs(pods_dir: Path) -> list[Handle]:
    """Every container run under ``pods_dir`` (``$TRAINYARD_HOME/pods``) whose shim still runs."""
    runs = []
    for path in pods_dir.glob("*/state/*.json"):
        state = shim.read_state(path)
        if state is not None and "shimPid" in state:
            handle = Handle(path, state)
            if handle.exit is None and handle.supervised():
                runs.append(handle)
    return runs


def stop_all(pods_dir: Path, grace: float) -> int:
    """Stop every container still running under ``pods_dir`` (SIGTERM, then SIGKILL after ``grace``); how many."""
    runs = live_runs(pods_dir)
    for run in runs:
        run.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while any(run.supervised() for run in runs) and time.monotonic() < deadline:
        time.sleep(0.1)
    for run in runs:
        run.signal(signal.SIGKILL)
    deadline = time.monotonic() + shim.DRAIN_SECONDS + 1
    while any(run.supervised() for run in runs) and time.monotonic() < deadline:
        time.sleep(0.1)
    return len(runs)
