"""The official Kubeflow SDK, ``kubeflow`` 0.5.0 (Trainer v2's ``TrainerClient``), against the embedded plane.

The SDK pins ``kubernetes<36`` and ships a ``kubeflow/__init__.py`` of its own, as
``kubeflow-training`` does, so ``make install`` puts it and ``kubernetes`` 35 under
``<venv>/clients/kubeflow`` and the scenario (``kubeflow_trainer_scenario.py``) runs in a
subprocess with that directory first on ``PYTHONPATH``, the SDK unchanged. The plane is its own,
with a short crash-loop back-off: the scenario's failing TrainJob fails once its node's container
has restarted up to the Job's ``backoffLimit`` (6), which at the kubelet's 10 s schedule takes
minutes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, Plane, own_plane

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).with_name("kubeflow_trainer_scenario.py")
# Where the Makefile's install recipe puts the SDK (next to the venv it installs).
KUBEFLOW = Path(sys.prefix) / "clients" / "kubeflow"


@pytest.fixture(scope="module")
def trainer_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "kubeflow-trainer-sdk", "--restart-backoff", "0.2")


@pytest.mark.timeout(600)
def test_kubeflow_trainer_sdk_runs_a_function_on_two_nodes(trainer_plane: Plane) -> None:
    assert (KUBEFLOW / "kubeflow" / "trainer").is_dir(), f"kubeflow is not installed in {KUBEFLOW}; run `make install`"
    result = subprocess.run(
        [sys.executable, str(SCENARIO), str(trainer_plane.kubeconfig), "default"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(trainer_plane.home), "PYTHONPATH": str(KUBEFLOW)},
        cwd=REPO,
        timeout=540,
        stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lines = output.splitlines()
    # The subprocess really ran the pinned SDK and client from their own directory.
    assert lines[0].startswith("kubeflow 0.5.0 from ") and str(KUBEFLOW) in lines[0], lines[0]
    assert lines[1].startswith("kubernetes 35.0.0 from ") and str(KUBEFLOW) in lines[1], lines[1]
    # The SDK's constructor read the control plane's version (a warning on stderr otherwise).
    assert "Trainer control-plane version info is not available" not in output, output
    assert output.rstrip().endswith("SCENARIO OK"), output
