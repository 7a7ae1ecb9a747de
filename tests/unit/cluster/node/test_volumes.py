"""Volumes materialized under a pod's directory, and the mounts a container asks for."""

from __future__ import annotations

import base64
import stat
from decimal import Decimal
from pathlib import Path

import pytest

from trainyard.cluster.clients.node.podenv import ConfigError, Node, Sources
from trainyard.cluster.clients.node.volumes import materialize, mounts, read_only, under_mount, write_tokens


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


POD = {
    "metadata": {
        "name": "trainer-0",
        "namespace": "ml",
        "uid": "u-1",
        "labels": {"b": "2", "a": 'quote"d'},
        "annotations": {"note": "x"},
    },
    "spec": {"containers": [{"name": "main", "resources": {"limits": {"memory": "1Gi"}}}]},
}
NODE = Node("n", "127.0.0.1", Decimal(4), Decimal(2**34))


def files(path: Path) -> dict[str, tuple[str, int]]:
    return {str(p.relative_to(path)): (p.read_text(), mode(p)) for p in sorted(path.rglob("*")) if p.is_file()}


def test_downward_api_files_render_fields_like_the_kubelet(tmp_path: Path) -> None:
    volume = {
        "name": "info",
        "downwardAPI": {
            "defaultMode": 0o400,
            "items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "meta/name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o644},
                {"path": "note", "fieldRef": {"fieldPath": "metadata.annotations['note']"}},
                {
                    "path": "mem",
                    "resourceFieldRef": {"containerName": "main", "resource": "limits.memory", "divisor": "1Mi"},
                },
                {"path": "cpu", "resourceFieldRef": {"containerName": "main", "resource": "limits.cpu"}},
            ],
        },
    }
    path = materialize(tmp_path, volume, Sources(), POD, NODE)
    assert files(path) == {
        "cpu": ("4", 0o400),
        "labels": ('a="quote\\"d"\nb="2"', 0o400),
        "mem": ("1024", 0o400),
        "meta/name": ("trainer-0", 0o644),
        "note": ("x", 0o400),
    }
    env_only = {"name": "v", "downwardAPI": {"items": [{"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}}]}}
    with pytest.raises(ConfigError, match=r"unsupported fieldPath in a downwardAPI volume: status\.podIP"):
        materialize(tmp_path, env_only, Sources(), POD, NODE)


def test_projected_sources_share_one_directory(tmp_path: Path) -> None:
    secret = {"data": {"token": base64.b64encode(b"t").decode()}}
    volume = {
        "name": "all",
        "projected": {
            "defaultMode": 0o440,
            "sources": [
                {"configMap": {"name": "cm"}},
                {"secret": {"name": "sec", "items": [{"key": "token", "path": "creds/token", "mode": 0o400}]}},
                {"configMap": {"name": "absent", "optional": True}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
            ],
        },
    }
    sources = Sources({"cm": {"data": {"lr": "0.1"}}, "absent": None}, {"sec": secret})
    path = materialize(tmp_path, volume, sources, POD, NODE)
    assert files(path) == {"creds/token": ("t", 0o400), "lr": ("0.1", 0o440), "ns": ("ml", 0o440)}
    missing = {"name": "all", "projected": {"sources": [{"secret": {"name": "gone"}}]}}
    with pytest.raises(ConfigError, match=r'MountVolume\.SetUp failed for volume "all" : secret "gone" not found'):
        materialize(tmp_path, missing, Sources(), POD, NODE)
    token = {"name": "all", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
    # the node asked the API server for it (TokenRequest); without one the volume cannot be set up
    assert files(materialize(tmp_path, token, Sources(tokens={("", 3600): "jwt"}), POD, NODE)) == {
        "token": ("jwt", 0o644)
    }
    with pytest.raises(ConfigError, match='failed to fetch token: serviceaccounts "default" not found'):
        materialize(tmp_path, token, Sources(), POD, NODE)


def test_a_refreshed_token_is_renamed_over_the_old_one_and_the_rest_is_left(tmp_path: Path) -> None:
    ref = {"audience": "job", "expirationSeconds": 600, "path": "secrets/token"}
    volume = {
        "name": "progress",
        "projected": {"defaultMode": 0o440, "sources": [{"serviceAccountToken": ref}, {"configMap": {"name": "ca"}}]},
    }
    pod = {**POD, "spec": {"volumes": [volume, {"name": "scratch", "emptyDir": {}}]}}
    sources = Sources({"ca": {"data": {"ca.crt": "pem"}}}, tokens={("job", 600): "first"})
    path = materialize(tmp_path, volume, sources, pod, NODE)
    before = (path / "secrets" / "token").stat().st_ino
    write_tokens(pod, {"progress": path}, {("job", 600): "second", ("other", 600): "not this volume's"})
    assert files(path) == {"secrets/token": ("second", 0o440), "ca.crt": ("pem", 0o440)}
    # a new file under the old name: a reader has the old token or the new one, never a part
    assert (path / "secrets" / "token").stat().st_ino != before


def claim(phase: str, volume_name: str = "", **meta: str) -> dict[str, object]:
    return {"metadata": {"name": "data", **meta}, "spec": {"volumeName": volume_name}, "status": {"phase": phase}}


def test_a_claim_mounts_the_directory_of_its_bound_volume(tmp_path: Path) -> None:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data", "readOnly": True}}
    pv = {"spec": {"hostPath": {"path": str(tmp_path / "pv")}}}
    sources = Sources(claims={"data": claim("Bound", "pv-1")}, persistent_volumes={"pv-1": pv})
    assert materialize(tmp_path, volume, sources, POD) == tmp_path / "pv"
    assert (tmp_path / "pv").is_dir()
    assert read_only([volume, {"name": "scratch", "emptyDir": {}}]) == {"data"}
    container = {"name": "c", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    assert mounts(container, {"data": tmp_path / "pv"}, {"data"})[0]["readOnly"] is True


@pytest.mark.parametrize(
    ("sources", "problem"),
    [
        (Sources(), 'failed to fetch PVC from API server: persistentvolumeclaims "data" not found'),
        (Sources(claims={"data": claim("Pending")}), "PVC is not bound"),
        (
            Sources(claims={"data": claim("Bound", "pv-1", deletionTimestamp="2026-01-01T00:00:00Z")}),
            "can't start pod because PVC ml/data is being deleted",
        ),
        (
            Sources(claims={"data": claim("Bound", "pv-1")}),
            'failed to fetch PV pv-1 from API server: persistentvolumes "pv-1" not found',
        ),
    ],
)
def test_claims_that_cannot_be_mounted_yet(tmp_path: Path, sources: Sources, problem: str) -> None:
    volume = {"name": "vol", "persistentVolumeClaim": {"claimName": "data"}}
    with pytest.raises(ConfigError) as info:
        materialize(tmp_path, volume, sources, POD)
    assert str(info.value) == (
        "Unable to attach or mount volumes: unmounted volumes=[vol], unattached volumes=[vol]: "
        f"error processing PVC ml/data: {problem}"
    )


def test_volumes_of_kinds_this_node_cannot_serve(tmp_path: Path) -> None:
    sources = Sources(claims={"data": claim("Bound", "nfs-1")}, persistent_volumes={"nfs-1": {"spec": {"nfs": {}}}})
    with pytest.raises(ConfigError, match="nfs persistent volumes are not supported by the local node"):
        materialize(tmp_path, {"name": "v", "persistentVolumeClaim": {"claimName": "data"}}, sources, POD)


def test_what_a_kubelet_backs_with_tmpfs_goes_to_the_pods_memory_directory(tmp_path: Path) -> None:
    pod_dir, memory = tmp_path / "pod", tmp_path / "memory" / "pod"
    sources = Sources({"cm": {"data": {"a": "1"}}}, secrets={"s": {"data": {"k": base64.b64encode(b"v").decode()}}})
    in_memory = [
        {"name": "cm", "configMap": {"name": "cm"}},
        {"name": "sec", "secret": {"secretName": "s"}},
        {"name": "proj", "projected": {"sources": [{"configMap": {"name": "cm"}}]}},
        {"name": "ram", "emptyDir": {"medium": "Memory"}},
    ]
    for volume in in_memory:
        assert materialize(pod_dir, volume, sources, memory=memory) == memory / volume["name"]
    assert (memory / "sec" / "k").read_bytes() == b"v" and (memory / "proj" / "a").read_text() == "1"
    assert materialize(pod_dir, {"name": "scratch", "emptyDir": {}}, sources, memory=memory) == (
        pod_dir / "volumes" / "scratch"
    )
