"""The per-container supervisor (what containerd-shim or conmon are to a kubelet), and the fork server that starts it.

One shim runs per container run, as a process of its own in its own session, so the container
outlives the control plane: nothing connects it to the node agent but files. The shim

* starts the container's command in a new session and process group (entering the pod's mount
  namespace and cgroup first when asked), with stdin from ``/dev/null``, or, for a container with
  ``stdin: true``, from a FIFO (``spec["stdin"]``) it holds open for reading and writing, so that
  ``pods/attach`` writers come and go and the container never reads an end of file;
* writes the container's stdout and stderr to its CRI-format log file (``logs.LogWriter``), rotated
  as the kubelet rotates it, and losing output (never the container) while the disk is full;
* records in a state file (``<pod dir>/state/<container>.json``, replaced atomically) its own pid,
  the container's pid and process group, their start times, and at the end the real exit status:
  code, signal, reason (``Completed``, ``Error``, ``OOMKilled``, ``StartError``), finish time;
* enforces ``resources.limits.memory`` by polling the resident memory of the container's processes
  every 100 ms when no cgroup enforces it, killing the group with SIGKILL over the limit;
* when the container's main process exits, kills what is left of its group (as a container
  runtime does when a container's first process dies), drains the pipes and exits.

Starting a Python interpreter costs tens of milliseconds, so shims are not started with ``exec``:
the node agent runs this module once as a fork server (``python -I -S -c ...serve(...)``), which
forks one shim per request (about a millisecond). The server imports only the standard library,
``logs`` and ``mountns``; it reads requests from a stream socket and exits when the agent's end
closes, leaving its shims running. Each shim tells the agent that its container started with one
datagram on an inherited socket, then closes it.

The agent side (starting, watching, re-adopting) is ``shims``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from trainyard.cluster.clients.node.runtime import mountns
from trainyard.cluster.logs import DEFAULT_MAX_FILES, LogWriter

Obj = dict[str, Any]  # not api.meta's: a shim runs in the container's own interpreter, which has no pydantic

# How often the resident memory of a container's processes is compared with its limit.
MEMORY_POLL_SECONDS = 0.1
# How long a shim keeps reading a finished container's pipes (a process that left its group may hold them).
DRAIN_SECONDS = 2.0
# The kubelet splits longer lines into partial (P) records of this size.
MAX_LOG_LINE = 16 * 1024
# Exit code of a container whose command could not be started (as containerd reports it).
START_ERROR_CODE = 128
_FRAME = struct.Struct("!I")
_PAGE = os.sysconf("SC_PAGE_SIZE")


# -- state files, shared with the agent ----------------------------------------------------------


def write_state(path: Path, state: Obj) -> None:
    """Replace the state file atomically, so a reader never sees half of it.

    On a full disk (no room for a new file) the existing one is overwritten in place instead: its
    block is already there, and a container's real exit is worth the moment a reader could see
    half of it (read as no state).
    """
    data = json.dumps(state).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            _write_all(fd, data)
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not path.exists():
            raise
        fd = os.open(path, os.O_WRONLY)
        try:
            _write_all(fd, data)
            os.ftruncate(fd, len(data))
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_state(path: Path) -> Obj | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def proc_stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].decode().split()


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot): with the pid, a process's identity."""
    fields = proc_stat(pid)
    return int(fields[19]) if fields else None


def alive(pid: int, ticks: int | None) -> bool:
    """Whether the process that started at ``ticks`` as ``pid`` still runs (a zombie does not)."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X") and (ticks is None or int(fields[19]) == ticks)


# -- the fork server -------------------------------------------------------------------------------


def serve(requests_fd: int, notify_fd: int) -> None:
    """Fork one shim per request read from ``requests_fd`` until the agent closes its end."""
    requests = socket.socket(fileno=requests_fd)
    notify = socket.socket(fileno=notify_fd)
    # Shims are reaped by the kernel: nobody here waits for them, and they outlive this server.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while True:
        spec = _read_frame(requests)
        if spec is None:
            return
        try:
            child = os.fork()
        except OSError as exc:
            _notify(notify, spec, _failed(f"cannot start the container's shim: {exc}"), close=False)
            continue
        if child == 0:
            code = 1
            try:
                requests.close()
                code = _shim(spec, notify)
            except BaseException as exc:
                # Unless it already did, the agent hears why this container never started.
                _notify(notify, spec, _failed(f"the container's shim failed: {exc!r}"))
            finally:
                os._exit(code)


def _why(exc: OSError) -> str:
    """An OS error in words, and what to do when it is a full disk."""
    why = exc.strerror or str(exc)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        why += "; free space on the disk that holds the plane's home ($TRAINYARD_HOME)"
    return why


def _failed(message: str) -> Obj:
    ended = {"exitCode": START_ERROR_CODE, "reason": "StartError", "message": message, "finishedAt": time.time()}
    return {"exit": ended}


def _read_frame(sock: socket.socket) -> Obj | None:
    head = _read_exact(sock, _FRAME.size)
    if head is None:
        return None
    body = _read_exact(sock, _FRAME.unpack(head)[0])
    if body is None:
        return None
    spec: Obj = json.loads(body)
    return spec


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def frame(spec: Obj) -> bytes:
    body = json.dumps(spec).encode()
    return _FRAME.pack(len(body)) + body


# -- one shim ----------------------------------------------------------------------------------------


class _Logs:
    """Splits a container's output into CRI log records, stream by stream."""

    def __init__(self, writer: LogWriter) -> None:
        self.writer = writer
        self.pending: dict[str, bytearray] = {"stdout": bytearray(), "stderr": bytearray()}

    def feed(self, stream: str, data: bytes) -> None:
        buf = self.pending[stream]
        buf += data
        start = 0
        while (end := buf.find(b"\n", start)) >= 0:
            while end + 1 - start > MAX_LOG_LINE:
                self.writer.write(stream, bytes(buf[start : start + MAX_LOG_LINE]))
                start += MAX_LOG_LINE
            self.writer.write(stream, bytes(buf[start : end + 1]))
            start = end + 1
        del buf[:start]
        while len(buf) >= MAX_LOG_LINE:
            self.writer.write(stream, bytes(buf[:MAX_LOG_LINE]))
            del buf[:MAX_LOG_LINE]

    def close(self) -> None:
        for stream, buf in self.pending.items():
            if buf:
                self.writer.write(stream, bytes(buf))
        self.writer.close()


def _shim(spec: Obj, notify: socket.socket) -> int:
    os.setsid()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        # Asked to stop, the shim passes it on to the container: `kill <shim>` stops the container gracefully.
        signal.signal(sig, _forward)
    signal.signal(signal.SIGCHLD, _wake)
    cgroup = Path(spec["cgroup"]) if spec.get("cgroup") else None
    if cgroup is not None:
        cgroup = _cgroup_setup(cgroup, spec)
    if spec.get("stdin"):
        _make_fifo(Path(spec["stdin"]))
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    fail_r, fail_w = os.pipe()
    # Before the fork: a container that exits at once must still wake the select below.
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    started = time.time()
    # The container starts first; the shim's own bookkeeping happens while it execs.
    pid = os.fork()
    if pid == 0:
        _child(spec, out_w, err_w, fail_w, cgroup)
    global _GROUP
    _GROUP = pid
    for fd in (out_w, err_w, fail_w):
        os.close(fd)
    try:
        state_path = Path(spec["state"])
        state_path.parent.mkdir(parents=True, exist_ok=True)
        writer = LogWriter(
            Path(spec["log"]), max_size=spec.get("logMaxSize"), max_files=spec.get("logMaxFiles") or DEFAULT_MAX_FILES
        )
        log = _Logs(writer)
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        if not isinstance(exc, OSError):
            raise
        os.waitpid(pid, 0)
        _notify(notify, spec, _failed(f"cannot create the container's log or state {exc.filename}: {_why(exc)}"))
        return 0
    state: Obj = {
        "key": spec.get("key"),
        "container": spec.get("container"),
        "restartCount": spec.get("restartCount", 0),
        "shimPid": os.getpid(),
        "shimStart": start_ticks(os.getpid()),
        "startedAt": started,
    }
    failure = _read_all(fail_r)
    state |= {"pid": pid, "pgid": pid, "procStart": start_ticks(pid)}
    if failure:
        os.waitpid(pid, 0)
        for fd in (out_r, err_r):
            os.close(fd)
        log.close()
        state["exit"] = {
            "exitCode": START_ERROR_CODE,
            "reason": "StartError",
            "message": failure.decode(errors="replace"),
            "finishedAt": time.time(),
        }
        write_state(state_path, state)
        _notify(notify, spec, state)
        return 0
    write_state(state_path, state)
    _notify(notify, spec, state)
    status, oom = _supervise(pid, out_r, err_r, wake_r, log, spec.get("memoryLimit"), cgroup)
    state["exit"] = _exit_info(status, oom, cgroup)
    if cgroup is not None:
        _cgroup_remove(cgroup)
    write_state(state_path, state)
    return 0


_GROUP = 0


def _make_fifo(path: Path) -> None:
    """The container's stdin FIFO, owner-only; one left by an earlier run of the container is kept.

    A failure here is the child's to report: opening the FIFO fails, and the container a StartError.
    """
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path, 0o600)


def _forward(sig: int, _frame: object) -> None:
    if _GROUP:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(_GROUP, sig)


def _wake(_sig: int, _frame: object) -> None:
    """SIGCHLD's handler: the wakeup fd (set in ``_supervise``) is what ends the select."""


def _notify(notify: socket.socket, spec: Obj, state: Obj, *, close: bool = True) -> None:
    # The agent may be gone (killed, restarted): then nobody needs to know, the state file says it all.
    with contextlib.suppress(OSError):
        notify.send(json.dumps({"key": spec.get("key"), "state": state}).encode())
    if close:
        notify.close()


def _read_all(fd: int) -> bytes:
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
    os.close(fd)
    return data


def _child(spec: Obj, out_w: int, err_w: int, fail_w: int, cgroup: Path | None) -> None:
    """In the forked child: become the container's process, or report why not on ``fail_w`` and exit."""
    argv: list[str] = spec["argv"]
    try:
        os.setsid()
        if spec.get("workDir"):  # before the container's umask: the plane's home stays owner-only
            try:
                Path(spec["workDir"]).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                os.write(fail_w, f"cannot make the pod's working directory {spec['workDir']}: {_why(exc)}".encode())
                os._exit(START_ERROR_CODE)
        # What Python ignores or handles here would be inherited by the container (as subprocess restores).
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.set_wakeup_fd(-1)
        # The plane keeps its home private (umask 077); a container gets a container runtime's umask.
        os.umask(0o022)
        null = os.open(spec["stdin"], os.O_RDWR) if spec.get("stdin") else os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text("0")
        if spec.get("mounts"):
            try:
                mountns.enter(spec["mounts"])
            except OSError as exc:
                # The container "runs" and fails: its log says why, as before the shim existed.
                os.write(2, f"trainyard: cannot start the container with its volume mounts: {exc}\n".encode())
                os._exit(START_ERROR_CODE)
        else:
            try:
                os.chdir(spec["cwd"])
            except OSError as exc:
                os.write(fail_w, f"chdir {spec['cwd']}: {exc.strerror or exc}".encode())
                os._exit(START_ERROR_CODE)
        try:
            os.execvpe(argv[0], argv, spec["env"])
        except OSError as exc:
            os.write(fail_w, f"{argv[0]}: {exc.strerror or exc}".encode())
    except BaseException as exc:  # nothing may escape into the shim's own code in this process
        with contextlib.suppress(OSError):
            os.write(fail_w, f"{argv[0] if argv else '<no command>'}: {exc}".encode())
    os._exit(START_ERROR_CODE)


def _supervise(
    pid: int, out_r: int, err_r: int, wake_r: int, log: _Logs, memory_limit: int | None, cgroup: Path | None
) -> tuple[int, Obj | None]:
    """Copy output to the log until ``pid`` exits; its wait status, and what an OOM kill saw (or None)."""
    sel = selectors.DefaultSelector()
    sel.register(out_r, selectors.EVENT_READ, "stdout")
    sel.register(err_r, selectors.EVENT_READ, "stderr")
    sel.register(wake_r, selectors.EVENT_READ, None)
    # A cgroup's memory.max enforces the limit in the kernel; otherwise this process does.
    polled = memory_limit if memory_limit and cgroup is None else None
    oom: Obj | None = None
    status: int | None = None
    next_poll = time.monotonic() + MEMORY_POLL_SECONDS
    while status is None:
        timeout = max(0.0, next_poll - time.monotonic()) if polled else None
        for key, _ in sel.select(timeout):
            if key.data is None:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
            else:
                _pump(sel, key.fd, key.data, log)
        done, wait_status = os.waitpid(pid, os.WNOHANG)
        if done:
            status = wait_status
        elif polled and time.monotonic() >= next_poll:
            next_poll = time.monotonic() + MEMORY_POLL_SECONDS
            used = _group_memory(pid, polled)
            if used > polled:
                oom = {"used": used, "limit": polled}
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
    # The container's first process is gone: so is the container (as when a pid namespace's init dies).
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if cgroup is not None:
        with contextlib.suppress(OSError):
            (cgroup / "cgroup.kill").write_text("1")
    sel.unregister(wake_r)
    deadline = time.monotonic() + DRAIN_SECONDS
    while len(sel.get_map()) and (left := deadline - time.monotonic()) > 0:
        for key, _ in sel.select(left):
            _pump(sel, key.fd, key.data, log)
    for key in list(sel.get_map().values()):
        sel.unregister(key.fd)
        os.close(key.fd)
    log.close()
    return status, oom


def _pump(sel: selectors.BaseSelector, fd: int, stream: str, log: _Logs) -> None:
    data = os.read(fd, 65536)
    if data:
        log.feed(stream, data)
    else:
        sel.unregister(fd)
        os.close(fd)


def _group_memory(session: int, limit: int) -> int:
    """Resident memory of every process in the container's session; proportional (PSS) once over ``limit``.

    Summed RSS counts pages that forked workers share once per process, so a sum over the limit is
    checked again with each process's proportional share before anything is killed.
    """
    members: list[int] = []
    rss = 0
    for entry in os.listdir("/proc"):  # noqa: PTH208 (names only: a Path per process costs more than the scan)
        if not entry.isdigit():
            continue
        fields = proc_stat(int(entry))
        if fields is not None and fields[3] == str(session):
            members.append(int(entry))
            rss += int(fields[21]) * _PAGE
    if rss <= limit:
        return rss
    pss = 0
    for pid in members:
        try:
            with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
                for line in handle:
                    if line.startswith(b"Pss:"):
                        pss += int(line.split()[1]) * 1024
                        break
        except OSError:
            return rss
    return pss


def _exit_info(status: int, oom: Obj | None, cgroup: Path | None) -> Obj:
    signum = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    code = 128 + signum if signum is not None else os.waitstatus_to_exitcode(status)
    if oom is None and cgroup is not None and _cgroup_oom_kills(cgroup) and signum == signal.SIGKILL:
        oom = {"limit": _cgroup_limit(cgroup)}
    info: Obj = {"exitCode": code, "finishedAt": time.time()}
    if signum is not None:
        info["signal"] = signum
    if oom is not None:
        info |= {"reason": "OOMKilled", "oom": oom}
    else:
        info["reason"] = "Completed" if code == 0 else "Error"
    return info


# -- cgroup v2 (used only where the node agent found a writable, delegated hierarchy) ---------------


def _cgroup_setup(path: Path, spec: Obj) -> Path | None:
    try:
        path.mkdir(exist_ok=True)
        if spec.get("memoryLimit"):
            (path / "memory.max").write_text(str(spec["memoryLimit"]))
            with contextlib.suppress(OSError):
                (path / "memory.swap.max").write_text("0")
        if spec.get("cpuMillis"):
            period = 100_000
            quota = max(1000, spec["cpuMillis"] * period // 1000)
            (path / "cpu.max").write_text(f"{quota} {period}")
    except OSError as exc:
        print(f"trainyard shim: cgroup {path} unusable ({exc}); memory is polled instead", file=sys.stderr)
        return None
    return path


def _cgroup_oom_kills(path: Path) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in (path / "memory.events").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
    return 0


def _cgroup_limit(path: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int((path / "memory.max").read_text())
    return None


def _cgroup_remove(path: Path) -> None:
    for _ in range(50):
        try:
            path.rmdir()
            return
        except OSError:
            time.sleep(0.02)
