"""examples/hpo: the trial script's three metric paths, and three of its Katib Experiments run to the end.

The script runs directly first (its output is what Katib's StdOut collector parses, with Katib's
default filter; its hyperparameters come from argv or OptimizationJob's env). Then, on the session
plane, each in a namespace of its own: ``random.yaml`` (batch Jobs) and ``tpe.yaml`` (PyTorchJobs)
run four trials, two at a time, and the Experiment names as best the trial whose collected
objective is the best; ``median-stop.yaml``
runs one trial at a time and its seeded second trial, which diverges, is stopped early.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, Kubectl, eventually
from trainyard.api import katib

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "hpo"


def run_script(*args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, str(EXAMPLE / "train_digits.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def katib_metrics(text: str, names: tuple[str, ...] = ("loss", "accuracy")) -> list[dict[str, float]]:
    """What Katib's StdOut collector takes from each line: the name=value pairs of the objective's metrics."""
    rows = []
    for line in text.splitlines():
        found = {m[0]: float(m[1]) for m in re.findall(katib.DEFAULT_FILTER, line) if m[0] in names}
        if found:
            rows.append(found)
    return rows


def test_the_script_prints_katibs_format_and_reads_argv_or_optimizationjobs_env(tmp_path: Path) -> None:
    log = tmp_path / "metrics.log"
    out = run_script("--lr=0.05", "--momentum=0.8", "--epochs=3", f"--metrics-file={log}")
    assert "lr=0.05 momentum=0.8" in out, out
    rows = katib_metrics(out)
    assert len(rows) == 3 and all(set(r) == {"loss", "accuracy"} for r in rows), out
    assert rows[-1]["accuracy"] > 0.8 and rows[-1]["loss"] < 1.0, rows  # it really learns
    # The File collector's TEXT lines: an RFC 3339 timestamp, then the same pairs.
    lines = log.read_text().splitlines()
    assert len(lines) == 3 and all(re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z epoch=\d", x) for x in lines), lines
    assert katib_metrics(log.read_text()) == rows
    # OptimizationJob's injection, when the command line names no value; a diverging rate stays at chance.
    env = {"KUBEFLOW_TRAINER_OPT_LR": "2.0", "KUBEFLOW_TRAINER_OPT_MOMENTUM": "0.9"}
    diverged = run_script("--epochs=2", env=env)
    assert "lr=2.0 momentum=0.9" in diverged, diverged
    assert all(r["loss"] > 2.0 for r in katib_metrics(diverged)), diverged


# -- Katib Experiments on the plane ---------------------------------------------------------------


@pytest.fixture
def ns(kubectl: Kubectl) -> Iterator[str]:
    name = f"hpo-{uuid.uuid4().hex[:6]}"
    kubectl("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false")


def condition(obj: dict[str, Any], kind: str) -> bool:
    return any(c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


def finished(kubectl: Kubectl, ns: str, name: str, timeout: float) -> Any:
    def probe() -> Any:
        found = kubectl.json("get", "experiment", name, "-n", ns)
        assert not condition(found, katib.FAILED), found.get("status")
        return found if condition(found, katib.SUCCEEDED) else None

    return eventually(probe, timeout=timeout, interval=0.5, what=f"experiment {name} to succeed")


def trials(kubectl: Kubectl, ns: str, experiment: str) -> list[Any]:
    found = kubectl.json("get", "trials", "-n", ns, "-l", f"{katib.EXPERIMENT_LABEL}={experiment}")["items"]
    return sorted(found, key=lambda t: (t["metadata"]["creationTimestamp"], t["metadata"]["name"]))


def observed(observation: dict[str, Any] | None, metric: str) -> dict[str, str]:
    """One metric of a Trial's ``status.observation`` (or of ``currentOptimalTrial.observation``)."""
    found = [m for m in (observation or {}).get("metrics") or [] if m["name"] == metric]
    assert found, f"no {metric} in {observation}"
    return found[0]


def observation(trial: dict[str, Any]) -> dict[str, Any] | None:
    return (trial.get("status") or {}).get("observation")


def assignments(obj: list[dict[str, str]]) -> dict[str, str]:
    return {a["name"]: a["value"] for a in obj}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("search", ["random", "tpe"])
def test_a_search_runs_its_trials_and_names_the_best_one(kubectl: Kubectl, ns: str, search: str) -> None:
    # random.yaml's trials are batch Jobs, tpe.yaml's PyTorchJobs (TPE models the history after 2
    # random draws); tpe.yaml's budget of 6 is cut to 4 here.
    manifest = yaml.safe_load((EXAMPLE / f"{search}.yaml").read_text())
    manifest["spec"]["maxTrialCount"] = 4
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    experiment = finished(kubectl, ns, search, timeout=240)
    status = experiment["status"]
    assert status.get("trials") == 4 and status.get("trialsSucceeded") == 4, status
    assert any(c["reason"] == katib.MAX_TRIALS_REACHED for c in status["conditions"] if c["type"] == "Succeeded")
    found = trials(kubectl, ns, search)
    assert len(found) == 4 and all(condition(t, katib.SUCCEEDED) for t in found), [t.get("status") for t in found]
    # Four different draws, each inside its feasible space.
    drawn = [assignments(t["spec"]["parameterAssignments"]) for t in found]
    assert len({(d["lr"], d["momentum"]) for d in drawn}) == 4, drawn
    assert all(0.001 <= float(d["lr"]) <= 0.3 and 0.5 <= float(d["momentum"]) <= 0.95 for d in drawn), drawn
    # Every trial's objective was collected from its real training (a loss, an accuracy per epoch), and
    # the Experiment's optimal trial is the one with the lowest loss (minimize: the "min" strategy).
    losses = {t["metadata"]["name"]: float(observed(observation(t), "loss")["min"]) for t in found}
    assert all(0.0 < v < 2.5 for v in losses.values()), losses
    assert all(float(observed(observation(t), "accuracy")["max"]) > 0.5 for t in found)
    best = min(losses, key=losses.__getitem__)
    optimal = status["currentOptimalTrial"]
    assert optimal["bestTrialName"] == best, (optimal, losses)
    best_trial = next(t for t in found if t["metadata"]["name"] == best)
    assert assignments(optimal["parameterAssignments"]) == assignments(best_trial["spec"]["parameterAssignments"])
    assert float(observed(optimal["observation"], "loss")["min"]) == losses[best]


@pytest.mark.timeout(300)
def test_medianstop_stops_the_diverging_trial_early(kubectl: Kubectl, ns: str) -> None:
    kubectl("apply", "-n", ns, "-f", str(EXAMPLE / "median-stop.yaml"))
    experiment = finished(kubectl, ns, "median-stop", timeout=240)
    status = experiment["status"]
    found = trials(kubectl, ns, "median-stop")
    assert len(found) == 2, [t["metadata"]["name"] for t in found]
    first, second = found
    assert condition(first, katib.SUCCEEDED), first["status"]
    # The seeded second draw diverges: judged against the completed first trial after two epochs, it is
    # stopped before its 40 epochs end.
    assert float(assignments(second["spec"]["parameterAssignments"])["lr"]) >= 0.3, second["spec"]
    assert condition(second, katib.EARLY_STOPPED), second.get("status")
    assert not condition(second, katib.SUCCEEDED), second["status"]
    assert status.get("trialsEarlyStopped") == 1 and status.get("trialsSucceeded") == 1, status
    # Katib's rule: worse than the median of the completed trials' mean loss over their first two epochs.
    # The completed trial's own log gives those epochs (retain: true keeps its job and pod); the stopped
    # trial's observation holds what it had reported when it was stopped (at chance).
    log = kubectl("logs", "-n", ns, f"job/{first['metadata']['name']}")
    median = statistics.median([statistics.mean(r["loss"] for r in katib_metrics(log)[:2])])
    stopped = observed(observation(second), "loss")
    assert float(stopped["latest"]) > 2.0 > median, (stopped, median)
