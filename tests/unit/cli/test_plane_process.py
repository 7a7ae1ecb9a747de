"""``yard down`` and ``yard status`` tell a running plane from one that has ended."""

from __future__ import annotations

import subprocess
import sys
import time

from trainyard.cli.plane import _alive


def test_an_ended_process_not_yet_reaped_is_not_alive() -> None:
    # A plane started by `yard up` is init's child: once it exits it stays a zombie until init
    # reaps it, which some inits do seconds later; `yard down` must not wait for that.
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert _alive(child.pid)
        assert child.stdin is not None
        child.stdin.close()
        deadline = time.monotonic() + 30
        while _alive(child.pid):  # not reaped here: child.poll() is never called before the end
            assert time.monotonic() < deadline, "the ended child still counted as alive"
            time.sleep(0.01)
        with open(f"/proc/{child.pid}/stat") as handle:
            assert handle.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie, and not alive
    finally:
        child.kill()
        child.wait()
    assert not _alive(child.pid)
