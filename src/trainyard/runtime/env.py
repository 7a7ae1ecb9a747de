"""The distributed-training environment a replica was started with, read from its variables.

Works the same under trainyard and Kubeflow: it only reads what the operator injects
(``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``, torchrun's ``LOCAL_RANK``, and for
:func:`global_rank` each kind's own rank variable or ``TF_CONFIG``).
"""

from __future__ import annotations

import json
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

    Checked in order, the first one present wins:

    * ``RANK`` (PyTorchJob, XGBoostJob, torchrun);
    * ``PET_NODE_RANK`` times ``PET_NPROC_PER_NODE`` plus ``LOCAL_RANK`` (a torchrun launcher
      before it sets ``RANK``);
    * ``OMPI_COMM_WORLD_RANK`` (MPIJob), ``JAX_PROCESS_ID`` (JAXJob), ``DMLC_TASK_ID`` (XGBoost's
      rabit), ``PADDLE_TRAINER_ID`` (a trainer started by ``paddle.distributed.launch``);
    * ``TF_CONFIG`` (TFJob): see :func:`tf_config_rank`.

    A process with none of them, or with values that are not integers, is rank 0: a
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
    for name in ("OMPI_COMM_WORLD_RANK", "JAX_PROCESS_ID", "DMLC_TASK_ID", "PADDLE_TRAINER_ID"):
        rank = number(name)
        if rank is not None:
            return rank
    tf_config = env.get("TF_CONFIG", "").strip()
    if tf_config:
        return tf_config_rank(tf_config)
    return 0


# TF_CONFIG's task types in rank order. "master" is TF1's name for the chief; "ps" and "evaluator"
# come last so that they are never rank 0 while a chief or a worker exists.
_TF_TASK_ORDER = ("chief", "master", "worker", "ps", "evaluator")


def tf_config_rank(tf_config: str) -> int:
    """A TFJob replica's rank from its ``TF_CONFIG``: the chief is 0, then the workers in order.

    Tasks are numbered in the order chief (or TF1's master), worker, ps, evaluator, each type by
    its index, so that rank 0 is the replica TensorFlow's own convention logs from: the chief when
    the job has one, else worker 0 (MultiWorkerMirroredStrategy without a chief, and
    ParameterServerStrategy jobs whose coordinator is worker 0). Parameter servers and the
    evaluator are never rank 0 unless they are the job's only task type. A ``TF_CONFIG`` that is
    not JSON, or has no ``task``, is rank 0, like a process with no rank variables at all.
    """
    try:
        config = json.loads(tf_config)
        task = config["task"]
        task_type, index = str(task["type"]).lower(), int(task["index"])
        cluster = config.get("cluster") or {}
    except (ValueError, TypeError, KeyError, AttributeError):
        return 0
    if not isinstance(cluster, dict):
        cluster = {}
    before = 0
    for name in _TF_TASK_ORDER:
        if name == task_type:
            return before + index
        members = cluster.get(name) or []
        before += len(members) if isinstance(members, list | dict) else 0
    # A task type outside TensorFlow's (a custom role) comes after every known one.
    return before + index
