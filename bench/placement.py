"""The scheduler's pure decision (``placement.schedule``) on its own: one pass over N pending pods
and 8 nodes (2 zones), with 200 pods already bound, for pods of four kinds:

* ``plain``: one CPU each, nothing else;
* ``anti``: jobs of 8 workers, each worker keeping off nodes with a sibling (hostname
  anti-affinity on its job's label), so each job lands one worker per node;
* ``spread``: a zone spread constraint (DoNotSchedule, maxSkew 1) over every pod of one app;
* ``refused``: pods that fit nowhere (the verdict shared by pods of one template).

Prints milliseconds per pass and microseconds per pod for N = 200 and 1,000 and their ratio per
pod (linear: about 1.0). Runs against whatever ``trainyard`` is importable (set PYTHONPATH to a
checkout to compare two); the kinds that checkout's scheduler does not know are skipped.
Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from trainyard.cluster.clients.scheduler.placement import schedule
from trainyard.cluster.clients.scheduler.snapshot import NodeInfo, PodInfo, pod_info, usage

NODES = [
    NodeInfo(
        f"n{i}",
        {"cpu": 1_000_000, "memory": 2**40, "pods": 1000},
        {"kubernetes.io/hostname": f"n{i}", "topology.kubernetes.io/zone": f"z{i % 2}"},
    )
    for i in range(8)
]


def manifest(name: str, labels: dict[str, str], cpu: str = "1", node: str = "", **spec: Any) -> PodInfo:
    obj = {
        "metadata": {"name": name, "namespace": "ns", "uid": name, "labels": labels, "creationTimestamp": name},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}], **spec},
        "status": {"phase": "Running" if node else "Pending"},
    }
    if node:
        obj["spec"]["nodeName"] = node
    return pod_info(obj)


def plain(i: int) -> PodInfo:
    return manifest(f"p{i:05d}", {"app": "plain"})


def anti(i: int) -> PodInfo:
    job = f"j{i // 8}"
    rule = {"labelSelector": {"matchLabels": {"job": job}}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [rule]}}
    return manifest(f"a{i:05d}", {"job": job, "index": str(i % 8)}, affinity=affinity)


def spread(i: int) -> PodInfo:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "s"}},
    }
    return manifest(f"s{i:05d}", {"app": "s", "index": str(i)}, topologySpreadConstraints=[constraint])


def refused(i: int) -> PodInfo:
    return manifest(f"r{i:05d}", {"app": "r", "index": str(i)}, cpu="2000")


KINDS: dict[str, Callable[[int], PodInfo]] = {"plain": plain, "anti": anti, "spread": spread, "refused": refused}


def bound() -> list[PodInfo]:
    return [manifest(f"b{i:05d}", {"app": "bound"}, node=f"n{i % 8}") for i in range(200)]


def one_pass(kind: str, count: int, rounds: int) -> float:
    pods = [KINDS[kind](i) for i in range(count)]
    if kind in ("anti", "spread") and not hasattr(pods[0], "terms"):
        raise LookupError(kind)
    placed = bound()
    running: dict[str, dict[str, PodInfo]] = {}
    for p in placed:
        running.setdefault(p.node_name, {})[p.uid] = p
    used = usage(NODES, placed)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        decision = schedule(NODES, used, pods, {}, {}, running)
        times.append(time.perf_counter() - start)
    expected = 0 if kind == "refused" else count
    if len(decision.bindings) != expected:
        raise AssertionError(f"{kind}: {len(decision.bindings)} of {count} placed")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'kind':8} {'N':>6} {'ms/pass':>9} {'us/pod':>8}")
    for kind in KINDS:
        per_pod = {}
        try:
            for count in (200, 1000):
                seconds = one_pass(kind, count, args.rounds)
                per_pod[count] = seconds / count
                print(f"{kind:8} {count:>6} {seconds * 1000:>9.1f} {per_pod[count] * 1e6:>8.1f}")
        except LookupError:
            print(f"{kind:8}  (not known to this scheduler)")
            continue
        print(f"{kind:8} per-pod cost 1,000 / 200: {per_pod[1000] / per_pod[200]:.2f}x")


if __name__ == "__main__":
    main()
