"""Elastic recovery against a real ``yard up``: seconds from losing a worker to training again.

The plane runs as ``yard up`` would start it, in a temporary home. Each run submits
``examples/pytorch-elastic`` (3 Workers, ``minReplicas: 2``, ``maxReplicas: 4``, c10d, one process
per pod, a checkpoint every 5 steps, 0.2 s per step), waits until training passed step 12, then
loses one worker (``--how delete``: ``kubectl delete pod``; ``--how kill``: SIGKILL every process
of its container; ``--how node``: on a plane of 3 nodes with one worker each, the worker's node
stops, as ``yard node stop`` stops it: heartbeats end, every process there is killed) and reads the
training script's own stamped lines from ``kubectl logs``:

* *kill → new round*: until the survivors' agents closed their first rendezvous round after the
  loss (torchrun's own ``Rendezvous complete`` log line, ``LOGLEVEL=INFO``): failure detection,
  the dead node's heartbeat expiry and the last call; and how many rounds they went through until
  the replacement was in (2 when it arrived after the survivors' round: one more restart);
* *kill → new training processes*: until the survivors' agents started their training processes
  again (detection, the new rendezvous round); the processes' own *start-up* (imports, process
  group, checkpoint load) is reported apart, from their ``resumed ... up S`` line;
* *kill → first step*: until the first training step after that restart (the figure of issue #12);
* *kill → replacement in*: until the replacement's own training process started (it joined a
  rendezvous), and the job's end (not with ``--how node``: the lost pod stays bound to the dead
  node until the node lifecycle controller evicts it, and the survivors finish without it);
* *steps lost*: the best step before the loss less the step the survivors resumed from (at most
  the checkpoint interval, 5, is the goal).

Runs are made for a non-zero worker (worker-2) and for worker-0 (the one upstream's layout makes
the rendezvous host). The target is training again within 15 s plus the script's start-up
(measured by the process itself). Prints figures and their ratio to it; asserts nothing. Needs
``kubectl`` on PATH.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
MANIFEST = REPO / "examples" / "pytorch-elastic" / "pytorchjob.yaml"
TARGET_S = 15.0
STARTED = re.compile(
    r"^rank \d+: (?:resumed from step (\d+)|starting from step 0) \(world \d+\) time ([\d.]+) up ([\d.na]+)$", re.M
)
# torchrun's own log line (LOGLEVEL=INFO) when a round closes: glog-style, local time.
ROUND = re.compile(r"^I(\d{4}) (\d\d:\d\d:\d\d\.\d+) +\d+ \S+\] \[default\] Rendezvous complete for workers", re.M)
STEP = re.compile(r"^step (\d+) world (\d+) loss \S+ time ([\d.]+)$", re.M)


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f}/{five:.2f} (1/5 min, {os.cpu_count()} cpus)"


class Bench:
    def __init__(self, home: Path, src: Path, nodes: int = 1) -> None:
        self.home = home
        self.nodes = nodes
        self.lost = ""  # the pod the last run lost
        self.env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        self.yard = [sys.executable, "-m", "trainyard.cli.main", "--home", str(home)]
        self.kube = {**os.environ, "KUBECONFIG": str(home / "kubeconfig"), "KUBECACHEDIR": str(home / "kube-cache")}

    def up(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        argv = [*self.yard, "up", "--port", str(port), "--workspace", str(REPO), "--restart-backoff", "0.2"]
        if self.nodes > 1:
            argv += ["--nodes", str(self.nodes)]
        subprocess.run(argv, check=True, env=self.env, cwd=REPO, capture_output=True)

    def down(self) -> None:
        subprocess.run([*self.yard, "down"], check=False, env=self.env, cwd=REPO, capture_output=True)

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 120) -> str:
        result = subprocess.run(
            ["kubectl", *args], capture_output=True, text=True, env=self.kube, input=stdin, cwd=REPO, timeout=timeout
        )
        if check and result.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {result.stderr}")
        return result.stdout if result.returncode == 0 else ""

    def logs(self, pod: str) -> str:
        return self.kubectl("logs", pod, check=False)

    def pod(self, name: str) -> dict[str, Any] | None:
        out = self.kubectl("get", "pod", name, "-o", "json", check=False)
        return json.loads(out) if out else None

    def until(self, probe: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := probe():
                return found
            time.sleep(0.2)
        raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")

    def kill_container(self, pod: dict[str, Any]) -> None:
        m = pod["metadata"]
        state = self.home / "pods" / f"default_{m['name']}_{m['uid']}" / "state" / "pytorch.json"
        root = json.loads(state.read_text())["pid"]
        parents: dict[int, int] = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
        doomed, frontier = {root}, [root]
        while frontier:
            parent = frontier.pop()
            kids = [p for p, pp in parents.items() if pp == parent and p not in doomed]
            doomed.update(kids)
            frontier += kids
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def run(self, name: str, victim: int, how: str, checkpoints: Path) -> dict[str, float]:
        body: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
        body["metadata"] = {"name": name}
        spec = body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
        spec["terminationGracePeriodSeconds"] = 5
        (container,) = spec["containers"]
        container["env"] = [e for e in container["env"] if e["name"] != "CHECKPOINT_DIR"]
        container["env"].append({"name": "CHECKPOINT_DIR", "value": str(checkpoints)})
        container["args"] = ["--steps", "80", "--step-seconds", "0.2"]
        container["env"].append({"name": "LOGLEVEL", "value": "INFO"})  # torchrun logs each round
        if how == "node":  # one worker per node (a hard spread: the rendezvous pod, no replica, goes anywhere)
            workers_only = {
                "matchLabels": {"training.kubeflow.org/job-name": name},
                "matchExpressions": [{"key": "training.kubeflow.org/replica-type", "operator": "Exists"}],
            }
            spec["topologySpreadConstraints"] = [
                {
                    "maxSkew": 1,
                    "topologyKey": "kubernetes.io/hostname",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": workers_only,
                }
            ]
        workers = [f"{name}-worker-{i}" for i in range(3)]
        lost = workers[victim]
        submitted = time.time()
        self.kubectl("create", "-f", "-", stdin=json.dumps(body))

        def best_step() -> int:
            return max((int(m[1]) for w in workers for m in STEP.finditer(self.logs(w))), default=0) >= 12

        self.until(best_step, 600, "training past step 12")
        trained_at = time.time()
        if how == "node":
            # Not the node of the job's rendezvous pod: losing it ends every round (bench the pod apart).
            rdzv = (self.pod(f"{name}-rdzv") or {}).get("spec", {}).get("nodeName")
            order = [workers[victim], *(w for w in workers if w != workers[victim])]
            lost = next(w for w in order if (self.pod(w) or {}).get("spec", {}).get("nodeName") != rdzv)
        before = self.pod(lost)
        assert before is not None
        killed = time.time()
        reached = max((int(m[1]) for w in workers for m in STEP.finditer(self.logs(w))), default=0)
        if how == "delete":
            self.kubectl("delete", "pod", lost, "--wait=false")
        elif how == "node":
            self.kubectl("annotate", "node", before["spec"]["nodeName"], "trainyard.dev/power=off")
        else:
            self.kill_container(before)
        survivors = [w for w in workers if w != lost]
        self.lost = lost

        def restarted() -> tuple[float, float] | None:
            found = [
                (float(m[2]), float(m[3]))
                for w in survivors
                for m in STARTED.finditer(self.logs(w))
                if float(m[2]) > killed
            ]
            return min(found) if found else None

        restart, startup = self.until(restarted, 300, "the survivors restarting")
        year = time.localtime().tm_year
        rounds = sorted(
            t
            for w in survivors
            for m in ROUND.finditer(self.logs(w))
            if (t := time.mktime(time.strptime(f"{year}{m[1]} {m[2][:8]}", "%Y%m%d %H:%M:%S")) + float(m[2][8:]))
            > killed
        )

        def first_step() -> float | None:
            times = [float(m[3]) for w in survivors for m in STEP.finditer(self.logs(w)) if float(m[3]) > restart]
            return min(times) if times else None

        step = self.until(first_step, 300, "a step after the restart")
        resumed = min(
            (int(m[1] or 0) for w in survivors for m in STARTED.finditer(self.logs(w)) if float(m[2]) > killed),
            default=0,
        )
        if how == "node":
            self.kubectl("delete", "pytorchjob", name, "--wait=false")
            self.kubectl("annotate", "node", before["spec"]["nodeName"], "trainyard.dev/power-")
            nan = float("nan")
            return {
                "to_training": trained_at - submitted,
                "spawned": restart - startup - killed,
                "round": (rounds[0] - killed) if rounds else nan,
                "rounds": float(len(rounds)) / len(survivors),
                "startup": startup,
                "restarted": restart - killed,
                "first_step": step - killed,
                "replacement": nan,
                "job": nan,
                "lost": float(reached - resumed),
            }

        def replacement() -> float | None:
            now = self.pod(lost)
            if now is None or (how == "delete" and now["metadata"]["uid"] == before["metadata"]["uid"]):
                return None
            times = [float(m[2]) for m in STARTED.finditer(self.logs(lost)) if float(m[2]) > killed]
            return min(times) if times else None

        joined = self.until(replacement, 300, "the replacement training")

        def succeeded() -> bool:
            job = json.loads(self.kubectl("get", "pytorchjob", name, "-o", "json"))
            return any(c["type"] == "Succeeded" and c["status"] == "True" for c in job["status"].get("conditions", []))

        self.until(succeeded, 600, "the job Succeeded")
        done = time.time()
        self.kubectl("delete", "pytorchjob", name, "--wait=false")
        return {
            "to_training": trained_at - submitted,
            "spawned": restart - startup - killed,
            "round": (rounds[0] - killed) if rounds else float("nan"),
            "rounds": float(len(rounds)) / len(survivors),
            "startup": startup,
            "restarted": restart - killed,
            "first_step": step - killed,
            "replacement": joined - killed,
            "job": done - submitted,
            "lost": float(reached - resumed),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--how", choices=["delete", "kill", "node"], default="delete")
    parser.add_argument("--runs", type=int, default=1, help="runs per victim")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the checkout whose plane runs")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="yard-bench-elastic-"))
    bench = Bench(home, args.src, nodes=3 if args.how == "node" else 1)
    print(f"target: training again within {TARGET_S:.0f} s of the loss plus the script's start-up ({load()})")
    bench.up()
    try:
        for victim in (2, 0):
            for run in range(args.runs):
                name = f"elastic-{args.how}-w{victim}-{run}"
                f = bench.run(name, victim, args.how, home / "checkpoints" / name)
                net = f["first_step"] - f["startup"]
                print(
                    f"{args.how} {bench.lost} (run {run + 1}): kill -> new round {f['round']:.1f} s "
                    f"({f['rounds']:.0f} rounds until the replacement was in), -> new training processes "
                    f"{f['spawned']:.1f} s, their start-up (imports, process group, checkpoint) "
                    f"{f['startup']:.1f} s, -> first step {f['first_step']:.1f} s; less start-up {net:.1f} s "
                    f"({TARGET_S / net:.2f}x target, {'meets' if net <= TARGET_S else 'MISSES'}); "
                    f"steps lost {f['lost']:.0f} (checkpoint every 5); "
                    f"replacement training {f['replacement']:.1f} s after the kill; "
                    f"job {f['job']:.1f} s (training from {f['to_training']:.1f} s); {load()}",
                    flush=True,
                )
    finally:
        bench.down()
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
