"""``paths.memory_root``: a directory of the plane's user on a tmpfs, one per home, or the home
when that name is not safely its own; the node prunes what pods gone meanwhile left there."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from trainyard.cluster import paths
from trainyard.cluster.clients.node.capacity import Capacity
from trainyard.cluster.clients.node.containerconfig import ContainerConfig
from trainyard.cluster.paths import Layout
from trainyard.kit.informer import Informer


@pytest.fixture
def shm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # A stand-in for /dev/shm: a shared directory (sticky, world-writable) anyone may create names in.
    shared = tmp_path / "shm"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setattr(paths, "MEMORY_FS", shared)
    return shared


def test_each_home_gets_a_private_directory_of_its_own(shm: Path, tmp_path: Path) -> None:
    one, other = Layout(tmp_path / "one"), Layout(tmp_path / "other")
    root = paths.memory_root(one)
    assert root.parent == shm and root.name.startswith(f"trainyard-{os.getuid()}-")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert paths.memory_root(one) == root != paths.memory_root(other)


def test_a_name_taken_by_a_link_or_an_open_directory_is_not_used(shm: Path, tmp_path: Path) -> None:
    layout = Layout(tmp_path / "home")
    taken = paths.memory_root(layout)
    taken.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    taken.symlink_to(elsewhere)
    assert paths.memory_root(layout) == layout.home / "memory"
    taken.unlink()
    taken.mkdir(mode=0o777)
    taken.chmod(0o777)
    assert paths.memory_root(layout) == layout.home / "memory"


def test_without_a_memory_filesystem_the_home_holds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "MEMORY_FS", tmp_path / "absent")
    layout = Layout(tmp_path / "home")
    assert paths.memory_root(layout) == layout.home / "memory"


def test_the_node_prunes_the_memory_of_pods_that_went_while_it_was_down(shm: Path, tmp_path: Path) -> None:
    layout = Layout(tmp_path / "home")
    config = ContainerConfig(
        layout,
        tmp_path / "work",
        node_name="n",
        address="127.0.0.1",
        capacity=Capacity(cpu=1000, memory=2**30, gpus=0),
        running=list,
    )
    pods = Informer(None, object)  # type: ignore[arg-type]  # fed as its reflector would, never listed
    pods._deliver("ADDED", {"metadata": {"namespace": "ns", "name": "kept", "uid": "u-kept", "resourceVersion": "1"}})
    pods.synced.set()
    # Each node has its own directory there: another node's pods are not this node's to prune.
    root = paths.memory_root(layout) / "n"
    other = paths.memory_root(layout) / "m" / "ns_elsewhere_u-other"
    other.mkdir(parents=True)
    for name in ("ns_kept_u-kept", "ns_gone_u-gone"):
        (root / name / "token").mkdir(parents=True)
    asyncio.run(config.prune(pods))
    assert [p.name for p in root.iterdir()] == ["ns_kept_u-kept"]
    assert other.is_dir()
