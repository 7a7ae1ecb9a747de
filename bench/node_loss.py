"""A static job losing its node to a spot reclaim, on a real 3-node ``yard up``: seconds until it
trains again from its S3 checkpoint, and the work lost.

``examples/pytorch-spot`` (a Master and a Worker on nodes of their own, a checkpoint every 5
steps of 0.1 s, on S3: a real moto server, each pod with a cache of its own so that a restarted
pod reads S3) trains past step 20; then the Worker's node gets a spot notice of ``--notice``
seconds (``yard node preempt``). Measured from the notice's deadline (the moment the cloud takes
the machine):

* *deadline → gang restarted*: until the new Master's training process printed its ``resumed``
  line (the graceful shutdown, the operator's gang restart, scheduling on the nodes left, the
  process start-up and the checkpoint's download), with the process's own start-up apart;
* *deadline → first step*: until the first training step after it (goal of issue #38: ≤ 20 s);
* *steps lost*: the last step the old Master printed less the step resumed from (goal: at most
  the checkpoint interval, 5).

Prints figures and their ratio to the goals; asserts nothing. Needs ``kubectl`` on PATH and
moto's server (``make install``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml
from elastic_recovery import Bench, load

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from s3server import moto_server  # noqa: E402

MANIFEST = REPO / "examples" / "pytorch-spot" / "pytorchjob.yaml"
GOAL_S = 20.0
INTERVAL = 5
STARTED = re.compile(
    r"^rank 0: (?:resumed from step (\d+)|starting from step 0) \(world \d+\) time ([\d.]+) up ([\d.]+)$", re.M
)
STEP = re.compile(r"^step (\d+) world \d+ loss \S+ time ([\d.]+)$", re.M)


def manifest(name: str, endpoint: str, cache: Path) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    body["metadata"] = {"name": name}
    for replica in body["spec"]["pytorchReplicaSpecs"].values():
        template = replica["template"]
        template["metadata"]["labels"] = {"app": name}
        term = template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        term["labelSelector"] = {"matchLabels": {"app": name}}
        (container,) = template["spec"]["containers"]
        container["args"] = ["--steps", "600", "--step-seconds", "0.1"]
        container["env"] = [e for e in container["env"] if e["name"] != "TRAINYARD_CHECKPOINT_DIR"] + [
            {"name": "TRAINYARD_CHECKPOINT_DIR", "value": f"s3://bench/{name}"},
            {"name": "AWS_ENDPOINT_URL", "value": endpoint},
            {"name": "AWS_ACCESS_KEY_ID", "value": "k"},
            {"name": "AWS_SECRET_ACCESS_KEY", "value": "s"},
            {"name": "AWS_DEFAULT_REGION", "value": "us-east-1"},
            {"name": "POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
            {"name": "TRAINYARD_CHECKPOINT_CACHE", "value": str(cache / "$(POD_UID)")},
        ]
    return body


def run(bench: Bench, name: str, endpoint: str, notice: float) -> dict[str, float]:
    bench.kubectl("create", "-f", "-", stdin=json.dumps(manifest(name, endpoint, bench.home / "cache")))
    master = f"{name}-master-0"

    def trained() -> bool:
        return max((int(m[1]) for m in STEP.finditer(bench.logs(master))), default=0) >= 20

    bench.until(trained, 600, "training past step 20")
    old = bench.pod(master)
    worker = bench.pod(f"{name}-worker-0")
    assert old is not None and worker is not None
    node = worker["spec"]["nodeName"]
    deadline = datetime.now(UTC) + timedelta(seconds=notice)
    bench.kubectl("annotate", "node", node, f"trainyard.dev/preemption-notice={deadline:%Y-%m-%dT%H:%M:%S}Z")
    at = deadline.replace(microsecond=0).timestamp()
    last = 0

    def replaced() -> bool:
        nonlocal last
        now = bench.pod(master)
        if now is not None and now["metadata"]["uid"] == old["metadata"]["uid"]:
            last = max([last, *(int(m[1]) for m in STEP.finditer(bench.logs(master)))])
            return False
        return now is not None

    bench.until(replaced, 300, "the Master recreated")

    def resumed() -> tuple[int, float, float] | None:
        found = [(int(m[1] or 0), float(m[2]), float(m[3])) for m in STARTED.finditer(bench.logs(master))]
        return found[0] if found else None

    step, when, startup = bench.until(resumed, 300, "the restarted Master resuming")

    def first_step() -> float | None:
        times = [float(m[2]) for m in STEP.finditer(bench.logs(master)) if float(m[2]) > when]
        return min(times) if times else None

    stepped = bench.until(first_step, 300, "a step after the restart")
    bench.kubectl("delete", "pytorchjob", name, "--wait=false")
    return {"restarted": when - at, "startup": startup, "first_step": stepped - at, "lost": float(last - step)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notice", type=float, default=2.0, help="seconds of spot notice")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the checkout whose plane runs")
    args = parser.parse_args()
    import boto3

    home = Path(tempfile.mkdtemp(prefix="yard-bench-node-loss-"))
    bench = Bench(home, args.src, nodes=3)
    print(f"goal: training again within {GOAL_S:.0f} s of the reclaim, at most {INTERVAL} steps lost ({load()})")
    bench.up()
    try:
        with moto_server() as endpoint:
            boto3.client(
                "s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s", region_name="us-east-1"
            ).create_bucket(Bucket="bench")
            f = run(bench, "spot-bench", endpoint, args.notice)
            print(
                f"spot reclaim of the Worker's node ({args.notice:.0f} s notice): deadline -> gang resumed from S3 "
                f"{f['restarted']:.1f} s (its start-up {f['startup']:.1f} s), -> first step {f['first_step']:.1f} s "
                f"({GOAL_S / f['first_step']:.2f}x goal, {'meets' if f['first_step'] <= GOAL_S else 'MISSES'}); "
                f"steps lost {f['lost']:.0f} (interval {INTERVAL}: {'meets' if f['lost'] <= INTERVAL else 'MISSES'}); "
                f"{load()}",
                flush=True,
            )
    finally:
        bench.down()


if __name__ == "__main__":
    main()
