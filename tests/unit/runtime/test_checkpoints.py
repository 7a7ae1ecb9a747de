from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import IO

import pytest

from trainyard.runtime import reporting
from trainyard.runtime.checkpoints import (
    ENV_CHECKPOINT_DIR,
    ENV_RESUME_FROM,
    CheckpointManager,
    load,
    metadata_path,
    write_atomic,
)


@pytest.fixture(autouse=True)
def no_reporting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reporting, "_default", reporting.Reporter(None))


def test_save_rotates_and_latest(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "ckpt", keep=2, rank=0, environ={})
    assert manager.latest() is None
    assert manager.load_latest() is None
    for epoch in range(1, 5):
        manager.save(f"epoch {epoch}".encode(), epoch=epoch)
    assert [p.name for p in manager.checkpoints()] == ["checkpoint-00000003.ckpt", "checkpoint-00000004.ckpt"]
    assert manager.latest() == tmp_path / "ckpt" / "checkpoint-00000004.ckpt"
    assert manager.load_latest() == b"epoch 4"
    on_disk = sorted(p.name for p in (tmp_path / "ckpt").iterdir())
    assert on_disk == ["checkpoint-00000003.ckpt", "checkpoint-00000004.ckpt"]


def test_numbers_continue_without_epoch_or_step(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, rank=0, environ={})
    assert manager.save(b"a") == tmp_path / "checkpoint-00000000.ckpt"
    assert manager.save(b"b") == tmp_path / "checkpoint-00000001.ckpt"
    assert manager.save(b"c", step=500) == tmp_path / "checkpoint-00000500.ckpt"
    assert manager.latest() == tmp_path / "checkpoint-00000500.ckpt"


def test_other_ranks_do_not_write(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path / "c", environ={"RANK": "1"})
    assert not manager.is_writer
    assert manager.save(b"x", epoch=1) is None
    assert manager.save_async(b"x", epoch=1) is None
    assert not (tmp_path / "c").exists()


def test_a_failing_writer_leaves_the_previous_checkpoint_and_no_temp_file(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, rank=0, environ={})
    manager.save(b"good", epoch=1)

    def broken(handle: IO[bytes]) -> None:
        handle.write(b"half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        manager.save(broken, epoch=2)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-00000001.ckpt"]
    assert manager.load_latest() == b"good"


def test_write_atomic_replaces_in_place(tmp_path: Path) -> None:
    target = tmp_path / "f"
    write_atomic(target, b"one")
    write_atomic(target, lambda handle: handle.write(b"two"))
    assert target.read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_resume_from_env_file_or_directory(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    old = CheckpointManager(tmp_path / "old", rank=0, environ={})
    old.save(b"old 7", epoch=7)
    old.save(b"old 8", epoch=8)
    own = CheckpointManager(tmp_path / "own", rank=0, environ={ENV_RESUME_FROM: str(tmp_path / "old")})
    assert own.load_latest() == b"old 8"  # a new pod: its directory is empty
    pinned = CheckpointManager(
        tmp_path / "own", rank=0, environ={ENV_RESUME_FROM: str(tmp_path / "old" / "checkpoint-00000007.ckpt")}
    )
    assert pinned.load_latest(lambda p: p.name) == "checkpoint-00000007.ckpt"
    missing = CheckpointManager(tmp_path / "old", rank=0, environ={ENV_RESUME_FROM: str(tmp_path / "nowhere")})
    assert missing.load_latest() == b"old 8"
    assert "TRAINYARD_RESUME_FROM=" in caplog.text
    empty = CheckpointManager(tmp_path / "own", rank=0, environ={ENV_RESUME_FROM: str(tmp_path / "none")})
    assert empty.load_latest() is None


def test_own_newer_checkpoint_wins_over_the_env(tmp_path: Path) -> None:
    # The operator's TRAINYARD_RESUME_FROM is fixed when a pod is created; a pod restarted in place
    # (restartPolicy OnFailure) has written newer checkpoints of its own since.
    named = CheckpointManager(tmp_path / "named", rank=0, environ={}).save(b"named 3", epoch=3)
    assert named is not None
    manager = CheckpointManager(tmp_path / "own", rank=0, environ={ENV_RESUME_FROM: str(named)})
    own = manager.save(b"own 5", epoch=5)
    assert own is not None
    os.utime(named, (1_000_000, 1_000_000))
    os.utime(own, (2_000_000, 2_000_000))
    assert manager.load_latest() == b"own 5"
    os.utime(own, (500_000, 500_000))  # the directory holds stale files from an older run
    assert manager.load_latest() == b"named 3"
    same = CheckpointManager(tmp_path / "own", rank=0, environ={ENV_RESUME_FROM: str(own)})
    assert same.resume_path() == own


def test_directory_from_the_env_else_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manager = CheckpointManager(rank=0, environ={ENV_CHECKPOINT_DIR: str(tmp_path / "ckpt")})
    assert manager.directory == tmp_path / "ckpt"
    assert manager.save(b"x", epoch=1) == tmp_path / "ckpt" / "checkpoint-00000001.ckpt"
    monkeypatch.chdir(tmp_path)
    assert CheckpointManager(rank=0, environ={}).directory == Path("checkpoints")
    assert CheckpointManager(tmp_path / "given", environ={ENV_CHECKPOINT_DIR: "/elsewhere"}).directory == (
        tmp_path / "given"
    )


def test_async_save_one_in_flight_and_errors_surface(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep=5, rank=0, environ={})
    path = manager.save_async(b"bg", epoch=1)
    manager.save_async(b"bg2", epoch=2)  # waits for the first
    manager.wait()
    assert path is not None
    assert path.read_bytes() == b"bg"
    assert manager.load_latest() == b"bg2"

    def broken(handle: IO[bytes]) -> None:
        raise ValueError("cannot serialize")

    manager.save_async(broken, epoch=3)
    with pytest.raises(ValueError, match="cannot serialize"):
        manager.wait()
    manager.wait()  # raised once


def test_save_reports_the_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[reporting.Snapshot] = []

    class Sink:
        def send(self, snapshot: reporting.Snapshot, timeout: float) -> None:
            seen.append(snapshot)

    monkeypatch.setattr(reporting, "_default", reporting.Reporter(Sink(), start=False))
    manager = CheckpointManager(tmp_path, rank=0, environ={})
    path = manager.save(b"x", epoch=4)
    reporting.flush()
    assert seen[-1].checkpoint is not None
    assert seen[-1].checkpoint.path == str(path)
    assert seen[-1].epoch == 4


def test_torch_helpers(tmp_path: Path) -> None:
    import torch  # pinned in the examples extra that `make install` installs

    manager = CheckpointManager(tmp_path, rank=0, suffix=".pt", environ={})
    manager.save_torch({"w": torch.ones(3)}, epoch=1)
    manager.save_torch({"w": torch.zeros(3)}, epoch=2, background=True)
    manager.wait()
    state = manager.load_torch_latest(weights_only=True)
    assert torch.equal(state["w"], torch.zeros(3))
    assert torch.equal(manager.load_latest()["w"], torch.zeros(3))  # save_torch records its format too


def test_a_state_dict_with_tensors_is_saved_with_torch_and_loaded_back_as_one(tmp_path: Path) -> None:
    import torch

    model = torch.nn.Linear(2, 1)
    manager = CheckpointManager(tmp_path, keep=1, rank=0, environ={})
    path = manager.save(model.state_dict() | {"epoch": 3, "optimizer": {"lr": 0.1}}, epoch=3)
    assert path is not None
    assert torch.load(path)["epoch"] == 3  # a plain torch file, for any reader
    saved = manager.load_latest()
    assert saved.pop("epoch") == 3 and saved.pop("optimizer") == {"lr": 0.1}
    restored = torch.nn.Linear(2, 1)
    restored.load_state_dict(saved)
    assert torch.equal(restored.weight, model.weight)
    # a whole module (callable, yet no writer) and tensors deep in lists are states too
    manager.save([{"layers": (torch.zeros(1),)}], epoch=4)
    assert torch.equal(manager.load_latest()[0]["layers"][0], torch.zeros(1))
    manager.save(model, epoch=5)
    assert isinstance(manager.load_latest(weights_only=False), torch.nn.Linear)
    # rotation takes the metadata with the checkpoint
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-00000005.ckpt", "checkpoint-00000005.ckpt.json"]


def test_a_picklable_state_without_tensors_is_pickled(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, rank=0, environ={})
    state = {"epoch": 2, "weights": [0.5, 0.25], "seen": {"a", "b"}}
    path = manager.save(state, epoch=2)
    assert path is not None
    assert manager.load_latest() == state
    assert metadata_path(path).read_text() == '{"format": "pickle"}'
    # bytes keep reading as bytes, and a bytes checkpoint over a pickled one drops its metadata
    manager.save(b"raw", epoch=2)
    assert manager.load_latest() == b"raw" and not metadata_path(path).exists()
    manager.save(b"raw", epoch=3, format="pickle")
    assert manager.load_latest() == b"raw"  # pickled bytes come back as the same bytes
    assert manager.save_async(("a", 1), epoch=4) is not None
    manager.wait()
    assert manager.load_latest() == ("a", 1)


def test_bad_formats_and_metadata_are_named(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, rank=0, environ={})
    with pytest.raises(ValueError, match="format must be one of bytes, pickle, torch, not 'json'"):
        manager.save({"a": 1}, epoch=1, format="json")
    with pytest.raises(TypeError, match="format='bytes' takes bytes or a writer, not dict"):
        manager.save({"a": 1}, epoch=1, format="bytes")
    with pytest.raises(TypeError):  # not picklable: the previous checkpoint and its metadata stay
        manager.save({"lock": threading.Lock()}, epoch=1)
    assert list(tmp_path.iterdir()) == []
    path = manager.save({"a": 1}, epoch=1)
    assert path is not None
    metadata_path(path).write_text("[]")
    with pytest.raises(ValueError, match=r"not the metadata of a checkpoint .* remove it to read checkpoint-00000001"):
        manager.load_latest()
    elsewhere = tmp_path / "written-elsewhere.pt"  # no metadata: its bytes
    elsewhere.write_bytes(b"\x80\x05K\x01.")
    assert load(elsewhere) == b"\x80\x05K\x01."


def test_keep_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="keep"):
        CheckpointManager(tmp_path, keep=0)


def test_retention_comes_from_the_environment_when_not_given(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, rank=0, environ={"TRAINYARD_CHECKPOINT_KEEP": "2"})
    for epoch in (1, 2, 3):
        manager.save(b"x", epoch=epoch)
    assert [p.name.endswith(("2.ckpt", "3.ckpt")) for p in manager.checkpoints()] == [True, True]
    assert CheckpointManager(tmp_path, rank=0, environ={}).keep == 3
    assert CheckpointManager(tmp_path, keep=5, rank=0, environ={"TRAINYARD_CHECKPOINT_KEEP": "2"}).keep == 5
