"""Files generated from the code (``deploy/``): which of them are stale, writing them, the command's answer.

The operator's manifests (``operator.manifests``) and the dashboard's (``dashboard.manifests``)
are both rendered as ``{relative path: content}`` and checked or written the same way, here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path


def stale(out: Path, wanted: Mapping[str, str], *, others: tuple[str, ...] = ()) -> list[str]:
    """Files of ``out`` that differ from ``wanted``, are missing, or are not generated; paths under
    ``others`` (folders another generator owns, ``dashboard/``) are left to it."""
    found = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} if out.is_dir() else set()
    found = {p for p in found if not p.startswith(others)} if others else found
    problems = [f"{p}: not generated (remove it)" for p in sorted(found - set(wanted))]
    for path, content in sorted(wanted.items()):
        file = out / path
        if not file.exists():
            problems.append(f"{path}: missing")
        elif file.read_text() != content:
            problems.append(f"{path}: differs from the generator's output")
    return problems


def write(out: Path, wanted: Mapping[str, str]) -> list[str]:
    """Write the files of ``wanted`` that differ; the paths written."""
    written = []
    for path, content in wanted.items():
        file = out / path
        if file.exists() and file.read_text() == content:
            continue
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text(content)
        written.append(path)
    return written


def regenerate(out: Path, wanted: Mapping[str, str], *, check: bool, command: str, others: tuple[str, ...] = ()) -> int:
    """``command``'s exit code: with ``check``, 1 (and what is stale, on stderr) when ``out`` is stale;
    else 0 once the stale files are written (each named)."""
    if check:
        problems = stale(out, wanted, others=others)
        for problem in problems:
            print(f"{out}/{problem}", file=sys.stderr)
        if problems:
            print(f"regenerate with: {command}", file=sys.stderr)
        return 1 if problems else 0
    for path in write(out, wanted):
        print(f"wrote {out / path}")
    return 0
