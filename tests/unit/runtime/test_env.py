from __future__ import annotations

import pytest

from trainyard.runtime import TrainingEnv


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
