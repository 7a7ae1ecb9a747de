"""Static DDP (gloo, CPU) that survives losing its node: checkpoints through trainyard.runtime's
CheckpointManager, so a restarted gang resumes from the last one, on local disk or on S3.

``TRAINYARD_CHECKPOINT_DIR`` says where checkpoints go (a shared directory, or ``s3://bucket/prefix``
with AWS's usual variables); rank 0 writes one every ``--checkpoint-every`` steps (on S3: a local
copy at once, the upload in the background, published by its manifest). Lines it prints, which
the e2e test and ``bench/node_loss.py`` read:

* ``rank R: resumed from step K (world W) time T up S`` or ``rank R: starting from step 0 (world W)
  time T up S``, where ``up`` is how long since the process started;
* ``step N world W loss L time T`` (rank 0), ``checkpoint N`` when one was saved, ``done: N steps``.
"""

from __future__ import annotations

import argparse
import os
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from trainyard.runtime.checkpoints import CheckpointManager

STARTED = time.time()


def uptime() -> float:
    return time.time() - STARTED


def main() -> None:
    parser = argparse.ArgumentParser(description="static DDP with checkpoints that outlive a node")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.1)
    args = parser.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    checkpoints = CheckpointManager(keep=3)

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    start = 0
    state = checkpoints.load_torch_latest(weights_only=True)
    if state is not None:
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
        print(f"rank {rank}: resumed from step {start} (world {world}) time {time.time():.3f} up {uptime():.1f}")
    else:
        print(f"rank {rank}: starting from step 0 (world {world}) time {time.time():.3f} up {uptime():.1f}")
    model = DistributedDataParallel(net)
    loss_fn = nn.MSELoss()
    target = torch.randn(16, 1)
    for step in range(start + 1, args.steps + 1):
        generator = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(32, 16, generator=generator)
        optimizer.zero_grad()
        loss = loss_fn(model(x), x @ target)
        loss.backward()  # all-reduce: fails at once when a peer is gone; the operator restarts the gang
        optimizer.step()
        time.sleep(args.step_seconds)
        if rank == 0:
            print(f"step {step} world {world} loss {loss.item():.4f} time {time.time():.3f}")
            if step % args.checkpoint_every == 0:
                state = {"step": step, "model": net.state_dict(), "optimizer": optimizer.state_dict()}
                checkpoints.save_torch(state, step=step, background=True)
                print(f"checkpoint {step}")
    if rank == 0:
        print(f"done: {args.steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
