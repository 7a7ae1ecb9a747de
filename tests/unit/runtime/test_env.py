from __future__ import annotations

import json

import pytest

from trainyard.runtime import TrainingEnv, global_rank
from trainyard.runtime.env import tf_config_rank


@pytest.mark.parametrize(
    ("environ", "rank", "world", "master", "init"),
    [
        ({}, 0, 1, True, None),
        (
            {"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"},
            1,
            2,
            False,
            "tcp://127.0.0.1:29500",
        ),
        (
            {"RANK": "0", "WORLD_SIZE": "4", "MASTER_ADDR": "job-master-0", "MASTER_PORT": "23456"},
            0,
            4,
            True,
            "tcp://job-master-0:23456",
        ),
    ],
    ids=["single-process", "worker-rank-1", "master-cluster-dns"],
)
def test_reads_the_injected_variables(
    environ: dict[str, str], rank: int, world: int, master: bool, init: str | None
) -> None:
    env = TrainingEnv.from_environ(environ)
    assert (env.rank, env.world_size, env.is_master, env.distributed) == (rank, world, master, world > 1)
    if init is None:
        with pytest.raises(RuntimeError, match="MASTER_ADDR"):
            _ = env.init_method
    else:
        assert env.init_method == init


def test_a_malformed_number_names_the_variable() -> None:
    with pytest.raises(ValueError, match="RANK='one'"):
        TrainingEnv.from_environ({"RANK": "one"})


def tf_config(task_type: str, index: int, **cluster: int) -> str:
    hosts = {name: [f"{name}-{i}:2222" for i in range(count)] for name, count in cluster.items()}
    return json.dumps({"cluster": hosts, "task": {"type": task_type, "index": index}, "environment": "cloud"})


@pytest.mark.parametrize(
    ("config", "rank"),
    [
        (tf_config("chief", 0, chief=1, worker=3), 0),
        (tf_config("worker", 0, chief=1, worker=3), 1),  # a chief exists: worker 0 is not rank 0
        (tf_config("worker", 2, chief=1, worker=3), 3),
        (tf_config("worker", 0, worker=2), 0),  # MultiWorkerMirroredStrategy without a chief
        (tf_config("worker", 1, worker=2), 1),
        (tf_config("ps", 0, chief=1, worker=2, ps=2), 3),  # parameter servers after the workers
        (tf_config("ps", 1, worker=2, ps=2), 3),
        (tf_config("evaluator", 0, chief=1, worker=2, ps=1, evaluator=1), 4),
        (tf_config("master", 0, master=1, worker=2), 0),  # TF1's name for the chief
        (tf_config("Worker", 1, chief=1, worker=2), 2),  # Kubeflow's replica type spelling
        ('{"task": {"type": "worker", "index": 1}}', 1),  # no cluster: the index alone
        ("not json", 0),
        ('{"cluster": {}}', 0),
        ('{"cluster": [], "task": {"type": "worker", "index": 2}}', 2),
    ],
)
def test_tf_config_rank(config: str, rank: int) -> None:
    assert tf_config_rank(config) == rank
    assert global_rank({"TF_CONFIG": config}) == rank


@pytest.mark.parametrize(
    ("environ", "rank"),
    [
        ({"PADDLE_TRAINER_ID": "3"}, 3),
        ({"RANK": "1", "TF_CONFIG": tf_config("chief", 0, chief=1)}, 1),  # RANK wins
        ({"PADDLE_TRAINER_ID": "2", "TF_CONFIG": tf_config("chief", 0, chief=1)}, 2),
        ({"TF_CONFIG": ""}, 0),
    ],
)
def test_global_rank_of_other_kinds(environ: dict[str, str], rank: int) -> None:
    assert global_rank(environ) == rank
