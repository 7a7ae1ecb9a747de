"""Container log files (``cluster.logs``) on real files: rotation at the kubelet's
``containerLogMaxSize``/``containerLogMaxFiles``, what ``read`` and ``follow`` serve across
rotations, and a writer on a disk that fills up (a real tmpfs) losing output, never records.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from small_disk import fill, small_disk
from trainyard.cluster import logs
from trainyard.cluster.logs import LogWriter


def ticking() -> Callable[[], datetime]:
    """A clock that moves one millisecond per reading (records and rotations get distinct times)."""
    moments = iter(datetime(2025, 1, 1, tzinfo=UTC) + timedelta(milliseconds=i) for i in range(10**7))
    return lambda: next(moments)


def lines(start: int, stop: int) -> list[str]:
    return [f"line {i:05d}" for i in range(start, stop)]


def write(writer: LogWriter, numbers: range) -> None:
    for i in numbers:
        writer.write("stdout", f"line {i:05d}\n".encode())


def text(raw: bytes) -> list[str]:
    return raw.decode().splitlines()


def test_a_log_written_without_end_keeps_max_files_of_at_most_max_size(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    writer = LogWriter(path, ticking(), max_size=2000, max_files=3)
    write(writer, range(1000))  # about 50 KB of records
    writer.close()
    rotated = logs.rotated_files(path)
    assert len(rotated) == 2, rotated
    assert all(p.stat().st_size <= 2000 for p in [*rotated, path])
    # What is kept is the newest output, in order, every line once: the files follow one another.
    kept = [line for p in [*rotated, path] for line in text(logs.read(p)[0])]
    assert kept == lines(1000 - len(kept), 1000) and len(kept) > 60


def test_read_serves_the_current_file_and_tail_reaches_into_rotated_ones(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    writer = LogWriter(path, ticking(), max_size=1000, max_files=5)
    write(writer, range(60))
    writer.close()
    current = text(logs.read(path)[0])
    assert current and current[-1] == "line 00059" and len(current) < 30  # the current file only, as the kubelet
    wanted = len(current) + 5
    assert text(logs.read(path, tail_lines=wanted)[0]) == lines(60 - wanted, 60)
    assert text(logs.read(path, tail_lines=2)[0]) == lines(58, 60)
    assert logs.read(path, tail_lines=0)[0] == b""


def test_follow_reads_on_across_rotations_without_losing_or_repeating_a_line(tmp_path: Path) -> None:
    path = tmp_path / "c.log"
    writer = LogWriter(path, ticking(), max_size=1000, max_files=5)
    write(writer, range(10))
    _, start = logs.read(path)
    batches = iter([range(10, 40), range(40, 45), range(45, 110), range(110, 111)])  # 110 lines, 6 rotations

    def finished() -> bool:
        # The follower asks this before each read: write the next batch then, or say it is over.
        batch = next(batches, None)
        if batch is not None:
            write(writer, batch)
        return batch is None

    async def followed() -> list[str]:
        return [c.decode() async for c in logs.follow(path, start, timestamps=False, finished=finished, poll=0)]

    got = "".join(asyncio.run(followed())).splitlines()
    writer.close()
    assert len(logs.rotated_files(path)) == 4
    assert got == lines(10, 111)


def test_the_previous_runs_log_is_kept_and_its_rotated_files_go(tmp_path: Path) -> None:
    path, previous = tmp_path / "c.log", tmp_path / "c.previous.log"
    writer = LogWriter(path, ticking(), max_size=500, max_files=3)
    write(writer, range(100))
    writer.close()
    last = logs.read(path)[0]
    logs.retire(path, previous)
    assert logs.read(previous)[0] == last and not path.exists() and logs.rotated_files(path) == []


def test_a_full_disk_loses_output_not_records_and_says_so_once_there_is_room(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk", "64k") as disk:
        path = disk / "c.log"
        writer = LogWriter(path, ticking())
        write(writer, range(10))
        filler = fill(disk)
        write(writer, range(10, 400))  # about 8 KB: more than the file's last block can take
        kept = text(logs.read(path)[0])
        assert kept == lines(0, len(kept)) and 10 <= len(kept) < 400  # whole records only, none garbled
        assert path.read_bytes().endswith(b"\n")
        filler.unlink()
        write(writer, range(400, 402))
        writer.close()
        after = text(logs.read(path)[0])[len(kept) :]
        lost = (400 - len(kept)) * len("line 00000\n")
        assert after[0].startswith(f"trainyard: {lost} bytes of this container's output were not logged"), after
        assert f"No space left on device writing {path}" in after[0]
        assert after[1:] == lines(400, 402)
