"""Data-parallel training of a small MLP on scikit-learn's digits with PyTorch DDP (gloo, CPU).

The script shows what a PyTorchJob replica does: it reads MASTER_ADDR, MASTER_PORT, WORLD_SIZE
and RANK from the environment, joins the process group, trains on its shard of the data via
DistributedSampler, and averages gradients with DistributedDataParallel. After each epoch rank 0
reports the epoch, loss and accuracy with ``trainyard.runtime.report`` (stdlib only: ``pip install
trainyard`` in the image): under trainyard they show in ``kubectl get pytorchjob`` (PROGRESS, EPOCH,
and LOSS / ACCURACY with ``-o wide``); where no operator says where to report, the calls do nothing.
Without WORLD_SIZE it runs as a single process.
"""

from __future__ import annotations

import argparse
import os
import random

import numpy as np
import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from trainyard import runtime

SEED = 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="PyTorch DDP training on digits")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--batch-size", type=int, default=32)
    return parser.parse_args()


def init_distributed() -> tuple[int, int]:
    if "WORLD_SIZE" in os.environ:
        dist.init_process_group(backend="gloo", init_method="env://")
    else:
        # An in-memory store gives a one-member group, so the code below has a single path.
        dist.init_process_group(backend="gloo", store=dist.HashStore(), rank=0, world_size=1)
    return dist.get_rank(), dist.get_world_size()


def load_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=0, stratify=y)
    # Fit on train only so no test statistics leak into training.
    scaler = StandardScaler().fit(x_train)
    return (
        torch.tensor(scaler.transform(x_train), dtype=torch.float32),
        torch.tensor(y_train, dtype=torch.long),
        torch.tensor(scaler.transform(x_test), dtype=torch.float32),
        torch.tensor(y_test, dtype=torch.long),
    )


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return (model(x).argmax(dim=1) == y).float().mean().item()


def main() -> None:
    args = parse_args()
    # Both ranks may share a 2-core machine; more threads per rank would only oversubscribe it.
    torch.set_num_threads(1)
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)

    rank, world_size = init_distributed()
    master = f"{os.environ.get('MASTER_ADDR', 'local')}:{os.environ.get('MASTER_PORT', '-')}"
    print(f"rank {rank}/{world_size} started (master {master})")

    x_train, y_train, x_test, y_test = load_data()
    train_set = TensorDataset(x_train, y_train)
    # The sampler gives each rank a disjoint shard; the shared seed keeps shards consistent.
    sampler = DistributedSampler(train_set, num_replicas=world_size, rank=rank, shuffle=True, seed=SEED)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    # Same seed on every rank; DDP also broadcasts rank 0's weights, so replicas start equal.
    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    model = DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    for epoch in range(1, args.epochs + 1):
        # Without set_epoch every epoch would reuse the same shuffle order.
        sampler.set_epoch(epoch)
        model.train()
        totals = torch.zeros(2, dtype=torch.float64)
        for xb, yb in loader:
            optimizer.zero_grad()
            loss = loss_fn(model(xb), yb)
            loss.backward()
            optimizer.step()
            totals += torch.tensor([loss.item() * len(yb), len(yb)], dtype=torch.float64)
        local_loss = (totals[0] / totals[1]).item()
        # Weight by sample count so the reported loss is the mean over the whole training set.
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        mean_loss = (totals[0] / totals[1]).item()

        if rank == 0:
            # Parameters are identical on all ranks after each step, so rank 0 can evaluate alone.
            train_acc = accuracy(net, x_train, y_train)
            test_acc = accuracy(net, x_test, y_test)
            print(
                f"epoch {epoch}/{args.epochs} loss={mean_loss:.4f} "
                f"train_accuracy={train_acc:.4f} test_accuracy={test_acc:.4f}"
            )
            # Returns at once: a background thread sends the latest values (rank 0 only by default).
            metrics = {"loss": mean_loss, "accuracy": test_acc, "train_accuracy": train_acc}
            runtime.report(epoch=epoch, total_epochs=args.epochs, metrics={k: round(v, 4) for k, v in metrics.items()})
        else:
            print(f"rank {rank} epoch {epoch} loss={local_loss:.4f}")

    if rank == 0:
        print(f"final test_accuracy={accuracy(net, x_test, y_test):.4f}")
        runtime.flush()  # the last epoch reaches the job's status before the process ends
    # Keep ranks together so none tears down the group while another still uses it.
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
