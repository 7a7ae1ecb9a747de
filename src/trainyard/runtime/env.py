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
