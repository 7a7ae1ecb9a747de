"""The distributed-training environment a replica was started with, read from its variables.

Works the same under trainyard and Kubeflow: it only reads what the operator injects
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, torchrun's ``LOCAL_RANK``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainingEnv:
    rank: int
    world_size: int
    local_rank: int
    master_addr: str | None
    master_port: int | None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_master(self) -> bool:
        """Rank 0 writes checkpoints and reports metrics."""
        return self.rank == 0

    @property
    def init_method(self) -> str:
        if self.master_addr is None or self.master_port is None:
            raise RuntimeError("MASTER_ADDR and MASTER_PORT are not set: this process was not started as a replica")
        return f"tcp://{self.master_addr}:{self.master_port}"

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> TrainingEnv:
        env = os.environ if environ is None else environ

        def number(name: str, default: int) -> int:
            raw = env.get(name, "")
            try:
                return int(raw) if raw else default
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not an integer") from None

        port = env.get("MASTER_PORT")
        return cls(
            rank=number("RANK", 0),
            world_size=number("WORLD_SIZE", 1),
            local_rank=number("LOCAL_RANK", 0),
            master_addr=env.get("MASTER_ADDR"),
            master_port=number("MASTER_PORT", 0) if port else None,
        )


def global_rank(environ: Mapping[str, str] | None = None) -> int:
    """This process's rank across the whole job, from whichever variables its operator injected.

    Checked in order: ``RANK`` (PyTorchJob, XGBoostJob, torchrun), ``PET_NODE_RANK`` times
    ``PET_NPROC_PER_NODE`` plus ``LOCAL_RANK`` (a torchrun launcher before it sets ``RANK``),
    ``OMPI_COMM_WORLD_RANK`` (MPIJob), ``JAX_PROCESS_ID`` (JAXJob), ``DMLC_TASK_ID`` (XGBoost's
    rabit). A process with none of them, or with values that are not integers, is rank 0: a
    single-process run reports like a master.
    """
    env = os.environ if environ is None else environ

    def number(name: str) -> int | None:
        raw = env.get(name, "").strip()
        try:
            return int(raw) if raw else None
        except ValueError:
            return None

    rank = number("RANK")
    if rank is not None:
        return rank
    node_rank = number("PET_NODE_RANK")
    if node_rank is not None:
        # PET_NPROC_PER_NODE may be "auto" or "gpu": then only node 0's local rank 0 is rank 0.
        nproc = number("PET_NPROC_PER_NODE")
        local = number("LOCAL_RANK") or 0
        if nproc is not None:
            return node_rank * nproc + local
        return 0 if node_rank == 0 and local == 0 else max(node_rank, 1)
    for name in ("OMPI_COMM_WORLD_RANK", "JAX_PROCESS_ID", "DMLC_TASK_ID"):
        rank = number(name)
        if rank is not None:
            return rank
    return 0
