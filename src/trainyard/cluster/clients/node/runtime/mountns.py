"""Puts a container's process in a private mount namespace with its volumes at their ``mountPath``.

The container's shim calls ``enter`` in the forked child just before it ``exec``s the command
(so it imports only the standard library): it unshares a mount namespace (with a user namespace
when not root), builds a root on a tmpfs from bind mounts of the host's top-level entries plus one
bind mount per ``volumeMount``, chroots into it and changes to the container's working
directory. The process id, group and signals stay those the shim started. Nothing is mounted on
the host, so a ``mountPath`` like ``/app`` never appears outside the pod.

Nothing is created on the host either. A ``mountPath`` is resolved inside that root (symlinks
too, as runc does); when a directory it needs is missing and its nearest existing ancestor is the
host's (``/etc`` for ``/etc/mpi``, ``/home`` for ``/home/mpiuser/.ssh``) or a read-only volume's,
that ancestor is covered, in this namespace only, by a tmpfs into which its entries are bind
mounted back, and the missing directories are made in the tmpfs. What the container writes beside
them (``/home/mpiuser/train.py``) lands in that tmpfs: it lives as long as the container's
namespace, as on a machine of its own. A missing directory inside a writable volume is made in
the volume, as the kubelet does.

A process joining a running container (``spec["join"]``: ``nsexec``, exec probes) enters that
container's namespaces instead of building new ones, so it sees the same files. Run as a script
(``python mountns.py SPEC -- ARGV``) it does the same for any command.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import posixpath
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
# What owns a mount point of the root being built: a directory there is made in a tmpfs of ours,
# in a volume (writable: the kubelet makes it there too) or, never, on the host.
TMPFS, VOLUME, HOST = "tmpfs", "volume", "host"
_MAX_SYMLINKS = 40
PROBE = "--probe"

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


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


def resolve(root: Path, path: str) -> tuple[Path, list[str]]:
    """``path`` inside ``root`` with its symlinks followed there (``/`` is ``root``): what exists, and the rest.

    The existing part has no symlink left, so mounting on it never escapes ``root``.
    """
    parts = [p for p in posixpath.normpath("/" + path).split("/") if p]
    current, hops = root, 0
    while parts:
        name = parts.pop(0)
        if name in ("", "."):
            continue
        if name == "..":
            current = current if current == root else current.parent
            continue
        candidate = current / name
        try:
            mode = os.lstat(candidate).st_mode
        except FileNotFoundError:
            missing = [name, *(p for p in parts if p not in ("", "."))]
            if ".." in missing:
                raise OSError(errno.ENOENT, f"{path}: a symlink on it points through a missing directory") from None
            return current, missing
        if not stat.S_ISLNK(mode):
            current = candidate
            continue
        hops += 1
        if hops > _MAX_SYMLINKS:
            raise OSError(errno.ELOOP, f"{path}: {os.strerror(errno.ELOOP)}")
        link = str(candidate.readlink())
        current = root if link.startswith("/") else current
        parts = link.split("/") + parts
    return current, []


class Root:
    """The root being built: which of its mount points are ours, a volume's or the host's."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.points: dict[Path, str] = {path: TMPFS}
        # Covered directories, with what owns the entries bound back into them.
        self.covered: dict[Path, str] = {}
        self.read_only: list[Path] = []

    def owner(self, path: Path) -> str:
        for candidate in (path, *path.parents):
            if candidate in self.points:
                return self.points[candidate]
            if candidate.parent in self.covered:
                return self.covered[candidate.parent]
        return HOST

    def bind(self, source: str, target: Path, kind: str) -> None:
        _mount(source, str(target), None, MS_BIND | MS_REC)
        self.points[target] = kind

    def writable(self, directory: Path) -> bool:
        """Whether a missing mount point may be made in ``directory`` (else it is covered first)."""
        kind = self.owner(directory)
        if kind == HOST:
            return False
        return kind == TMPFS or not os.statvfs(directory).f_flag & os.ST_RDONLY

    def cover(self, directory: Path) -> None:
        """Hide ``directory`` under a tmpfs holding bind mounts of its entries (symlinks copied), here only.

        Cheap enough for each container start (``/etc``: some 150 entries, about 5 ms): plain ``os`` calls.
        """
        kind, info = self.owner(directory), directory.stat()
        read_only = bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
        entries = [(e.name, e.is_symlink(), e.is_dir(follow_symlinks=False)) for e in os.scandir(directory)]
        old = os.open(directory, os.O_PATH | os.O_DIRECTORY)
        try:
            here = str(directory)
            _mount("tmpfs", here, "tmpfs", 0, f"mode={stat.S_IMODE(info.st_mode):o}")
            self.points[directory], self.covered[directory] = TMPFS, kind
            for name, is_link, is_dir in entries:
                target = f"{here}/{name}"
                try:
                    if is_link:
                        os.symlink(os.readlink(name, dir_fd=old), target)  # noqa: PTH211 (no Path per entry: speed)
                        continue
                    if is_dir:
                        os.mkdir(target)  # noqa: PTH102 (as above)
                    else:
                        os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
                    # A file has no mounts beneath it: only a directory needs a recursive bind.
                    _mount(f"/proc/self/fd/{old}/{name}", target, None, MS_BIND | (MS_REC if is_dir else 0))
                except OSError:
                    # Gone meanwhile, or not ours to see: the container could not use it either.
                    _discard(Path(target))
        finally:
            os.close(old)
        if read_only:
            self.read_only.append(directory)

    def mount_point(self, path: str, is_dir: bool) -> Path:
        """Where ``path`` is in this root, made (never on the host) if missing, like ``source`` (a dir or a file)."""
        current, missing = resolve(self.path, path)
        if not missing:
            return current
        if not self.writable(current):
            self.cover(current)
        # Made where ``current`` is (in a covering tmpfs, not among the host entries bound back there).
        self.points.setdefault(current / missing[0], self.owner(current))
        for i, name in enumerate(missing):
            current = current / name
            if is_dir or i < len(missing) - 1:
                current.mkdir(exist_ok=True)
            else:
                current.touch()
        return current

    def seal(self) -> None:
        """Make covers of read-only directories read-only again, now that mount points are made in them."""
        for directory in self.read_only:
            _mount(None, str(directory), None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _discard(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    except OSError:
        pass


def _placeholder(target: Path, like_dir: bool) -> None:
    if like_dir:
        target.mkdir(parents=True, exist_ok=True)
    elif not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()


def _start_ticks(pid: int) -> int | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(raw[raw.rindex(")") + 2 :].split()[19])


def _setns(path: str, nstype: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        _check(_libc.setns(fd, nstype), f"setns {path}")
    finally:
        os.close(fd)


def join(spec: dict[str, Any]) -> bool:
    """Enter the mount (and user) namespace of the running container ``spec["join"]`` names; False if it is gone.

    Must run single-threaded (``setns`` of a user namespace): the shim's child, ``nsexec``, the script.
    """
    target = spec.get("join") or {}
    pid = int(target.get("pid") or 0)
    if not pid or (target.get("start") is not None and _start_ticks(pid) != target["start"]):
        return False
    try:
        theirs = Path(f"/proc/{pid}/ns/mnt").stat()
        user = Path(f"/proc/{pid}/ns/user").stat()
    except OSError:
        return False
    if (theirs.st_dev, theirs.st_ino) == _ns_id("mnt"):
        return False  # not in a namespace of its own (yet): build one
    if (user.st_dev, user.st_ino) != _ns_id("user"):
        _setns(f"/proc/{pid}/ns/user", CLONE_NEWUSER)
    _setns(f"/proc/{pid}/ns/mnt", CLONE_NEWNS)
    return True


def _ns_id(kind: str) -> tuple[int, int]:
    info = Path(f"/proc/self/ns/{kind}").stat()
    return info.st_dev, info.st_ino


def enter(spec: dict[str, Any], *, also: int = 0) -> None:
    """Enter a new mount namespace laid out as ``spec`` says (``root``, ``cwd``, ``mounts``); OSError if impossible.

    With ``join`` (``{"pid", "start"}`` of the container's process) the container's own namespace
    is entered instead while that process runs, so files it wrote outside its volumes are seen.
    ``also``: more namespaces to unshare at the same time (a user namespace owns them all when not root).
    """
    if join(spec):
        if also:
            _check(_libc.unshare(also), "unshare")
        os.chroot(spec["root"])
        os.chdir(spec["cwd"])
        return
    unshare(CLONE_NEWNS | also)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    root = Root(Path(spec["root"]))
    # Under the plane's home, which only its owner may read (the pod's directory and this one too).
    root.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    root.path.mkdir(mode=0o700, exist_ok=True)
    _mount("tmpfs", str(root.path), "tmpfs", 0)
    for source in Path("/").iterdir():
        target = root.path / source.name
        if source.is_symlink():
            target.symlink_to(source.readlink())
            continue
        _placeholder(target, source.is_dir())
        root.bind(str(source), target, HOST)
    for mount in spec["mounts"]:
        target = root.mount_point(mount["path"], Path(mount["source"]).is_dir())
        root.bind(mount["source"], target, VOLUME)
        if mount.get("readOnly"):
            _mount(None, str(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_REC)
    root.seal()
    os.chroot(root.path)
    os.chdir(spec["cwd"])


def usable() -> bool:
    """Whether this machine lets a process of ours have a mount namespace of its own (asked of a child)."""
    probe = subprocess.run([sys.executable, "-I", "-S", __file__, PROBE], capture_output=True, check=False, timeout=30)
    return probe.returncode == 0


def main(argv: list[str]) -> None:
    if argv[1:] == [PROBE]:
        unshare(CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
        return
    enter(json.loads(argv[1]))
    command = argv[3:]
    os.execvp(command[0], command)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except OSError as exc:
        print(f"trainyard: cannot start the container with its volume mounts: {exc}", file=sys.stderr)
        sys.exit(128)
