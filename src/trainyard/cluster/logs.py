"""Container logs in the CRI file format, written by the node agent and served by the API server.

Each line is ``<RFC3339Nano time> <stream> <F|P> <text>`` (``P`` marks a partial line that
continues in the next record), which is what lets ``kubectl logs --timestamps`` and ``--since``
work without the training process doing anything special.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


class LogWriter:
    def __init__(self, path: Path, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("ab", buffering=0)
        self._clock = clock

    def write(self, stream: str, chunk: bytes) -> None:
        complete = chunk.endswith(b"\n")
        text = chunk[:-1] if complete else chunk
        self._file.write(f"{_stamp(self._clock())} {stream} {'F' if complete else 'P'} ".encode() + text + b"\n")

    def close(self) -> None:
        self._file.close()


def _parse(record: bytes) -> tuple[str, bytes] | None:
    parts = record.rstrip(b"\n").split(b" ", 3)
    if len(parts) < 3:
        return None
    text = parts[3] if len(parts) == 4 else b""
    return parts[0].decode(), text + (b"\n" if parts[2] == b"F" else b"")


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


def read(
    path: Path,
    *,
    tail_lines: int | None = None,
    since: datetime | None = None,
    timestamps: bool = False,
    limit_bytes: int | None = None,
) -> tuple[bytes, int]:
    """The log as kubectl shows it, and the file offset the text ends at (for following)."""
    data = path.read_bytes() if path.exists() else b""
    offset = len(data)
    records = [p for p in (_parse(r) for r in data.splitlines()) if p is not None]
    records = [r for r in records if _since_ok(r[0], since)]
    if tail_lines is not None:
        records = records[-tail_lines:] if tail_lines > 0 else []
    out = b"".join(_render(stamp, text, timestamps) for stamp, text in records)
    if limit_bytes is not None:
        out = out[:limit_bytes]
    return out, offset


async def follow(
    path: Path, offset: int, *, timestamps: bool, finished: Callable[[], bool], poll: float = 0.1
) -> AsyncIterator[bytes]:
    """New log text after ``offset`` until ``finished()`` and the file has been drained."""
    # Imported here: each container's shim imports this module for LogWriter and must start fast.
    import asyncio

    pending = b""
    while True:
        done = finished()
        if path.exists():
            with path.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
            pending += chunk
            *complete, pending = pending.split(b"\n")
            for record in complete:
                parsed = _parse(record)
                if parsed is not None:
                    yield _render(parsed[0], parsed[1], timestamps)
        if done:
            return
        await asyncio.sleep(poll)
