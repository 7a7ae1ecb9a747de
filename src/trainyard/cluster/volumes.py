"""A pod's volumes on this node: materialized under the pod's directory, mounted by ``mountns``.

``emptyDir``, ``configMap`` and ``secret`` volumes become directories under ``<pod dir>/volumes``
(keys as files, with ``items``, ``defaultMode`` and per-item ``mode``); ``hostPath`` is the host
directory itself (``DirectoryOrCreate``/``FileOrCreate`` create it). ``mounts`` lists, for one
container, which host path appears at each ``mountPath`` (``subPath`` and ``readOnly`` included).
A volume that cannot be set up raises ``ConfigError`` with the kubelet's wording.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from trainyard.cluster.podenv import ConfigError, Sources, object_data

__all__ = ["ConfigError", "materialize", "mounts", "under_mount"]

Obj = dict[str, Any]
DEFAULT_MODE = 0o644


def _write_keys(target: Path, data: dict[str, bytes], volume: Obj, kind: str) -> None:
    items = volume.get("items")
    default_mode = int(volume.get("defaultMode", DEFAULT_MODE))
    files: list[tuple[str, bytes, int]] = []
    if items:
        for item in items:
            key = item.get("key", "")
            if key not in data:
                if volume.get("optional"):
                    continue
                raise ConfigError(f"{kind} references non-existent config key: {key}")
            files.append((item.get("path") or key, data[key], int(item.get("mode", default_mode))))
    else:
        files = [(key, value, default_mode) for key, value in data.items()]
    for rel, content, mode in files:
        path = target / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ConfigError(f"invalid path {rel!r} in {kind} volume")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)


def materialize(pod_dir: Path, volume: Obj, sources: Sources) -> Path:
    """The host path that backs ``volume``, created and filled."""
    name: str = volume.get("name", "")
    target: Path = pod_dir / "volumes" / name
    if "hostPath" in volume:
        host = volume["hostPath"] or {}
        path = Path(host.get("path") or "/")
        kind = host.get("type") or ""
        if kind == "DirectoryOrCreate":
            path.mkdir(parents=True, exist_ok=True)
        elif kind == "FileOrCreate" and not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
        elif kind in ("Directory", "File") and not path.exists():
            raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : hostPath type check failed: {path}')
        return path
    if "configMap" in volume or "secret" in volume:
        secret = "secret" in volume
        ref = volume["secret" if secret else "configMap"] or {}
        obj_name = ref.get("secretName" if secret else "name") or ""
        obj = (sources.secrets if secret else sources.config_maps).get(obj_name)
        label = "secret" if secret else "configmap"
        if obj is None and not ref.get("optional"):
            raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : {label} "{obj_name}" not found')
        # Refilled on each start so that a pod sees the object as it is when its containers start; emptied
        # in place, since running containers (adopted by a restarted agent) have this directory mounted.
        target.mkdir(parents=True, exist_ok=True)
        for entry in target.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        if obj is not None:
            try:
                _write_keys(target, object_data(obj, secret=secret), ref, label)
            except ConfigError as exc:
                raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : {exc}') from exc
        return target
    if "emptyDir" in volume:
        target.mkdir(parents=True, exist_ok=True)
        return target
    kinds = sorted(k for k in volume if k != "name")
    raise ConfigError(f"volume {name!r}: {', '.join(kinds) or 'no'} volumes are not supported by the local node")


def mounts(container: Obj, backing: dict[str, Path]) -> list[Obj]:
    """``mountns`` mount specs for a container, in the order the kubelet mounts them (shortest path first)."""
    out: list[Obj] = []
    for mount in container.get("volumeMounts") or []:
        name = mount.get("name", "")
        if name not in backing:
            raise ConfigError(f"cannot find volume {name!r} to mount into container {container.get('name')!r}")
        source = backing[name] / mount["subPath"] if mount.get("subPath") else backing[name]
        if mount.get("subPath") and not source.exists():
            source.mkdir(parents=True)
        out.append({"path": mount["mountPath"], "source": str(source), "readOnly": bool(mount.get("readOnly"))})
    return sorted(out, key=lambda m: len(Path(m["path"]).parts))


def under_mount(path: str, container: Obj) -> bool:
    """Whether ``path`` (as the container sees it) lies in one of its mounts."""
    for mount in container.get("volumeMounts") or []:
        root = mount.get("mountPath", "").rstrip("/")
        if root and (path == root or path.startswith(root + "/")):
            return True
    return False
