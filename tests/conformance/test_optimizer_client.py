"""The official Kubeflow SDK's ``OptimizerClient`` (``kubeflow`` 0.5.0) against the embedded plane.

``OptimizerClient.optimize()`` creates a Katib Experiment whose trials are TrainJobs; the plane's
Experiment, Suggestion and Trial controllers run it (the search is Optuna's) and collect each
trial's ``name=value`` lines from its log. As ``test_kubeflow_trainer_sdk.py``, the scenario
(``kubeflow_optimizer_scenario.py``) runs in a subprocess with the SDK's own directory first on
``PYTHONPATH``, the SDK unchanged, on the session plane in a namespace of its own.
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

SCENARIO = Path(__file__).with_name("kubeflow_optimizer_scenario.py")
KUBEFLOW = Path(sys.prefix) / "clients" / "kubeflow"


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"optimizer-sdk-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


@pytest.mark.timeout(600)
def test_the_official_optimizer_client_runs_a_search_of_trainjobs(plane: Plane, ns: str) -> None:
    installed = (KUBEFLOW / "kubeflow" / "optimizer").is_dir()
    assert installed, f"kubeflow is not installed in {KUBEFLOW}; run `make install`"
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
    assert lines[0].startswith("kubeflow 0.5.0 from ") and str(KUBEFLOW) in lines[0], lines[0]
    assert lines[1].startswith("kubernetes 35.0.0 from ") and str(KUBEFLOW) in lines[1], lines[1]
    assert output.rstrip().endswith("SCENARIO OK"), output
