"""The official Kubeflow training SDK, ``kubeflow-training`` 1.9.x, against the embedded plane.

The SDK pins ``kubernetes<36`` and the project's venv has 37, so ``make install`` puts the SDK
and ``kubernetes`` 35 under ``<venv>/clients/kubeflow-training`` and the scenario
(``kubeflow_training_scenario.py``) runs in a subprocess with that directory first on
``PYTHONPATH``. The plane is its own, with a short pending timeout so that trainyard's
``Pending`` condition shows up within the test.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, Plane, own_plane

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).with_name("kubeflow_training_scenario.py")
# Where the Makefile's install recipe puts the SDK (next to the venv it installs).
KUBEFLOW_TRAINING = Path(sys.prefix) / "clients" / "kubeflow-training"


@pytest.fixture(scope="module")
def kf_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    yield from own_plane(tmp_path_factory, "kubeflow-sdk", "--pending-timeout", "2")


@pytest.mark.timeout(900)
def test_kubeflow_training_sdk_runs_jobs_from_an_object_and_a_function(kf_plane: Plane) -> None:
    assert (KUBEFLOW_TRAINING / "kubeflow" / "training").is_dir(), (
        f"kubeflow-training is not installed in {KUBEFLOW_TRAINING}; run `make install`"
    )
    result = subprocess.run(
        [sys.executable, str(SCENARIO), str(kf_plane.kubeconfig), "default"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(kf_plane.home), "PYTHONPATH": str(KUBEFLOW_TRAINING)},
        cwd=REPO,
        timeout=840,
        stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lines = output.splitlines()
    # The subprocess really ran the pinned SDK and client from their own directory.
    assert lines[0].startswith("kubeflow-training 1.9.4 from ") and str(KUBEFLOW_TRAINING) in lines[0], lines[0]
    assert lines[1].startswith("kubernetes 35.0.0 from ") and str(KUBEFLOW_TRAINING) in lines[1], lines[1]
    # Follow mode printed the replicas' lines with the SDK's own prefix.
    assert "[Pod kf-object-worker-0]: rank 1 of 2" in output, output
    assert output.rstrip().endswith("SCENARIO OK"), output


KINDS_SCENARIO = Path(__file__).with_name("kubeflow_training_kinds_scenario.py")


@pytest.mark.timeout(600)
def test_kubeflow_training_sdk_drives_every_v1_kind(kf_plane: Plane) -> None:
    result = subprocess.run(
        [sys.executable, str(KINDS_SCENARIO), str(kf_plane.kubeconfig), "default"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(kf_plane.home), "PYTHONPATH": str(KUBEFLOW_TRAINING)},
        cwd=REPO,
        timeout=540,
        stdin=subprocess.DEVNULL,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for kind in ("TFJob", "XGBoostJob", "PaddleJob", "JAXJob"):
        assert f"ok  {kind} wait_for_job_conditions -> Succeeded" in output, output
    assert output.rstrip().endswith("SCENARIO OK"), output
