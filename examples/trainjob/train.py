"""Data-parallel softmax regression on scikit-learn's digits: each rank a shard, gradients all-reduced over gloo.

``train()`` is the training function of both paths to a TrainJob in this folder:

* ``sdk_train.py`` hands it to the official Kubeflow SDK, which ships its source in the TrainJob's
  command and runs it with ``torchrun`` on every node;
* ``trainjob.yaml`` carries the same source inline (tests/unit/sdk/test_trainjob_example.py keeps
  the two equal).

Either way its source is pasted into a bash here-document, and Kubernetes expands ``$(VAR)`` in a
container's command, so it has no dollar sign, backquote or backslash, and imports what it uses
inside. ``python train.py`` runs it as one process.
"""


def train():
    import os

    import torch
    import torch.distributed as dist
    from sklearn.datasets import load_digits

    if "WORLD_SIZE" in os.environ:  # under torchrun: the rendezvous comes from the PET_* env
        dist.init_process_group("gloo")
    else:  # one process: an in-memory store gives a one-member group
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    features, labels = load_digits(return_X_y=True)
    x = torch.tensor(features / 16.0, dtype=torch.float32)
    y = torch.tensor(labels)
    # The first 1500 rows train, every world-th one on each rank; the rest test.
    train_x, train_y = x[rank:1500:world], y[rank:1500:world]
    test_x, test_y = x[1500:], y[1500:]
    weights = torch.zeros(64, 10, requires_grad=True)
    bias = torch.zeros(10, requires_grad=True)
    optimizer = torch.optim.SGD([weights, bias], lr=2.0)
    for step in range(1, 101):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(train_x @ weights + bias, train_y)
        loss.backward()
        for param in (weights, bias):
            dist.all_reduce(param.grad)  # the sum over ranks, averaged: one model, trained on all shards
            param.grad /= world
        optimizer.step()
        dist.all_reduce(loss)
        if rank == 0 and step % 25 == 0:
            print(f"step {step} loss {loss.item() / world:.4f}", flush=True)
    with torch.no_grad():
        accuracy = ((test_x @ weights + bias).argmax(dim=1) == test_y).float().mean().item()
    print(f"rank {rank} of {world}: {len(train_y)} training rows, test accuracy {accuracy:.3f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    train()
