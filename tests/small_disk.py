"""A disk that really fills up: a small tmpfs mounted for the length of a test, and a file that takes
what is left of it.

Mounting needs root, which CI has (a fresh clone run as root); where it is refused the test fails
and says why, it is never skipped.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(where: Path, size: str, *, inodes: int | None = None) -> Iterator[Path]:
    """A ``size`` tmpfs mounted at ``where`` (made if missing), unmounted and removed afterwards;
    ``inodes``: how many files it holds at most (``fill_inodes`` takes the rest)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0700" + (f",nr_inodes={inodes}" if inodes else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.fail(
            f"cannot mount a {size} tmpfs at {where} to fill a disk: {mounted.stderr.strip() or mounted.returncode} "
            f"(this test needs root, uid {os.getuid()} here, as CI runs it)"
        )
    try:
        yield where
    finally:
        # Lazily, so a process still holding a file there (a container being stopped) cannot keep it mounted.
        subprocess.run(["umount", "--lazy", str(where)], check=True)
        where.rmdir()


def fill(disk: Path, name: str = "filler") -> Path:
    """A file that takes every free block of ``disk``: the next write there that needs one gets ENOSPC."""
    filler = disk / name
    with filler.open("ab", buffering=0) as handle:
        for size in (1 << 16, 512, 1):  # the smaller ones take what the last partial block leaves
            block = b"\0" * size
            while True:
                try:
                    handle.write(block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    return filler


def fill_inodes(disk: Path) -> None:
    """Empty files in ``disk`` until it holds no more (a ``small_disk`` with few ``inodes``): then no
    file or directory can be made there either, as on a full disk that has no block for one."""
    for i in range(1 << 16):
        try:
            (disk / f"inode-{i}").touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
            return
    raise AssertionError(f"{disk} took 65536 files: mount it with few inodes")
