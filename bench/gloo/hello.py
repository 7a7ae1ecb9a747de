def train(parameters):
    # Runs in each replica under torchrun, which takes its rendezvous from the operator's env.
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print(parameters["greeting"], "from rank", dist.get_rank(), "of", dist.get_world_size(), "sum", total.item())
