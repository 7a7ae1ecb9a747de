"""Becomes a process of a running pod: its cgroup, its own hostname, its volume mounts, then ``exec``.

The node agent's exec server (``node.podexec``) starts this module (``python -I -S -c``, like the
shim server: the standard library and ``mountns`` only) in a new session with the client's
stdin, stdout and stderr and the container's environment. Here, before ``exec``ing the command:

* the container's cgroup is joined when the node gives containers cgroups, so what the command
  uses counts as the pod's (and is killed with it);
* a new UTS namespace gets the pod's hostname: Open MPI 5 tells hosts apart by the name
  ``gethostname`` returns, and every pod on this node would otherwise report the machine's;
* the container's mount namespace is entered (``mountns.enter`` with ``join``: the very namespace
  its process runs in, so what it wrote outside its volumes is seen; rebuilt with the same layout
  should that process be gone) when the container has volume mounts, else the working directory;
* the process asks to be killed if the agent that started it dies (``PR_SET_PDEATHSIG``), so a
  killed plane leaves no exec'd command holding a client's pipes;
* with ``tty``, its stdin (the slave of the pty the API server made) becomes the controlling
  terminal of its session (``TIOCSCTTY``; the agent started it as a session leader), as a
  container runtime does for ``kubectl exec -it``: job control, ``tty``, Ctrl-C reach the command.

Failures are reported on stderr (which is the client's) with exit status ``FAILED``; with ``runc``
(the API server's requests), a command that cannot be run is reported in runc's words, exit
status 127 when it is not found and 126 otherwise, as a shell would.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import signal
import sys
import termios
from pathlib import Path
from typing import Any

from trainyard.cluster.clients.node.runtime import mountns

CLONE_NEWUTS = 0x04000000
PR_SET_PDEATHSIG = 1
# What a command that could not be entered into its pod exits with (as ``kubectl exec``'s 126: not runnable).
FAILED = 126

_libc = ctypes.CDLL(None, use_errno=True)


def _sethostname(name: str) -> None:
    raw = name.encode()
    if _libc.sethostname(raw, len(raw)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"sethostname {name}: {os.strerror(err)}")


def enter(spec: dict[str, Any]) -> None:
    """Put this process in the pod as ``spec`` says: ``hostname``, ``cwd``, and optionally ``cgroup``, ``mounts``."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if spec.get("tty"):
        # Before any namespace is entered: the terminal is this session's whatever the mounts are.
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
    if cgroup := spec.get("cgroup"):
        procs = Path(cgroup) / "cgroup.procs"
        if procs.exists():
            procs.write_text("0")
    if spec.get("mounts"):
        mountns.enter(spec["mounts"], also=CLONE_NEWUTS)
    else:
        mountns.unshare(CLONE_NEWUTS)
        os.chdir(spec["cwd"])
    _sethostname(spec["hostname"])


def main(argv: list[str]) -> None:
    """``SPEC -- COMMAND...``: enter the pod, then become ``COMMAND``."""
    spec = json.loads(argv[0])
    command = argv[2:]
    try:
        enter(spec)
    except OSError as exc:
        print(f"trainyard: cannot enter pod {spec.get('pod')}: {exc}", file=sys.stderr)
        sys.exit(FAILED)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        code = 127 if isinstance(exc, FileNotFoundError) else FAILED
        if spec.get("runc"):
            print(runc_words(command[0], exc), file=sys.stderr)
        else:
            print(f"trainyard: {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        sys.exit(code)


def runc_words(name: str, exc: OSError) -> str:
    """What runc says when a container's exec cannot start ``name`` (kubectl shows it on stderr)."""
    if isinstance(exc, FileNotFoundError):
        why = f"stat {name}: no such file or directory" if "/" in name else "executable file not found in $PATH"
    else:
        why = f"{exc.strerror or exc}".lower()
    return f'OCI runtime exec failed: exec failed: unable to start container process: exec: "{name}": {why}: unknown'
