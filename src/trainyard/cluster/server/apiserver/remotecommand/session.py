"""A remote command session, whatever carries it: stdin in, stdout and stderr out, resize, one outcome.

A transport (``websocket`` here; SPDY/3.1 later) drives a ``Session``:

* ``await session.run(output)`` starts the command (or attaches) and returns its ``Outcome`` once
  it ended, having awaited ``output.stdout(data)`` / ``output.stderr(data)`` for everything it wrote
  (a slow client slows the command, as a full pipe does);
* meanwhile, as frames arrive: ``await session.write_stdin(data)``, ``session.close_stdin()`` (the
  client's stdin ended: v5's CLOSE signal, SPDY's stream half-close), ``session.resize(w, h)``;
* ``session.close()`` when the client went away before the end: the command is killed (exec) or
  left alone (attach), and ``run`` returns.

``Outcome.status()`` is the ``metav1.Status`` the error channel carries.

``ExecSession`` reaches the pod as kube-apiserver reaches the kubelet: through the node's exec socket
(``Layout.exec_socket``; ``node.podexec`` serves it), handing over the command's stdin, stdout and
stderr as descriptors: pipes, or with a TTY the slave of a pty whose master stays here (resizing is
``TIOCSWINSZ`` on it). ``AttachSession`` attaches to the container's main process: its output from
now on, read from its log as its shim writes it (whole lines: a prompt without a newline shows
once the line ends), and its stdin FIFO (``Layout.container_stdin``) when it has ``stdin: true``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import os
import socket
import struct
import termios
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from trainyard.api.meta import Obj
from trainyard.cluster import logs
from trainyard.cluster.server.apiserver.remotecommand import options as opts
from trainyard.cluster.server.apiserver.remotecommand.options import Options

# How long output is still read once the command exited (a process it left behind may hold the pipes).
DRAIN_SECONDS = 2.0
_FRAME = struct.Struct("!I")
_CHUNK = 65536


class Output(Protocol):
    """Where a session's output goes: the transport's stdout and stderr channels."""

    async def stdout(self, data: bytes) -> None: ...
    async def stderr(self, data: bytes) -> None: ...


@dataclass(frozen=True)
class Outcome:
    """How a session ended: the command's exit code, or why it could not run."""

    code: int | None = None
    error: str | None = None

    def status(self) -> Obj:
        if self.error is not None:
            return opts.failure(self.error)
        return opts.exit_status(self.code or 0)


class Session(Protocol):
    async def run(self, output: Output) -> Outcome: ...
    async def write_stdin(self, data: bytes) -> None: ...
    def close_stdin(self) -> None: ...
    def resize(self, width: int, height: int) -> None: ...
    def close(self) -> None: ...


async def outcome_unless(session: Session, running: asyncio.Task[Outcome], gone: asyncio.Task[None]) -> Outcome | None:
    """The outcome of ``running`` (``session.run``), or None once ``gone`` (the client's side) ended
    first: the session is then closed (an exec's command goes too) and awaited. A transport that broke
    mid-way (``ConnectionResetError`` from the output) is None too."""
    await asyncio.wait((running, gone), return_when=asyncio.FIRST_COMPLETED)
    if not running.done():
        session.close()
        with contextlib.suppress(Exception):
            await running
        return None
    try:
        return running.result()
    except ConnectionResetError:
        return None


# -- descriptors ---------------------------------------------------------------------------------------


async def _ready(fd: int, *, write: bool = False) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not done.done():
            done.set_result(None)

    (loop.add_writer if write else loop.add_reader)(fd, wake)
    try:
        await done
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fd)


async def read_fd(fd: int) -> bytes:
    """The next chunk from a non-blocking ``fd``; ``b""`` at its end (a pty master's EIO: no slave left)."""
    while True:
        try:
            return os.read(fd, _CHUNK)
        except BlockingIOError:
            await _ready(fd)
        except OSError as exc:
            if exc.errno == errno.EIO:
                return b""
            raise


async def write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            await _ready(fd, write=True)


def _close(fd: int | None) -> None:
    if fd is not None:
        with contextlib.suppress(OSError):
            os.close(fd)


def set_window(fd: int, width: int, height: int) -> None:
    """The terminal size of the pty ``fd`` (master or slave); its foreground process group gets SIGWINCH."""
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", max(height, 0), max(width, 0), 0, 0))


# -- exec ----------------------------------------------------------------------------------------------


class ExecSession:
    """``pods/exec``: ``options.command`` run in the pod ``namespace/name`` by its node's exec server."""

    def __init__(self, socket_path: Path, namespace: str, name: str, options: Options) -> None:
        self.socket_path = socket_path
        self.namespace, self.name = namespace, name
        self.options = options
        self._stdin: int | None = None
        self._master: int | None = None
        self._conn: socket.socket | None = None
        self._closed = asyncio.Event()
        self._made: tuple[list[int], list[int | None]] | None = None

    def _descriptors(self) -> tuple[list[int], list[int | None]]:
        """What the command gets (stdin, stdout, stderr), and our ends (stdin writer, stdout, stderr readers).

        Made once, by whichever comes first: ``run``, or stdin or a resize the transport read before it.
        """
        if self._made is None:
            self._made = self._make()
            self._stdin = self._made[1][0]
        return self._made

    def _make(self) -> tuple[list[int], list[int | None]]:
        o = self.options
        if o.tty:
            master, slave = os.openpty()
            os.set_blocking(master, False)
            self._master = master
            return [slave, slave, slave], [master if o.stdin else None, master, None]
        theirs: list[int] = []
        ours: list[int | None] = []
        for index, wanted in enumerate((o.stdin, o.stdout, o.stderr)):
            if not wanted:
                theirs.append(os.open(os.devnull, os.O_RDWR))
                ours.append(None)
                continue
            read, write = os.pipe()
            mine = write if index == 0 else read
            os.set_blocking(mine, False)
            theirs.append(read if index == 0 else write)
            ours.append(mine)
        return theirs, ours

    async def run(self, output: Output) -> Outcome:
        loop = asyncio.get_running_loop()
        if self._closed.is_set():
            return Outcome(error="the client went away")
        theirs, ours = self._descriptors()
        conn = self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.setblocking(False)
        pumps: list[asyncio.Task[None]] = []
        try:
            try:
                await loop.sock_connect(conn, str(self.socket_path))
                request = {
                    "pod": {"namespace": self.namespace, "name": self.name},
                    "container": self.options.container,
                    "argv": list(self.options.command),
                    "tty": self.options.tty,
                }
                body = json.dumps(request).encode()
                # One small frame into an empty socket buffer: it never blocks.
                socket.send_fds(conn, [_FRAME.pack(len(body)) + body], theirs)
            except OSError as exc:
                return Outcome(error=f"error dialing backend: the node's exec socket {self.socket_path}: {exc}")
            finally:
                for given in set(theirs):
                    _close(given)
            for mine, write in ((ours[1], output.stdout), (ours[2], output.stderr)):
                if mine is not None:
                    pumps.append(asyncio.create_task(_pump(mine, write)))
            reply = asyncio.create_task(_reply(conn))
            closed = asyncio.create_task(self._closed.wait())
            await asyncio.wait((reply, closed), return_when=asyncio.FIRST_COMPLETED)
            closed.cancel()
            if not reply.done():
                reply.cancel()
                return Outcome(error="the client went away")
            if pumps:
                await asyncio.wait(pumps, timeout=DRAIN_SECONDS)
            answer = reply.result()
            if "error" in answer:
                return Outcome(error=f"unable to upgrade connection: {answer['error']}")
            return Outcome(code=int(answer.get("exit", 0)))
        finally:
            for task in pumps:
                task.cancel()
            conn.close()
            for end in set(ours):
                _close(end)
            self._stdin = self._master = None

    async def write_stdin(self, data: bytes) -> None:
        if self._made is None:
            self._descriptors()
        if self._stdin is not None:
            with contextlib.suppress(BrokenPipeError, OSError):
                await write_fd(self._stdin, data)

    def close_stdin(self) -> None:
        if self._made is None:
            self._descriptors()
        # A terminal's input has no end of file to give: the user types Ctrl-D.
        if self._stdin is not None and self._master is None and self._made is not None:
            _close(self._stdin)
            self._stdin = self._made[1][0] = None  # closed once: not again when the session ends

    def resize(self, width: int, height: int) -> None:
        if self._made is None:
            self._descriptors()
        if self._master is not None:
            set_window(self._master, width, height)

    def close(self) -> None:
        # Closing the connection is what makes the node kill the command.
        self._closed.set()


async def _pump(fd: int, write: Callable[[bytes], Awaitable[None]]) -> None:
    # The client gone, or the descriptor unreadable: nothing more to copy (the outcome says the rest).
    with contextlib.suppress(ConnectionResetError, OSError):
        while data := await read_fd(fd):
            await write(data)


async def _reply(conn: socket.socket) -> Obj:
    """The exec server's one JSON line (``{"exit": N}`` or ``{"error": ...}``)."""
    loop = asyncio.get_running_loop()
    data = b""
    while b"\n" not in data:
        chunk = await loop.sock_recv(conn, 4096)
        if not chunk:
            return {"error": "the node closed the exec connection"}
        data += chunk
    answer = json.loads(data.split(b"\n", 1)[0])
    return answer if isinstance(answer, dict) else {"error": "malformed reply from the node"}


# -- attach --------------------------------------------------------------------------------------------


class AttachSession:
    """``pods/attach``: the container's output from now on (its log), and its stdin FIFO when it has one.

    ``finished`` says when the container has ended (read from the pod's status), which ends the session.
    """

    def __init__(self, log: Path, stdin: Path | None, options: Options, finished: Callable[[], bool]) -> None:
        self.log, self.stdin_path = log, stdin
        self.options = options
        self.finished = finished
        self._stdin: int | None = None
        self._closed = False

    async def run(self, output: Output) -> Outcome:
        if self.finished():
            # As the kubelet, which looks among running containers only.
            return Outcome(error=f'unable to upgrade connection: container not found ("{self.options.container}")')
        try:
            info = self.log.stat()
            start = logs.Position(info.st_ino, info.st_size)
        except FileNotFoundError:
            start = logs.Position(0, 0)
        records = logs.follow_records(self.log, start, finished=lambda: self._closed or self.finished())
        try:
            async for _, stream, text in records:
                if stream == "stderr":
                    if self.options.stderr:
                        await output.stderr(text)
                elif self.options.stdout:
                    await output.stdout(text)
        finally:
            await records.aclose()
            self.close_stdin()
        return Outcome(code=0)

    async def write_stdin(self, data: bytes) -> None:
        if not self.options.stdin or self.stdin_path is None:
            return
        if self._stdin is None:
            try:
                # The shim holds the FIFO open: a writer never blocks on opening it.
                self._stdin = os.open(self.stdin_path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                return
        with contextlib.suppress(OSError):
            await write_fd(self._stdin, data)

    def close_stdin(self) -> None:
        _close(self._stdin)
        self._stdin = None

    def resize(self, width: int, height: int) -> None:
        """No terminal: containers' main processes get none here (``tty: true`` is not honoured)."""

    def close(self) -> None:
        self._closed = True
