"""A 16-trial search of two hyperparameters on digits, two trials at a time: wall time, and TPE against random.

The trial is ``examples/hpo``'s (``train_digits.py``: an MLP, 20 epochs, SGD's learning rate on a
log scale and its momentum), the Experiment ``examples/hpo/random.yaml`` with ``maxTrialCount: 16``
and ``parallelTrialCount: 2``, on a fresh ``yard up`` (HTTPS, ``--workspace`` this checkout) in a
temporary home, started by ``elastic_recovery``'s driver. In order:

1. **One trial alone, T.** The Experiment's trialSpec, a batch/v1 Job, with fixed values
   (``lr=0.03 momentum=0.9``), applied ``--singles`` times: seconds from just before ``kubectl
   apply`` until ``kubectl wait --for=condition=Complete`` returns; T is their median. It includes
   what every trial pays that is not the search's: the pod's start, the interpreter, imports.
2. **Random search**, then **TPE** (``n_startup_trials`` 5 random draws first), the same space,
   budget and ``random_state``: seconds from ``kubectl apply`` of the Experiment until ``kubectl
   wait --for=condition=Succeeded`` returns. The bound is 16 * T / 2, every trial as fast as one
   alone and the two slots never idle; the ratio wall / bound has the goal ≤ 1.15 (issue 41). Beside
   it, the trials' own seconds (Trial ``startTime`` to ``completionTime``, whole seconds) and wall /
   (their sum / 2): what the search itself costs, apart from two trials sharing the cores.
3. **Best value**: each Experiment's ``currentOptimalTrial`` (its lowest validation loss) and the
   ratio TPE / random (below 1: TPE found better).

Prints the figures and ratios; asserts nothing. ``--src OTHER/src`` runs another checkout's plane.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from apiserver import load, verdict
from elastic_recovery import Bench

REPO = Path(__file__).resolve().parents[1]
EXPERIMENT = REPO / "examples" / "hpo" / "random.yaml"
TRIALS, PARALLEL = 16, 2
TARGET_RATIO = 1.15
SINGLE = {"${trialParameters.learningRate}": "0.03", "${trialParameters.momentum}": "0.9"}


def seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


class Search(Bench):
    """``elastic_recovery``'s driver, plus a single trial as a Job and a whole Experiment."""

    def __init__(self, home: Path, src: Path, seed: int) -> None:
        super().__init__(home, src)
        self.experiment: dict[str, Any] = yaml.safe_load(EXPERIMENT.read_text())
        self.seed = seed

    def single(self, name: str) -> float:
        text = json.dumps(self.experiment["spec"]["trialTemplate"]["trialSpec"])
        for placeholder, value in SINGLE.items():
            text = text.replace(placeholder, value)
        body = {**json.loads(text), "metadata": {"name": name}}
        started = time.monotonic()
        self.kubectl("apply", "-f", "-", stdin=json.dumps(body))
        done = self.kubectl(
            "wait", "--for=condition=Complete", f"job/{name}", "--timeout=300s", check=False, timeout=360
        )
        elapsed = time.monotonic() - started
        if "condition met" not in done:
            raise SystemExit(f"job {name} did not complete:\n{self.kubectl('describe', 'job', name, check=False)}")
        self.kubectl("delete", "job", name, "--wait=true", timeout=180)
        return elapsed

    def search(self, name: str, algorithm: str) -> tuple[float, dict[str, Any], list[dict[str, Any]]]:
        body = copy.deepcopy(self.experiment)
        body["metadata"] = {"name": name}
        spec = body["spec"]
        spec.update(maxTrialCount=TRIALS, parallelTrialCount=PARALLEL)
        settings = [{"name": "random_state", "value": str(self.seed)}]
        if algorithm == "tpe":
            settings.append({"name": "n_startup_trials", "value": "5"})
        spec["algorithm"] = {"algorithmName": algorithm, "algorithmSettings": settings}
        started = time.monotonic()
        self.kubectl("apply", "-f", "-", stdin=json.dumps(body))
        done = self.kubectl(
            "wait", "--for=condition=Succeeded", f"experiment/{name}", "--timeout=900s", check=False, timeout=960
        )
        elapsed = time.monotonic() - started
        if "condition met" not in done:
            raise SystemExit(f"{name} did not succeed:\n{self.kubectl('describe', 'experiment', name, check=False)}")
        experiment = json.loads(self.kubectl("get", "experiment", name, "-o", "json"))
        listed = json.loads(self.kubectl("get", "trials", "-l", f"katib.kubeflow.org/experiment={name}", "-o", "json"))
        return elapsed, experiment, listed["items"]


def best_loss(experiment: dict[str, Any]) -> tuple[float, dict[str, str]]:
    optimal = experiment["status"]["currentOptimalTrial"]
    loss = next(m for m in optimal["observation"]["metrics"] if m["name"] == "loss")
    return float(loss["min"]), {a["name"]: a["value"] for a in optimal["parameterAssignments"]}


def trial_seconds(trials: list[dict[str, Any]]) -> list[float]:
    out = []
    for trial in trials:
        status = trial.get("status") or {}
        if status.get("startTime") and status.get("completionTime"):
            out.append(seconds(status["completionTime"]) - seconds(status["startTime"]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--singles", type=int, default=3, help="runs of one trial alone (T is their median)")
    parser.add_argument("--seed", type=int, default=7, help="random_state of both searches")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--keep", action="store_true", help="keep the plane's home (its log, pods) afterwards")
    args = parser.parse_args()
    print(
        f"trainyard search: {TRIALS} trials, {PARALLEL} in parallel, on digits, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"
    )
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; plane {args.src}")
    print(f"{load()}\n")
    home = Path(tempfile.mkdtemp(prefix="yard-search-bench-"))
    bench = Search(home, Path(args.src).resolve(), args.seed)
    bench.up()
    results: dict[str, tuple[float, dict[str, Any], list[dict[str, Any]]]] = {}
    try:
        bench.single("warm-up")  # the first pod pays for cold caches (imports, the digits file)
        singles = [bench.single(f"single-{i}") for i in range(args.singles)]
        print("one trial alone: " + ", ".join(f"{s:.2f} s" for s in singles) + f"   ({load()})", flush=True)
        for algorithm in ("random", "tpe"):
            results[algorithm] = bench.search(f"search-{algorithm}", algorithm)
            print(f"{algorithm} search: {results[algorithm][0]:.1f} s   ({load()})", flush=True)
    finally:
        bench.down()
        if args.keep:
            print(f"the plane's home is kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    single = statistics.median(singles)
    bound = TRIALS * single / PARALLEL
    print(f"\nT, one trial alone (median of {len(singles)}): {single:.2f} s")
    print(f"bound {TRIALS} * T / {PARALLEL} = {bound:.1f} s")
    for algorithm, (wall, experiment, trials) in results.items():
        status = experiment["status"]
        counts = f"{status.get('trialsSucceeded', 0)}/{status.get('trials', 0)} succeeded"
        ratio = wall / bound
        shown = f"{ratio:.3f} (goal ≤ {TARGET_RATIO})   {verdict(ratio, TARGET_RATIO, False)}"
        print(f"{algorithm:>6}: wall {wall:6.1f} s, {counts}; wall / bound {shown}")
        own = trial_seconds(trials)
        if own:
            # Two trials at once on two cores run slower than one alone when anything else runs;
            # against the trials' own time the ratio is the search's own cost: gaps between trials.
            busy = sum(own) / PARALLEL
            mean = statistics.mean(own)
            print(f"{'':>8}trials' own time mean {mean:.1f} s; wall / (their sum / 2) {wall / busy:.3f}")
    if len(results) == 2:
        (random_best, random_at), (tpe_best, tpe_at) = best_loss(results["random"][1]), best_loss(results["tpe"][1])
        print(f"\nbest validation loss, random: {random_best:.4f} at {random_at}")
        print(f"best validation loss, TPE:    {tpe_best:.4f} at {tpe_at}")
        print(f"TPE / random: {tpe_best / random_best:.3f} (below 1: TPE found a lower loss with the same budget)")


if __name__ == "__main__":
    main()
