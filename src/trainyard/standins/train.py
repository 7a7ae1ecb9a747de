"""The stand-in trainer of a TrainingJob that gives no command: small, real, data-parallel training.

``python -m trainyard.standins.train --model M --dataset D --epochs N ...`` is what the
TrainingJob compiler (``frameworks.trainingjob``) runs when a TrainingJob has neither ``command``
nor ``args``. The seed's model and dataset names stand for networks and data no laptop trains in
seconds, so each is mapped to a small stand-in that trains for real, on CPU, with torch:

* datasets: every name (``mnist``, ``imagenet``, ``squad``, ``wikitext``, ``wiki text``, ...) is
  scikit-learn's ``load_digits`` (1797 8x8 images, 10 classes; it ships inside scikit-learn, so
  nothing is downloaded), split 75/25 with a fixed seed;
* models: ``cnn`` / ``lenet`` → two 3x3 convolutions and a linear head; ``resnet*`` → a small
  residual network (two residual blocks); ``bert*`` / ``gpt*`` / ``*transformer*`` / ``t5*`` /
  ``llama*`` → one transformer encoder layer over the image's 8 rows as tokens; anything else →
  a two-layer MLP. The printed first line says which stand-ins were chosen.

It joins a gloo process group from whichever framework's env the pod has (PyTorchJob's
``MASTER_ADDR``/``RANK``/``WORLD_SIZE``, TFJob's ``TF_CONFIG``, JAXJob's ``COORDINATOR_ADDRESS``/
``PROCESS_ID``/``NUM_PROCESSES``; ``TRAINYARD_DIST_BACKEND`` nccl falls back to gloo without CUDA),
shards the data with ``DistributedSampler``, averages gradients with DDP, reports every epoch's
loss and (test) accuracy through ``trainyard.runtime.report`` and, with
``TRAINYARD_CHECKPOINT_DIR``, saves through ``CheckpointManager`` every
``TRAINYARD_CHECKPOINT_FREQUENCY`` epochs (keeping ``TRAINYARD_CHECKPOINT_KEEP``) and resumes from
``TRAINYARD_RESUME_FROM`` or that directory's latest. Hyperparameters honoured: epochs, batch size,
learning rate, optimizer (adam, sgd, adamw, rmsprop), warmup steps (linear), gradient accumulation
steps, mixed precision (bfloat16 autocast on CPU).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
import torch
import torch.distributed as dist
import typer
from sklearn.datasets import load_digits  # type: ignore[import-untyped]
from sklearn.model_selection import train_test_split  # type: ignore[import-untyped]
from sklearn.preprocessing import StandardScaler  # type: ignore[import-untyped]
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from trainyard import runtime
from trainyard.runtime.s3store import CheckpointStorageError

SEED = 0
TRANSFORMERS = ("bert", "gpt", "transformer", "t5", "llama", "roberta", "vit")


@dataclass(frozen=True)
class Hyperparameters:
    model: str
    dataset: str
    epochs: int
    batch_size: int
    learning_rate: float | None
    optimizer: str
    warmup_steps: int
    gradient_accumulation_steps: int
    mixed_precision: bool


def _command(
    model: Annotated[str, typer.Option(envvar="MODEL_NAME", show_envvar=False)] = "mlp",
    dataset: Annotated[str, typer.Option(envvar="DATASET_NAME", show_envvar=False)] = "digits",
    epochs: Annotated[int, typer.Option(envvar="EPOCHS", show_envvar=False)] = 10,
    batch_size: Annotated[int, typer.Option(envvar="BATCH_SIZE", show_envvar=False)] = 32,
    learning_rate: Annotated[float | None, typer.Option()] = None,
    optimizer: Annotated[str, typer.Option(envvar="OPTIMIZER", show_envvar=False)] = "adam",
    warmup_steps: Annotated[int, typer.Option()] = 0,
    gradient_accumulation_steps: Annotated[int, typer.Option()] = 1,
    mixed_precision: Annotated[bool, typer.Option("--mixed-precision")] = False,
) -> None:
    train(
        Hyperparameters(
            model=model,
            dataset=dataset,
            epochs=epochs,
            batch_size=batch_size,
            learning_rate=learning_rate,
            optimizer=optimizer,
            warmup_steps=warmup_steps,
            gradient_accumulation_steps=gradient_accumulation_steps,
            mixed_precision=mixed_precision,
        )
    )


class Residual(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = torch.relu(x + self.body(x))
        return out


class RowTransformer(nn.Module):
    """The 8x8 image as 8 tokens of 8 features, one encoder layer, mean-pooled."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 32)
        self.position = nn.Parameter(torch.zeros(8, 32))
        self.encoder = nn.TransformerEncoderLayer(32, nhead=4, dim_feedforward=64, batch_first=True, dropout=0.0)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(x.view(-1, 8, 8)) + self.position
        out: torch.Tensor = self.head(self.encoder(tokens).mean(dim=1))
        return out


def stand_in_model(name: str) -> tuple[str, nn.Module]:
    lowered = name.lower()
    if lowered.startswith(("cnn", "lenet", "conv")):
        net = nn.Sequential(
            nn.Unflatten(1, (1, 8, 8)),
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(16 * 64, 10),
        )
        return "small CNN (2 conv layers)", net
    if lowered.startswith("resnet"):
        return "small residual net (2 blocks)", nn.Sequential(
            nn.Linear(64, 64), Residual(64), Residual(64), nn.Linear(64, 10)
        )
    if any(word in lowered for word in TRANSFORMERS):
        return "one-layer transformer over image rows", RowTransformer()
    return "two-layer MLP", nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))


def rendezvous(environ: Any = os.environ) -> tuple[str, int, int, int] | None:
    """(address, port, rank, world size) from PyTorchJob's, TFJob's or JAXJob's env; None: one process."""
    if "MASTER_ADDR" in environ and "WORLD_SIZE" in environ:
        return environ["MASTER_ADDR"], int(environ["MASTER_PORT"]), int(environ["RANK"]), int(environ["WORLD_SIZE"])
    if "TF_CONFIG" in environ:
        config = json.loads(environ["TF_CONFIG"])
        workers = config.get("cluster", {}).get("worker") or []
        if len(workers) > 1:
            host, _, port = workers[0].rpartition(":")
            return host, int(port), int(config["task"]["index"]), len(workers)
        return None
    if "COORDINATOR_ADDRESS" in environ and int(environ.get("NUM_PROCESSES", "1")) > 1:
        return (
            environ["COORDINATOR_ADDRESS"],
            int(environ["COORDINATOR_PORT"]),
            int(environ["PROCESS_ID"]),
            int(environ["NUM_PROCESSES"]),
        )
    return None


def init_distributed() -> tuple[int, int]:
    wanted = os.environ.get("TRAINYARD_DIST_BACKEND", "gloo")
    backend = "nccl" if wanted == "nccl" and torch.cuda.is_available() else "gloo"
    if wanted != backend:
        print(f"backend {wanted} needs CUDA; using gloo", flush=True)
    point = rendezvous()
    if point is None:
        # An in-memory store gives a one-member group, so the training loop has a single path.
        store = dist.HashStore()  # type: ignore[attr-defined]
        dist.init_process_group(backend="gloo", store=store, rank=0, world_size=1)
    else:
        address, port, rank, world = point
        dist.init_process_group(backend=backend, init_method=f"tcp://{address}:{port}", rank=rank, world_size=world)
    return dist.get_rank(), dist.get_world_size()


def load_data() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.25, random_state=SEED, stratify=y)
    scaler = StandardScaler().fit(x_train)
    return (
        torch.tensor(scaler.transform(x_train), dtype=torch.float32),
        torch.tensor(y_train, dtype=torch.long),
        torch.tensor(scaler.transform(x_test), dtype=torch.float32),
        torch.tensor(y_test, dtype=torch.long),
    )


def make_optimizer(name: str, params: Any, lr: float | None) -> torch.optim.Optimizer:
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr or 0.05, momentum=0.9)
    if name == "rmsprop":
        return torch.optim.RMSprop(params, lr=lr or 0.001)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr or 0.001)
    return torch.optim.Adam(params, lr=lr or 0.001)


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> float:
    model.eval()
    return float((model(x).argmax(dim=1) == y).float().mean().item())


def checkpoints() -> runtime.CheckpointManager | None:
    directory = os.environ.get("TRAINYARD_CHECKPOINT_DIR")
    if not directory:
        if os.environ.get("TRAINYARD_CHECKPOINT_URI"):
            print(f"checkpoints to {os.environ['TRAINYARD_CHECKPOINT_URI']}: the stand-in writes none there")
        return None
    return runtime.CheckpointManager(directory)


def main(argv: list[str] | None = None) -> None:
    """Train with ``argv``'s flags (default: this process's; the environment gives some defaults)."""
    app = typer.Typer(
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.command(help="trainyard's stand-in trainer (digits, small networks)")(_command)
    try:
        typer.main.get_command(app).main(args=argv, prog_name="python -m trainyard.standins.train")
    except CheckpointStorageError as error:  # its message names the cause and the fix: no traceback
        raise SystemExit(f"checkpoints: {error}") from None


def train(args: Hyperparameters) -> None:
    torch.set_num_threads(1)  # ranks share the machine's cores
    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    rank, world = init_distributed()
    described, net = stand_in_model(args.model)
    if rank == 0:
        print(f"model {args.model!r} -> {described}; dataset {args.dataset!r} -> scikit-learn digits", flush=True)
    x_train, y_train, x_test, y_test = load_data()
    train_set = TensorDataset(x_train, y_train)
    sampler: DistributedSampler[Any] = DistributedSampler(
        train_set, num_replicas=world, rank=rank, shuffle=True, seed=SEED
    )
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)
    model = DistributedDataParallel(net)
    optimizer = make_optimizer(args.optimizer, model.parameters(), args.learning_rate)
    base_lrs = [group["lr"] for group in optimizer.param_groups]
    manager = checkpoints()
    first = 1
    state = manager.load_torch_latest(weights_only=True) if manager is not None else None
    if state is not None:
        net.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        first = int(state["epoch"]) + 1
        print(f"rank {rank}: resumed after epoch {state['epoch']}", flush=True)
    frequency = int(os.environ.get("TRAINYARD_CHECKPOINT_FREQUENCY", "1"))
    accumulate = max(1, args.gradient_accumulation_steps)
    loss_fn = nn.CrossEntropyLoss()
    step = 0
    for epoch in range(first, args.epochs + 1):
        sampler.set_epoch(epoch)
        model.train()  # type: ignore[no-untyped-call]
        totals = torch.zeros(2, dtype=torch.float64)
        for i, (xb, yb) in enumerate(loader):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.mixed_precision):
                loss = loss_fn(model(xb), yb)
            (loss / accumulate).backward()
            if (i + 1) % accumulate == 0 or i + 1 == len(loader):
                step += 1
                scale = min(1.0, step / args.warmup_steps) if args.warmup_steps else 1.0
                for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
                    group["lr"] = base * scale
                optimizer.step()
                optimizer.zero_grad()
            totals += torch.tensor([loss.item() * len(yb), len(yb)], dtype=torch.float64)
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
        mean_loss = float((totals[0] / totals[1]).item())
        test_accuracy = accuracy(net, x_test, y_test)
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs} loss={mean_loss:.4f} accuracy={test_accuracy:.4f}", flush=True)
        runtime.report(epoch=epoch, total_epochs=args.epochs, metrics={"loss": mean_loss, "accuracy": test_accuracy})
        if manager is not None and (epoch % frequency == 0 or epoch == args.epochs):
            state = {"model": net.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}
            manager.save_torch(state, epoch=epoch)
    runtime.flush()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
