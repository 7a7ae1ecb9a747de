"""Elastic data-parallel training under ``torchrun``: survives a worker leaving or joining.

Every process is started by torchrun's elastic agent, which sets RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT for the current rendezvous round. When membership changes (a pod is deleted, a
replacement joins), the agents stop every worker and start them again in a new world; the only
state that survives is the checkpoint rank 0 writes every ``--checkpoint-every`` steps, so each
start resumes from it. Lines it prints, which the e2e test and ``bench/elastic_recovery.py`` read:

* ``rank R: resumed from step K (world W) time T up S`` or ``rank R: starting from step 0 (world W)
  time T up S``, once per start of each process (``T``: Unix time; ``S``: seconds since the
  process started, i.e. its imports, the process group and the checkpoint load);
* ``step S world W loss L time T`` from rank 0 after each step (``T``: Unix time, seconds).

The checkpoint directory must be shared by every worker (the same directory on one machine; a
ReadWriteMany volume on a cluster). The script needs no trainyard import: it runs unchanged
under Kubeflow's Training Operator.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="elastic PyTorch training with checkpoints")
    parser.add_argument("--steps", type=int, default=200, help="total training steps")
    parser.add_argument("--checkpoint-dir", default=os.environ.get("CHECKPOINT_DIR", "/tmp/pytorch-elastic"))
    parser.add_argument("--checkpoint-every", type=int, default=5)
    parser.add_argument("--step-seconds", type=float, default=0.2, help="extra time per step (a stand-in for work)")
    return parser.parse_args()


def uptime() -> float:
    """Seconds since this process started (Linux ``/proc``; NaN elsewhere)."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        since_boot = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")
    return since_boot - ticks / os.sysconf("SC_CLK_TCK")


def load(path: Path) -> dict[str, Any] | None:
    if not path.exists():
        return None
    state: dict[str, Any] = torch.load(path, weights_only=True)
    return state


def save(path: Path, state: dict[str, Any]) -> None:
    """Atomic: a reader (or a restart after a crash mid-write) sees the old file or the new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save(state, tmp)
    tmp.replace(path)


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    directory = Path(args.checkpoint_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "checkpoint.pt"

    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    start = 0
    # Every rank reads the same file; DDP also broadcasts rank 0's weights when it wraps the model.
    state = load(path)
    if state is not None:
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
        print(
            f"rank {rank}: resumed from step {start} (world {world}) time {time.time():.3f} up {uptime():.1f}",
            flush=True,
        )
    else:
        print(f"rank {rank}: starting from step 0 (world {world}) time {time.time():.3f} up {uptime():.1f}", flush=True)
    model = DistributedDataParallel(net)
    loss_fn = nn.MSELoss()
    target = torch.randn(16, 1)

    for step in range(start + 1, args.steps + 1):
        generator = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(32, 16, generator=generator)
        optimizer.zero_grad()
        loss = loss_fn(model(x), x @ target)
        loss.backward()  # all-reduce: fails at once when a peer is gone, and torchrun restarts us
        optimizer.step()
        time.sleep(args.step_seconds)
        if rank == 0:
            print(f"step {step} world {world} loss {loss.item():.4f} time {time.time():.3f}", flush=True)
            if step % args.checkpoint_every == 0:
                save(path, {"step": step, "model": net.state_dict(), "optimizer": optimizer.state_dict()})
    if rank == 0:
        print(f"done: {args.steps} steps", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception:
        # A lost peer fails the next all-reduce at once, but tearing down gloo's threads and
        # sockets at interpreter exit then takes seconds (8 s measured here), and torchrun only
        # restarts the group once this process has exited: report, then exit right away.
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
