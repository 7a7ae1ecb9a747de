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
def small_disk(where: Path, size: str) -> Iterator[Path]:
    """A ``size`` tmpfs mounted at ``where`` (made if missing), unmounted and removed afterwards."""
    where.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
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
