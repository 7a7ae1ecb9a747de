"""What runs where an image's ``sshd`` would: nothing listens, since commands reach pods through the node's exec.

An MPIJob's workers run ``/usr/sbin/sshd -De`` so that the launcher's ``mpirun`` can ssh to them.
The local node starts this placeholder instead (``podexec.stand_in``): it says so in one line of
the container's log, then waits; SIGTERM (the pod stopping) ends it with status 0. The standard
library only: it runs as ``python -I -S`` with trainyard's interpreter.
"""

from __future__ import annotations

import signal
import sys

MESSAGE = (
    "trainyard: sshd is not run on the local node; commands reach this pod through the node agent's exec "
    "(mpirun's launch agent), so this container only waits until the pod stops"
)


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(MESSAGE, flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main())
