"""The walking skeleton through ``kubectl apply`` against raw ``torchrun`` of the same script, interleaved.

The job is ``examples/pytorch-ddp`` (DDP over gloo on scikit-learn's digits, a Master and a
Worker, 10 epochs), on a fresh ``yard up`` (HTTPS, ``--workspace`` this checkout) in a temporary
home, started by ``elastic_recovery``'s driver (its ``--restart-backoff 0.2`` only matters to a
container that fails). Each pair runs, one after the other:

* **apply**: ``kubectl apply -f -`` of the example's manifest (renamed per run), then ``kubectl
  wait --for=condition=Succeeded``: seconds from just before the apply until the wait returns, as
  a user at a terminal sees them; then the job is deleted and its pods waited for, so the next
  run starts on an idle node;
* **torchrun**: ``python -m torch.distributed.run --standalone --nproc-per-node=2 train.py
  --epochs 10`` in the example's directory, with the same interpreter the pods run in (the
  plane's own environment: the example's image maps to no other), without PYTHONPATH and without
  any ``*_NUM_THREADS`` variable, so torchrun sets ``OMP_NUM_THREADS=1`` for its workers itself.

Pairs alternate apply, torchrun, apply, torchrun... (``--pairs``, after ``--warmup`` unmeasured
pairs), and the ratio apply/torchrun is taken pair by pair, which keeps it meaningful when the
machine's speed drifts. Target (issue 35): the median ratio ≤ 1.0. Prints each pair, the medians,
the ratio and the ``ThreadsSet`` events the node recorded on the first run's pods (what it set in
them and why); asserts nothing. ``--src OTHER/src`` runs another checkout's plane (before/after).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from apiserver import load, verdict
from elastic_recovery import Bench

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "pytorch-ddp"
TARGET_RATIO = 1.0
JOB_LABEL = "training.kubeflow.org/job-name"
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")


class Skeleton(Bench):
    """``elastic_recovery``'s driver (``yard up`` in a temporary home, kubectl against it), plus the two runs."""

    def __init__(self, home: Path, src: Path) -> None:
        super().__init__(home, src)
        # What a raw torchrun gets: no PYTHONPATH (pods have none either), no thread counts of ours.
        self.raw = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and k not in THREAD_VARIABLES}

    def apply(self, name: str) -> float:
        body: dict[str, Any] = yaml.safe_load((EXAMPLE / "pytorchjob.yaml").read_text())
        body["metadata"]["name"] = name
        started = time.monotonic()
        self.kubectl("apply", "-f", "-", stdin=json.dumps(body))
        done = self.kubectl(
            "wait", "--for=condition=Succeeded", f"pytorchjob/{name}", "--timeout=600s", check=False, timeout=660
        )
        elapsed = time.monotonic() - started
        if "condition met" not in done:
            raise SystemExit(f"{name} did not succeed:\n{self.kubectl('describe', 'pytorchjob', name, check=False)}")
        return elapsed

    def threads_events(self, name: str) -> list[str]:
        listed = json.loads(self.kubectl("get", "events", "--field-selector", "reason=ThreadsSet", "-o", "json"))
        return sorted(
            f"{e['involvedObject']['name']}: {e['message']}"
            for e in listed["items"]
            if e["involvedObject"]["name"].startswith(f"{name}-")
        )

    def clean(self, name: str) -> None:
        self.kubectl("delete", "pytorchjob", name, "--wait=true", timeout=180)
        self.kubectl("wait", "--for=delete", "pod", "-l", f"{JOB_LABEL}={name}", "--timeout=120s", check=False)

    def torchrun(self) -> float:
        argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
        argv += ["train.py", "--epochs", "10"]
        started = time.monotonic()
        result = subprocess.run(argv, cwd=EXAMPLE, env=self.raw, capture_output=True, text=True, timeout=600)
        elapsed = time.monotonic() - started
        if result.returncode != 0 or "final test_accuracy" not in result.stdout:
            raise SystemExit(f"torchrun failed ({result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
        return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=5, help="measured pairs (apply, then torchrun)")
    parser.add_argument("--warmup", type=int, default=1, help="pairs run first and not counted")
    parser.add_argument("--src", default=str(REPO / "src"), help="the trainyard sources the plane runs")
    parser.add_argument("--keep", action="store_true", help="keep the plane's home (its log, pods) afterwards")
    args = parser.parse_args()
    print(f"trainyard walking skeleton: kubectl apply vs torchrun, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    machine = platform.processor() or platform.machine()
    print(f"machine: {machine}, {os.cpu_count()} cpus, Python {platform.python_version()}; plane {args.src}")
    print(f"{load()}\n")
    home = Path(tempfile.mkdtemp(prefix="yard-skeleton-bench-"))
    bench = Skeleton(home, Path(args.src).resolve())
    bench.up()
    applied: list[float] = []
    raw: list[float] = []
    try:
        for i in range(args.warmup + args.pairs):
            name = f"skeleton-{i}"
            a = bench.apply(name)
            if i == args.warmup:
                events = bench.threads_events(name)
                print("ThreadsSet events on the first measured run's pods:")
                print("\n".join(f"   {line}" for line in events) or "   none (the plane set no thread counts)")
                print()
            bench.clean(name)
            t = bench.torchrun()
            what = "warm-up" if i < args.warmup else f"pair {i - args.warmup + 1}"
            print(f"{what:>8}: apply {a:5.2f} s   torchrun {t:5.2f} s   ratio {a / t:.3f}   ({load()})", flush=True)
            if i >= args.warmup:
                applied.append(a)
                raw.append(t)
    finally:
        bench.down()
        if args.keep:
            print(f"the plane's home is kept: {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    if not applied:
        return
    ratios = [a / t for a, t in zip(applied, raw, strict=True)]
    print()
    for label, samples in (("kubectl apply → Succeeded", applied), ("raw torchrun", raw)):
        spread = f"min {min(samples):.2f}, max {max(samples):.2f}"
        print(f"{label + ':':27}median {statistics.median(samples):.2f} s ({spread})")
    median = statistics.median(ratios)
    shown = f"{median:.3f} (target ≤ {TARGET_RATIO:.1f})   {verdict(median, TARGET_RATIO, False)}"
    print(f"apply / torchrun, median of {len(ratios)} pairs: {shown}")


if __name__ == "__main__":
    main()
