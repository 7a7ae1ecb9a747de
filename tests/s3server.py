"""A real S3 server for tests: moto's server mode, in a subprocess on a free loopback port.

moto lives in a venv of its own beside trainyard's (``<venv>/clients/moto``, ``make install``) with
its own botocore and python-dateutil, which the venv's kubernetes pin refuses; the server runs there.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

MOTO = Path(sys.prefix) / "clients" / "moto"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server(extra_env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Start moto's S3 server; yields its endpoint URL; stops it at the end."""
    python = MOTO / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"moto is not installed in {MOTO}: run `make install`")
    port = free_port()
    env = {**os.environ, **(extra_env or {})}
    env.pop("PYTHONPATH", None)  # trainyard's sources and packages are not the server's
    process = subprocess.Popen(
        [str(python), "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60  # a busy 2-core machine imports moto slowly
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto's server did not start on {url}") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)
