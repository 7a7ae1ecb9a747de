import os, socket, sys, time
import torch
import torch.distributed as dist

t0 = time.time()
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} sum {t.item()} init+ar {time.time()-t0:.2f}s", flush=True)
dist.destroy_process_group()
