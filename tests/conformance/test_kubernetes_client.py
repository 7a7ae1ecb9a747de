"""The official ``kubernetes`` Python client, 37.x and 35.x, against a real plane.

37.x is the project's dev pin; 35.x is what the Kubeflow SDKs pin, so it cannot share the venv:
``make install`` puts it under ``<venv>/clients/k8s35`` and the scenario runs it in a subprocess
with that directory first on ``PYTHONPATH``. Both versions run the very same scenario script.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
import yaml
from kubernetes import client, config

from conftest import REPO, Plane
from trainyard.cluster.paths import Layout
from trainyard.cluster.server.plane import ApiPlane
from trainyard.embedded import kubeconfig

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).with_name("k8s_client_scenario.py")
# Where the Makefile's install recipe puts kubernetes 35 (next to the venv it installs).
K8S35 = Path(sys.prefix) / "clients" / "k8s35"
VERSIONS = {"37": "37.0.2", "35": "35.0.0"}
T = TypeVar("T")


def run_scenario(version: str, plane: Plane, *args: str) -> str:
    if version == "35":
        assert (K8S35 / "kubernetes").is_dir(), f"kubernetes 35 is not installed in {K8S35}; run `make install`"
        path = str(K8S35)
    else:
        path = os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, str(SCENARIO), str(plane.kubeconfig), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    first = output.splitlines()[0]
    # The subprocess really ran the pinned version, not whatever else is importable.
    assert first.startswith(f"kubernetes {VERSIONS[version]} from "), first
    if version == "35":
        assert str(K8S35) in first, first
    assert output.rstrip().endswith("SCENARIO OK"), output
    return output


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("version", sorted(VERSIONS))
def test_kubernetes_client_crud_watch_conflict_logs(version: str, scheme: str, request: pytest.FixtureRequest) -> None:
    # The same scenario against the default (secure: CA + token) plane and against `yard up --insecure`.
    plane: Plane = request.getfixturevalue("plane" if scheme == "https" else "insecure_plane")
    run_scenario(version, plane, "crud", f"k8s-client-{version}")


def test_kubernetes_client_relists_after_410(tmp_path: Path) -> None:
    """A watch from a compacted revision gets ERROR 410 inside the stream, then relist + watch works.

    History can only vanish by compaction, which has no API; so this plane's API server runs in
    this process (in a thread with its own loop) and the test compacts its store directly.
    """
    with api_plane_in_thread(tmp_path) as (plane, api, on_loop):
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(plane.kubeconfig)))
        core.create_namespace({"metadata": {"name": "expiry"}})
        stale = core.list_namespaced_config_map("expiry").metadata.resource_version
        # One more write, so the revision the watch asks for is strictly older than the floor.
        core.create_namespaced_config_map("expiry", {"metadata": {"name": "before-compaction"}})
        on_loop(lambda: api.store.compact(keep=0))
        for version in sorted(VERSIONS):
            run_scenario(version, plane, "expired", "expiry", stale)


@contextlib.contextmanager
def api_plane_in_thread(home: Path) -> Iterator[tuple[Plane, ApiPlane, Callable[[Callable[[], T]], T]]]:
    """The real API server (store, registry, watch hub, HTTP) without node agent and operator."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="api-plane", daemon=True)
    thread.start()
    api = ApiPlane(Layout(home), port=0)

    def on_loop(fn: Callable[[], T]) -> T:
        async def call() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(call(), loop).result(60)

    try:
        asyncio.run_coroutine_threadsafe(api.start(), loop).result(60)
        plane = Plane(home, api.port, secure=False)  # ApiPlane alone serves plain http
        plane.kubeconfig.write_text(yaml.safe_dump(kubeconfig(api.url)))
        yield plane, api, on_loop
    finally:
        asyncio.run_coroutine_threadsafe(api.stop(), loop).result(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        loop.close()
