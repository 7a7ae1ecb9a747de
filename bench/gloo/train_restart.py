"""Attempt 0: rank 1 crashes after the first all_reduce; rank 0's next collective then fails, so both agents
restart. Attempt 1: rank 0 reaches init_process_group RANK0_DELAY s late (as under load)."""

import os
import time

import torch
import torch.distributed as dist

attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
rank = int(os.environ["RANK"])
if attempt >= 1 and rank == 0:
    time.sleep(float(os.environ.get("RANK0_DELAY", "3")))
t0 = time.time()
dist.init_process_group("gloo")
t = torch.tensor([1.0])
dist.all_reduce(t)
print(
    f"attempt {attempt} rank {rank} ok sum {t.item()} master={os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
    flush=True,
)
if attempt == 0:
    if rank == 1:
        os._exit(3)
    time.sleep(1)
    dist.all_reduce(t)  # fails: the peer is gone
dist.destroy_process_group()
