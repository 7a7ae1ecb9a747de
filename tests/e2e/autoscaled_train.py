"""Elastic training under ``torchrun`` whose rank 0 reports a metric the autoscaling test drives.

Each start of a training process prints ``rank R world W`` (the world of this rendezvous round);
every step all-reduces a tiny model's gradients (gloo) and rank 0 reports ``queue_depth``, read
from the file ``--metric-file`` (the test writes it), through ``trainyard.runtime`` into the job's
``status.trainingProgress.metrics``. A peer that leaves fails the next all-reduce: the process
exits at once so that torchrun re-rendezvouses the survivors.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainyard import runtime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metric-file", required=True)
    parser.add_argument("--step-seconds", type=float, default=0.5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} world {world}", flush=True)
    model = DistributedDataParallel(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    while True:
        step += 1
        optimizer.zero_grad()
        model(torch.randn(8, 4)).pow(2).mean().backward()
        optimizer.step()
        if rank == 0:
            try:
                depth = float(Path(args.metric_file).read_text().strip() or 0)
            except (OSError, ValueError):
                depth = 0.0
            runtime.report(step=step, metrics={"queue_depth": depth, "world": world})
            print(f"step {step} world {world}", flush=True)
        time.sleep(args.step_seconds)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
