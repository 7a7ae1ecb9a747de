"""Puts a container's process in a private mount namespace with its volumes at their ``mountPath``.

The container's shim calls ``enter`` in the forked child just before it ``exec``s the command
(so it imports only the standard library): it unshares a mount namespace (with a user namespace
when not root), builds a root on a tmpfs from bind mounts of the host's top-level entries plus one
bind mount per ``volumeMount``, chroots into it and changes to the container's working
directory. The process id, group and signals stay those the shim started. Nothing is mounted on
the host, so a ``mountPath`` like ``/app`` never appears outside the pod. Run as a script
(``python mountns.py SPEC -- ARGV``) it does the same for any command.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), None), f"mount {target}")


def unshare(flags: int) -> None:
    """Leave the ``flags`` namespaces for new ones; as a non-root user, inside a user namespace mapping only us."""
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:
        _check(_libc.unshare(flags), "unshare")
        return
    _check(_libc.unshare(flags | CLONE_NEWUSER), "unshare")
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def _placeholder(target: Path, like_dir: bool) -> None:
    if like_dir:
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


def _inside(root: Path, path: str) -> Path:
    """``path`` as the container will see it, under ``root``: symlinks on the way (``/var/run`` → ``/run``)
    are followed inside ``root``, so that a mount lands where the chrooted process looks."""
    current, parts, hops = root, [p for p in path.split("/") if p not in ("", ".")], 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            current = current.parent if current != root else root
            continue
        candidate = current / part
        if candidate.is_symlink() and hops < 40:
            hops += 1
            link = str(candidate.readlink())
            parts = [p for p in link.split("/") if p not in ("", ".")] + parts
            if link.startswith("/"):
                current = root
            continue
        current = candidate
    return current


def enter(spec: dict[str, Any], *, also: int = 0) -> None:
    """Enter a new mount namespace laid out as ``spec`` says (``root``, ``cwd``, ``mounts``); OSError if impossible.

    ``also``: more namespaces to unshare at the same time (a user namespace owns them all when not root).
    """
    unshare(CLONE_NEWNS | also)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = Path(spec["root"])
    root.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(root), "tmpfs", 0)
    for source in Path("/").iterdir():
        target = root / source.name
        if source.is_symlink():
            target.symlink_to(source.readlink())
            continue
        _placeholder(target, source.is_dir())
        _mount(str(source), str(target), None, MS_BIND | MS_REC)
    for mount in spec["mounts"]:
        target = _inside(root, mount["path"])
        _placeholder(target, Path(mount["source"]).is_dir())
        _mount(mount["source"], str(target), None, MS_BIND | MS_REC)
        if mount.get("readOnly"):
            _mount(None, str(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC)
    os.chroot(root)
    os.chdir(spec["cwd"])


def main(argv: list[str]) -> None:
    enter(json.loads(argv[1]))
    command = argv[3:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except OSError as exc:
        print(f"trainyard: cannot start the container with its volume mounts: {exc}", file=sys.stderr)
        sys.exit(128)
