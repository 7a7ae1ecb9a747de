"""Volumes materialized under a pod's directory, and the mounts a container asks for."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from trainyard.cluster.podenv import ConfigError, Sources
from trainyard.cluster.volumes import materialize, mounts, under_mount


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_config_map_keys_become_files_with_the_default_mode(tmp_path: Path) -> None:
    binary = {"w.bin": base64.b64encode(b"\0\1").decode()}
    sources = Sources({"cm": {"data": {"train.py": "print(1)"}, "binaryData": binary}})
    path = materialize(tmp_path, {"name": "app", "configMap": {"name": "cm"}}, sources)
    assert path == tmp_path / "volumes" / "app"
    assert (path / "train.py").read_text() == "print(1)" and (path / "w.bin").read_bytes() == b"\0\1"
    assert mode(path / "train.py") == 0o644


def test_secret_items_pick_keys_paths_and_modes(tmp_path: Path) -> None:
    data = {k: base64.b64encode(v.encode()).decode() for k, v in {"a": "1", "b": "2", "c": "3"}.items()}
    volume = {
        "name": "s",
        "secret": {
            "secretName": "sec",
            "defaultMode": 0o400,
            "items": [{"key": "a", "path": "dir/a.txt"}, {"key": "b", "path": "b", "mode": 0o600}],
        },
    }
    path = materialize(tmp_path, volume, Sources(secrets={"sec": {"data": data}}))
    assert sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()) == ["b", "dir/a.txt"]
    assert (path / "dir/a.txt").read_text() == "1" and mode(path / "dir/a.txt") == 0o400
    assert mode(path / "b") == 0o600


@pytest.mark.parametrize(
    ("volume", "sources", "message"),
    [
        (
            {"name": "v", "configMap": {"name": "gone"}},
            Sources({"gone": None}),
            'MountVolume.SetUp failed for volume "v" : configmap "gone" not found',
        ),
        (
            {"name": "v", "secret": {"secretName": "gone"}},
            Sources(),
            'MountVolume.SetUp failed for volume "v" : secret "gone" not found',
        ),
        (
            {"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "k"}]}},
            Sources({"cm": {"data": {}}}),
            'MountVolume.SetUp failed for volume "v" : configmap references non-existent config key: k',
        ),
        (
            {"name": "v", "configMap": {"name": "cm", "items": [{"key": "k", "path": "../escape"}]}},
            Sources({"cm": {"data": {"k": "x"}}}),
            "MountVolume.SetUp failed for volume \"v\" : invalid path '../escape' in configmap volume",
        ),
        (
            {"name": "v", "nfs": {"server": "s"}},
            Sources(),
            "volume 'v': nfs volumes are not supported by the local node",
        ),
    ],
)
def test_volumes_that_cannot_be_set_up(
    tmp_path: Path, volume: dict[str, object], sources: Sources, message: str
) -> None:
    with pytest.raises(ConfigError) as info:
        materialize(tmp_path, volume, sources)
    assert str(info.value) == message


def test_optional_missing_config_map_is_an_empty_directory(tmp_path: Path) -> None:
    path = materialize(tmp_path, {"name": "v", "configMap": {"name": "gone", "optional": True}}, Sources())
    assert path.is_dir() and not any(path.iterdir())


def test_host_path_types(tmp_path: Path) -> None:
    made = tmp_path / "made"
    assert materialize(tmp_path, {"name": "h", "hostPath": {"path": str(made), "type": "DirectoryOrCreate"}}, Sources())
    assert made.is_dir()
    with pytest.raises(ConfigError, match="hostPath type check failed"):
        materialize(tmp_path, {"name": "h", "hostPath": {"path": str(tmp_path / "no"), "type": "Directory"}}, Sources())


def test_mounts_resolve_sub_paths_and_order_parents_first(tmp_path: Path) -> None:
    container = {
        "name": "c",
        "volumeMounts": [
            {"name": "data", "mountPath": "/data/cache", "subPath": "cache", "readOnly": True},
            {"name": "data", "mountPath": "/data"},
        ],
    }
    specs = mounts(container, {"data": tmp_path})
    assert specs == [
        {"path": "/data", "source": str(tmp_path), "readOnly": False},
        {"path": "/data/cache", "source": str(tmp_path / "cache"), "readOnly": True},
    ]
    assert (tmp_path / "cache").is_dir()
    assert under_mount("/data/cache/x", container) and not under_mount("/database", container)
    with pytest.raises(ConfigError, match="cannot find volume 'nope'"):
        mounts({"name": "c", "volumeMounts": [{"name": "nope", "mountPath": "/x"}]}, {})
