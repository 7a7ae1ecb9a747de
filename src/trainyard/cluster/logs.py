"""Container logs in the CRI file format, written by the node agent and served by the API server.

Each line is ``<RFC3339Nano time> <stream> <F|P> <text>`` (``P`` marks a partial line that
continues in the next record), which is what lets ``kubectl logs --timestamps`` and ``--since``
work without the training process doing anything special.

Rotation is the kubelet's ``containerLogMaxSize`` / ``containerLogMaxFiles``: once the next record
would take the current file past ``max_size``, it moves to ``<name>.<UTC time>`` and a new file
starts, and only the newest ``max_files - 1`` rotated files are kept. The writer itself rotates
(the kubelet checks every 10 s; here a container writing without end is capped at once), with a
hard link and an atomic replace, so a reader always finds a file at the log's path. As the
kubelet, ``read`` serves the current file; ``--tail`` reaches back into the rotated ones when the
current file holds fewer lines than asked for, and ``follow`` goes on into the next file of a
rotation, so ``kubectl logs -f`` misses nothing across one. Rotated files are not compressed.

A full disk loses output, never the container: a record that cannot be written whole is cut
back out of the file, and once writing works again a record on stderr says how much was lost
and why.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import BinaryIO

# The kubelet's defaults.
DEFAULT_MAX_SIZE = 10 * 1024 * 1024
DEFAULT_MAX_FILES = 5
# Rotated files are named by UTC time to the microsecond: the names sort as the files were made.
_ROTATED = "%Y%m%d-%H%M%S.%f"
# Where these come from linking, the file system has no hard links: rotation renames instead.
_NO_HARD_LINKS = (errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP, errno.EMLINK)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


def rotated_files(path: Path) -> list[Path]:
    """The rotated files of the log at ``path``, oldest first."""
    # Container names are DNS labels: nothing in them is a glob pattern.
    return sorted(path.parent.glob(f"{path.name}.*"))


def retire(path: Path, previous: Path) -> None:
    """A finished run's log becomes ``previous`` (``kubectl logs --previous``); its rotated files go,
    as no request can read them any more."""
    with contextlib.suppress(FileNotFoundError):
        path.replace(previous)
    for old in rotated_files(path):
        with contextlib.suppress(FileNotFoundError):
            old.unlink()


class LogWriter:
    """Appends one container run's records to its log, rotating it at ``max_size`` (None: never)."""

    def __init__(
        self,
        path: Path,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        *,
        max_size: int | None = None,
        max_files: int = DEFAULT_MAX_FILES,
    ) -> None:
        if max_files < 2:
            raise ValueError(f"max_files must be greater than 1, not {max_files}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._clock = clock
        self._max_size = max_size
        self._max_files = max_files
        self._fd = _open(path)
        self._size = os.fstat(self._fd).st_size
        self._lost = 0  # bytes of output not written since the last record that was
        self._why = ""

    def write(self, stream: str, chunk: bytes) -> None:
        complete = chunk.endswith(b"\n")
        record = self._record(stream, chunk[:-1] if complete else chunk, complete)
        if self._lost:
            # With the record that follows it, so that it is written once, when output is logged again.
            notice = f"trainyard: {self._lost} bytes of this container's output were not logged: {self._why}"
            record = self._record("stderr", notice.encode(), True) + record
        if self._append(record):
            self._lost = 0
        else:
            self._lost += len(chunk)

    def close(self) -> None:
        os.close(self._fd)

    def _record(self, stream: str, text: bytes, complete: bool) -> bytes:
        return f"{_stamp(self._clock())} {stream} {'F' if complete else 'P'} ".encode() + text + b"\n"

    def _append(self, record: bytes) -> bool:
        """Write ``record`` whole, or not at all (False, with the reason kept for the notice)."""
        written = 0
        try:
            if self._max_size is not None and self._size and self._size + len(record) > self._max_size:
                self._rotate()
            view = memoryview(record)
            while written < len(record):
                written += os.write(self._fd, view[written:])
        except OSError as exc:
            if written:  # a partial record would garble the next one: cut it back out
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
            self._why = f"{exc.strerror or exc} writing {self._path}"
            return False
        self._size += written
        return True

    def _rotate(self) -> None:
        rotated = self._path.with_name(f"{self._path.name}.{self._rotated_stamp()}")
        try:
            # The old file stays readable under its new name, and the path never goes missing.
            os.link(self._path, rotated)
        except OSError as exc:
            if exc.errno == errno.ENOENT:  # someone removed the log: nothing to keep, start it again
                fd = _open(self._path)
            elif exc.errno in _NO_HARD_LINKS:
                self._path.replace(rotated)  # the path is missing for a moment
                fd = _open(self._path)
            else:
                raise
        else:
            fresh = self._path.with_name(f".{self._path.name}.new")
            fd = -1
            try:
                fd = _open(fresh, truncate=True)
                fresh.replace(self._path)
            except OSError:
                # Not rotated after all (a full disk): the next record tries again.
                if fd >= 0:
                    os.close(fd)
                for leftover in (rotated, fresh):
                    with contextlib.suppress(OSError):
                        leftover.unlink()
                raise
        os.close(self._fd)
        self._fd, self._size = fd, 0
        for old in rotated_files(self._path)[: -(self._max_files - 1)]:
            with contextlib.suppress(FileNotFoundError):
                old.unlink()

    def _rotated_stamp(self) -> str:
        """The clock's time, or just after the newest rotated file's when the clock is not past it."""
        moment = self._clock().astimezone(UTC)
        existing = rotated_files(self._path)
        # A name that is not a time (not ours) says nothing about the order.
        with contextlib.suppress(IndexError, ValueError):
            newest = datetime.strptime(existing[-1].name[len(self._path.name) + 1 :], _ROTATED).replace(tzinfo=UTC)
            moment = max(moment, newest + timedelta(microseconds=1))
        return moment.strftime(_ROTATED)


def _open(path: Path, *, truncate: bool = False) -> int:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | (os.O_TRUNC if truncate else 0)
    return os.open(path, flags, 0o666)  # the process's umask decides, as for any log file


def _parse(record: bytes) -> tuple[str, bytes] | None:
    parts = record.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        return None
    text = parts[3] if len(parts) == 4 else b""
    return parts[0].decode(), text + (b"\n" if parts[2] == b"F" else b"")


def _stream(record: bytes) -> str:
    parts = record.split(b" ", 2)
    return parts[1].decode(errors="replace") if len(parts) > 1 else "stdout"


def _records(data: bytes) -> list[tuple[str, bytes]]:
    # Records end at "\n" only: a container's "\r" (a progress bar) is text.
    return [p for p in (_parse(r) for r in data.split(b"\n") if r) if p is not None]


def _since_ok(stamp: str, since: datetime | None) -> bool:
    if since is None:
        return True
    try:
        moment = datetime.strptime(stamp[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    except ValueError:
        return True
    return moment >= since


def _render(stamp: str, text: bytes, timestamps: bool) -> bytes:
    return (stamp.encode() + b" " + text) if timestamps else text


@dataclass(frozen=True)
class Position:
    """Where a reader is: which file (by inode, which a rotation does not change) and how far in."""

    inode: int
    offset: int


def read(
    path: Path,
    *,
    tail_lines: int | None = None,
    since: datetime | None = None,
    timestamps: bool = False,
    limit_bytes: int | None = None,
) -> tuple[bytes, Position]:
    """The log as kubectl shows it, and where the text ends (for ``follow``)."""
    try:
        with path.open("rb") as handle:
            data, inode = handle.read(), os.fstat(handle.fileno()).st_ino
    except FileNotFoundError:
        data, inode = b"", 0
    position = Position(inode, len(data))
    records = [r for r in _records(data) if _since_ok(r[0], since)]
    if tail_lines is not None:
        # The current file may have just started: earlier lines are in the rotated ones, newest last.
        for older in reversed(rotated_files(path)):
            if len(records) >= tail_lines:
                break
            with contextlib.suppress(FileNotFoundError):
                records = [r for r in _records(older.read_bytes()) if _since_ok(r[0], since)] + records
        records = records[-tail_lines:] if tail_lines > 0 else []
    out = b"".join(_render(stamp, text, timestamps) for stamp, text in records)
    if limit_bytes is not None:
        out = out[:limit_bytes]
    return out, position


def _inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except FileNotFoundError:
        return None


def _open_at(path: Path, position: Position) -> BinaryIO | None:
    """The file ``position`` is in, wherever a rotation moved it, at its offset (None: no log yet)."""
    for candidate in [path, *reversed(rotated_files(path))]:
        with contextlib.suppress(FileNotFoundError):
            handle = candidate.open("rb")
            if os.fstat(handle.fileno()).st_ino == position.inode:
                handle.seek(position.offset)
                return handle
            handle.close()
    # Gone (rotated out of reach, or never there): go on with the current file from its start.
    with contextlib.suppress(FileNotFoundError):
        return path.open("rb")
    return None


def _after(path: Path, inode: int) -> Path:
    """The file that came after the one with ``inode`` in the log's rotation."""
    chain = [*rotated_files(path), path]
    for index, candidate in enumerate(chain[:-1]):
        if _inode(candidate) == inode:
            return chain[index + 1]
    return path  # rotated out of reach, or retired as the previous run's: the current file is next


async def follow(
    path: Path, start: Position, *, timestamps: bool, finished: Callable[[], bool], poll: float = 0.1
) -> AsyncIterator[bytes]:
    """New log text after ``start`` until ``finished()`` and the file has been drained, across rotations."""
    async for stamp, _, text in follow_records(path, start, finished=finished, poll=poll):
        yield _render(stamp, text, timestamps)


async def follow_records(
    path: Path, start: Position, *, finished: Callable[[], bool], poll: float = 0.1
) -> AsyncGenerator[tuple[str, str, bytes], None]:
    """``follow``'s records as (timestamp, stream, text): what ``pods/attach`` splits into stdout and stderr."""
    # Imported here: each container's shim imports this module for LogWriter and must start fast.
    import asyncio

    pending = b""
    handle = _open_at(path, start)
    try:
        while True:
            done = finished()
            if handle is None:
                handle = _open_at(path, Position(0, 0))
                if handle is None:
                    if done:
                        return
                    await asyncio.sleep(poll)
                    continue
            info = os.fstat(handle.fileno())
            inode = info.st_ino
            if info.st_size < handle.tell():
                # The writer cut a record it could not finish (a full disk) back out: it is not one.
                handle.seek(min(info.st_size, handle.tell() - len(pending)))
                pending = b""
            # Asked before reading: once the path names another file, this one is complete.
            rotated = _inode(path) not in (inode, None)
            pending += handle.read()
            *complete, pending = pending.split(b"\n")
            for record in complete:
                parsed = _parse(record)
                if parsed is not None:
                    yield parsed[0], _stream(record), parsed[1]
            if rotated:
                handle.close()
                handle, pending = None, b""
                with contextlib.suppress(FileNotFoundError):
                    handle = _after(path, inode).open("rb")
                continue
            if done:
                return
            await asyncio.sleep(poll)
    finally:
        if handle is not None:
            handle.close()
