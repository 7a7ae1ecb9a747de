"""The wait-for-master init container's shell loop, run by a real ``sh`` against real sockets.

The image's ``nc`` (busybox) is not on this machine, so a stand-in with the same ``-z -w`` meaning
(exit 0 when a TCP connection to host:port succeeds) is put first on PATH; the loop, its argument
passing, its give-up rule and its messages are the real ones the pod runs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from trainyard.frameworks.network import WaitForMaster, wait_container

NC = f"""#!{sys.executable}
import socket, sys
args = sys.argv[1:]
assert args[:3] == ["-z", "-w", "2"], args
try:
    socket.create_connection((args[3], int(args[4])), timeout=2).close()
except OSError:
    sys.exit(1)
"""


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    nc = tmp_path / "nc"
    nc.write_text(NC)
    nc.chmod(0o755)
    return {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}


def command(port: int, tries: int, seconds: int) -> list[str]:
    container = wait_container(
        "init-pytorch", WaitForMaster(max_tries=tries, interval_seconds=seconds), "127.0.0.1", port
    )
    assert container.command is not None
    return container.command


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ends_at_once_when_the_master_listens(env: dict[str, str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        done = subprocess.run(command(port, 3, 0), env=env, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"127.0.0.1:{port} accepts connections"


def test_gives_up_after_the_configured_tries(env: dict[str, str]) -> None:
    port = closed_port()

    done = subprocess.run(command(port, 3, 0), env=env, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"waiting for 127.0.0.1:{port} to accept connections (1/3)",
        f"waiting for 127.0.0.1:{port} to accept connections (2/3)",
    ]
    assert done.stderr.strip() == f"127.0.0.1:{port} is still not accepting connections after 3 tries; giving up"


def test_waits_until_the_master_starts_listening(env: dict[str, str]) -> None:
    port = closed_port()
    process = subprocess.Popen(command(port, 60, 1), env=env, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    try:
        first = process.stdout.readline()
        assert first.startswith(f"waiting for 127.0.0.1:{port}"), first
        with socket.create_server(("127.0.0.1", port)):
            rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()

    assert process.returncode == 0
    assert rest.splitlines()[-1] == f"127.0.0.1:{port} accepts connections"
