"""The node agents' cost at rest: a plane of 8 idle nodes against a plane of 1, side by side.

Each plane is a real ``yard up`` (``--nodes N``, ``--node-lease-duration 40``: the kubelet's
default, a Lease renewal every 10 s and a status heartbeat every 10 s per node), in a temporary
home, with nothing scheduled. After ``--settle`` seconds, the plane process's CPU (user +
system, ``/proc/<pid>/stat``) is read over ``--seconds``. Prints each plane's share of one core,
what the 7 extra nodes add per node, and the ratio to the goal of issue #38 (8 idle nodes cost at
most 2 % of a core); asserts nothing.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from apiserver import cpu_seconds, load
from node import start_plane

REPO = Path(__file__).resolve().parents[1]
GOAL = 0.02  # of one core, for 8 idle nodes


def measure(nodes: int, src: Path, settle: float, seconds: float) -> float:
    home = Path(tempfile.mkdtemp(prefix=f"yard-bench-idle{nodes}-"))
    plane, yard, env = start_plane(home, src, None, True, ("--nodes", str(nodes)))
    try:
        time.sleep(settle)  # start-up's own work (CRDs, first registrations, caches) done
        before, started = cpu_seconds(plane.pid), time.monotonic()
        time.sleep(seconds)
        return (cpu_seconds(plane.pid) - before) / (time.monotonic() - started)
    finally:
        plane.stop(yard, env)
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long each plane is measured")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds after start before measuring")
    parser.add_argument("--src", type=Path, default=REPO / "src", help="the checkout whose plane runs")
    args = parser.parse_args()
    print(f"idle planes, {args.seconds:.0f} s each after {args.settle:.0f} s to settle ({load()})")
    one = measure(1, args.src, args.settle, args.seconds)
    eight = measure(8, args.src, args.settle, args.seconds)
    per_node = (eight - one) / 7
    print(f"1 node : {one * 100:.2f} % of a core")
    print(
        f"8 nodes: {eight * 100:.2f} % of a core ({eight / one:.2f}x one node; {per_node * 100:.3f} % a node more); "
        f"goal <= {GOAL * 100:.0f} %: {GOAL / eight:.2f}x, {'meets' if eight <= GOAL else 'MISSES'} ({load()})"
    )


if __name__ == "__main__":
    main()
