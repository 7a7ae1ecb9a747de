"""Shared test fixtures: a real control plane in a temporary home, the real kubectl, polling.

Nothing here fakes a trainyard component: ``plane`` starts ``yard up`` as a background process
exactly as a user would, and ``kubectl`` runs the binary on PATH against it.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from trainyard.operator.settings import DEFAULT_HOST_PORTS, HOST_PORTS_ENV, parse_host_ports

REPO = Path(__file__).resolve().parents[1]
T = TypeVar("T")


def _own_host_ports() -> None:
    """Under pytest-xdist, each worker's planes allocate jobs' host ports from a slice of their own.

    A plane's operator reserves the ports of its jobs only in its own memory and checks others by
    binding, which misses a port another plane has given to a job whose processes are not listening
    yet (starting, restarting, pending): two planes side by side could hand out the same port. The
    plane (``yard up``) and ``yard operator`` read ``$TRAINYARD_HOST_PORTS``; every plane a worker
    starts inherits it.
    """
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not (worker and count):
        return
    low, high = parse_host_ports(DEFAULT_HOST_PORTS)
    index, size = int(worker.removeprefix("gw")), (high - low + 1) // int(count)
    os.environ[HOST_PORTS_ENV] = f"{low + index * size}-{low + (index + 1) * size - 1}"


_own_host_ports()

# Started in the background of a script (`cmd &` in a non-interactive shell, some CI agents), pytest
# inherits SIGINT ignored, and so would every `yard` it starts (an ignored signal stays ignored across
# exec, and Python then installs no KeyboardInterrupt handler): the tests that press Ctrl-C on
# `yard run` or `yard get -w` would wait in vain. A handled signal is reset to default in children.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def eventually(probe: Callable[[], T], *, timeout: float = 60.0, interval: float = 0.2, what: str = "") -> T:
    """Poll ``probe`` until it returns a truthy value; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or probe}; last value: {last!r}")


async def eventually_async(
    probe: Callable[[], T | None], *, timeout: float = 60.0, interval: float = 0.2, what: str = ""
) -> T:
    """``eventually`` inside an event loop: the loop (a recorder, a controller under test) runs between polls."""
    loop = asyncio.get_running_loop()
    deadline, last = loop.time() + timeout, None
    while loop.time() < deadline:
        last = probe()
        if last:
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what or probe}; last value: {last!r}")


@dataclass
class Plane:
    home: Path
    port: int
    # The default, as for `yard up`: HTTPS and a bearer token. False: `yard up --insecure` (plain http).
    secure: bool = True

    @property
    def url(self) -> str:
        return f"{'https' if self.secure else 'http'}://127.0.0.1:{self.port}"

    # -- for tests that call the API server directly rather than through the kubeconfig ---------

    def ssl_context(self) -> ssl.SSLContext | None:
        """A client context that trusts the plane's own CA (None for plain http)."""
        return ssl.create_default_context(cafile=self.home / "pki" / "ca.crt") if self.secure else None

    def auth_headers(self) -> dict[str, str]:
        """``Authorization: Bearer <token>`` (nothing for plain http)."""
        if not self.secure:
            return {}
        return {"Authorization": f"Bearer {(self.home / 'pki' / 'token').read_text().strip()}"}

    def urlopen(self, target: str | urllib.request.Request, *, timeout: float = 60) -> Any:
        """``urllib.request.urlopen`` of a path (or full URL, or Request) on the plane, with its CA and token."""
        request = (
            urllib.request.Request(self.url + target if target.startswith("/") else target)
            if isinstance(target, str)
            else target
        )
        for key, value in self.auth_headers().items():
            request.add_header(key, value)
        return urllib.request.urlopen(request, timeout=timeout, context=self.ssl_context())

    def connection(self, timeout: float = 60) -> http.client.HTTPConnection:
        """An ``http.client`` connection to the plane whose requests carry its token (HTTPS when secure)."""
        if not self.secure:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        conn = _TokenConnection("127.0.0.1", self.port, timeout=timeout, context=self.ssl_context())
        conn.auth = self.auth_headers()
        return conn

    @property
    def kubeconfig(self) -> Path:
        return self.home / "kubeconfig"

    def yard(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "trainyard.cli.main", "--home", str(self.home), *args]
        result = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120, stdin=subprocess.DEVNULL)
        if check and result.returncode != 0:
            raise AssertionError(
                f"yard {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
            )
        return result

    def up(self, *flags: str) -> None:
        mode = "--secure" if self.secure else "--insecure"
        self.yard("up", "--port", str(self.port), "--workspace", str(REPO), mode, *flags)

    def down(self) -> None:
        self.yard("down", check=False)


class _TokenConnection(http.client.HTTPSConnection):
    auth: dict[str, str]

    def request(  # type: ignore[override]
        self, method: str, url: str, body: Any = None, headers: Any = None, *, encode_chunked: bool = False
    ) -> None:
        super().request(method, url, body, {**self.auth, **dict(headers or {})}, encode_chunked=encode_chunked)


def own_plane(tmp_path_factory: pytest.TempPathFactory, name: str, *flags: str, secure: bool = True) -> Iterator[Plane]:
    """A module's own plane, started with ``yard up`` ``flags`` (for module-scoped ``plane`` fixtures)."""
    plane = Plane(tmp_path_factory.mktemp(name), free_port(), secure)
    plane.up(*flags)
    yield plane
    plane.down()


def start_plane(home: Path, *, secure: bool = True) -> Plane:
    plane = Plane(home, free_port(), secure)
    plane.up()
    return plane


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    p = start_plane(tmp_path_factory.mktemp("yard-home"))
    yield p
    p.down()


@pytest.fixture(scope="session")
def insecure_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    """A second plane started with ``--insecure`` (plain http, no token), for tests about plain http."""
    p = start_plane(tmp_path_factory.mktemp("yard-insecure-home"), secure=False)
    yield p
    p.down()


@pytest.fixture(scope="session")
def secure_plane(plane: Plane) -> Plane:
    """The default plane is the secure one (the name is kept for tests written when it was not)."""
    return plane


def plain_and_secure(request: pytest.FixtureRequest, plane: Plane) -> Plane:
    """Body of a module's ``plane`` override parametrized over ``http`` and ``https`` (the default plane)."""
    return request.getfixturevalue("insecure_plane") if request.param == "http" else plane


class Kubectl:
    def __init__(self, plane: Plane, cache: Path) -> None:
        self.env = {**os.environ, "KUBECONFIG": str(plane.kubeconfig), "KUBECACHEDIR": str(cache)}

    def run(self, *args: str, input: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", *args], capture_output=True, text=True, env=self.env, input=input, timeout=timeout, cwd=REPO
        )

    def __call__(self, *args: str, input: str | None = None, timeout: float = 120) -> str:
        result = self.run(*args, input=input, timeout=timeout)
        if result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result.stdout

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "-o", "json"))


@pytest.fixture(scope="session")
def kubectl(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    return Kubectl(plane, tmp_path_factory.mktemp("kube-cache"))


# The slowest test files, slowest first (from `pytest --durations`, on a loaded 2-core machine). Under
# xdist's `--dist loadfile --no-loadscope-reorder` (Makefile) a worker takes whole files in this order,
# so the long files start at once and the short ones fill in at the end. Order only: a file missing
# here runs after these, in collection order; tests inside a file keep theirs.
SLOW_FIRST = (
    "tests/e2e/test_operator_crash_safety.py",
    "tests/e2e/test_elastic_recovery.py",
    "tests/e2e/test_hpa_autoscaling.py",
    "tests/e2e/test_node_failure.py",
    "tests/e2e/test_node_loss.py",
    "tests/e2e/test_gang_restart.py",
    "tests/e2e/test_yard_cli.py",
    "tests/e2e/test_readme_commands.py",
    "tests/conformance/test_secure.py",
    "tests/e2e/test_walking_skeleton.py",
    "tests/e2e/test_tfjob.py",
    "tests/e2e/test_mpijob.py",
    "tests/e2e/test_xgboostjob.py",
    "tests/e2e/test_paddlejob.py",
    "tests/e2e/test_runtime_callbacks.py",
    "tests/e2e/test_mlflow_runtime.py",
    "tests/e2e/test_training_progress.py",
    "tests/e2e/test_image_environments.py",
    "tests/conformance/test_kopf_operator.py",
    "tests/e2e/test_node_survival.py",
    "tests/conformance/test_durability.py",
    "tests/conformance/test_fuzz.py",
    "tests/e2e/test_deploy_rbac.py",
    "tests/e2e/test_operator_process.py",
    "tests/e2e/test_gpus.py",
    "tests/conformance/test_kubernetes_client.py",
    "tests/conformance/test_kubeflow_training_sdk.py",
    "tests/conformance/test_kubeflow_trainer_sdk.py",
    "tests/e2e/test_hpo_examples.py",
    "tests/e2e/test_trainjobs.py",
    "tests/e2e/test_trainingjob.py",
    "tests/e2e/test_node_and_scheduler.py",
    "tests/unit/cli/test_yard_parsing.py",
    "tests/e2e/test_sdk_training_client.py",
    "tests/conformance/test_lightkube_and_asyncio_clients.py",
    "tests/e2e/test_lifecycle.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.partition("::")[0], len(SLOW_FIRST)))
