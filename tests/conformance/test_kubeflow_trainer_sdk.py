"""The official Kubeflow SDK, ``kubeflow`` 0.5.0 (Trainer v2's ``TrainerClient``), against the embedded plane.

The SDK pins ``kubernetes<36`` and ships a ``kubeflow/__init__.py`` of its own, as
``kubeflow-training`` does, so ``make install`` puts it and ``kubernetes`` 35 under
``<venv>/clients/kubeflow`` and the scenario (``kubeflow_trainer_scenario.py``) runs in a
subprocess with that directory first on ``PYTHONPATH``, the SDK unchanged. It needs no plane
flags, so it runs on the session plane, in a namespace of its own (``list_jobs`` reads every
TrainJob of the namespace, and fails on one whose runtime is missing).
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, Kubectl, Plane

pytestmark = pytest.mark.e2e

SCENARIO = Path(__file__).with_name("kubeflow_trainer_scenario.py")
# Where the Makefile's install recipe puts the SDK (next to the venv it installs).
KUBEFLOW = Path(sys.prefix) / "clients" / "kubeflow"


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"trainer-sdk-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


@pytest.mark.timeout(600)
def test_kubeflow_trainer_sdk_runs_a_function_on_two_nodes(plane: Plane, ns: str) -> None:
    assert (KUBEFLOW / "kubeflow" / "trainer").is_dir(), f"kubeflow is not installed in {KUBEFLOW}; run `make install`"
    result = subprocess.run(
        [sys.executable, str(SCENARIO), str(plane.kubeconfig), ns],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(plane.home), "PYTHONPATH": str(KUBEFLOW)},
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
    # Both nodes' ranks took part in one all-reduce (the scenario checks every rank's line).
    assert "trainer-sdk ddp rank 1 world " in output, output
    assert output.rstrip().endswith("SCENARIO OK"), output
