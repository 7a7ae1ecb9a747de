"""A pod's volumes on this node: materialized under the pod's directory, mounted by ``mountns``.

``emptyDir``, ``configMap``, ``secret``, ``downwardAPI`` and ``projected`` volumes (service-account
tokens included, as the node asked the API server for them; ``write_tokens`` puts refreshed ones
in place) become
directories under ``<pod dir>/volumes`` (keys and fields as files, with ``items``, ``defaultMode``
and per-item ``mode``), or, for those a kubelet backs with tmpfs, under the pod's directory in
memory (``paths.memory_root``); ``hostPath`` is the host directory itself (``DirectoryOrCreate``/
``FileOrCreate`` create it); ``persistentVolumeClaim`` is the directory of the PersistentVolume
its claim is bound to. ``mounts`` lists, for one container, which host path appears at each
``mountPath`` (``subPath`` and ``readOnly`` included). A volume that cannot be set up raises
``ConfigError`` with the kubelet's wording. Files are renamed into place, so a reader never sees
one half-written.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node.podenv import (
    ConfigError,
    Node,
    Sources,
    field_ref,
    object_data,
    resource_field_ref,
    token_key,
)

__all__ = ["ConfigError", "materialize", "mounts", "read_only", "under_mount", "write_tokens"]

DEFAULT_MODE = 0o644
# What a downwardAPI volume may project besides labels and annotations (the API server's list).
_VOLUME_FIELDS = ("metadata.name", "metadata.namespace", "metadata.uid")
_NOWHERE = Node("", "", Decimal(0), Decimal(0))
# PersistentVolume spec fields that are not the volume source.
_PV_COMMON = (
    "accessModes",
    "capacity",
    "claimRef",
    "mountOptions",
    "nodeAffinity",
    "persistentVolumeReclaimPolicy",
    "storageClassName",
    "volumeMode",
    "volumeAttributesClassName",
)


def _write_keys(target: Path, data: dict[str, bytes], volume: Obj, kind: str, default_mode: int | None = None) -> None:
    items = volume.get("items")
    if default_mode is None:
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
    _write_files(target, files, kind)


def _write_files(target: Path, files: list[tuple[str, bytes, int]], kind: str) -> None:
    for rel, content, mode in files:
        path = target / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ConfigError(f"invalid path {rel!r} in {kind} volume")
        path.parent.mkdir(parents=True, exist_ok=True)
        # Renamed into place, as the kubelet's atomic writer does: a container reading the file while
        # it is rewritten (a token refreshed) sees the old content or the new, never a part.
        fd, tmp = tempfile.mkstemp(prefix=f"..{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content)
            Path(tmp).chmod(mode)
            Path(tmp).replace(path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


# What a kubelet backs with tmpfs (besides an emptyDir of ``medium: Memory``).
_MEMORY_BACKED = ("secret", "configMap", "projected", "downwardAPI")


def materialize(
    pod_dir: Path,
    volume: Obj,
    sources: Sources,
    pod: Obj | None = None,
    node: Node | None = None,
    *,
    memory: Path | None = None,
) -> Path:
    """The host path that backs ``volume``, created and filled (``pod`` and ``node`` feed the downward API).

    ``memory``: the pod's directory for memory-backed volumes (what a kubelet mounts as tmpfs:
    secrets, config maps, projected and downward API volumes, ``emptyDir`` of ``medium: Memory``);
    without it they go under ``pod_dir`` as the others do.
    """
    name: str = volume.get("name", "")
    target: Path = pod_dir / "volumes" / name
    in_memory = any(k in volume for k in _MEMORY_BACKED) or (volume.get("emptyDir") or {}).get("medium") == "Memory"
    if memory is not None and in_memory:
        target = memory / name
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
    if "persistentVolumeClaim" in volume:
        return _claimed(volume, sources, pod or {})
    fill: Callable[[Path], None] | None = None
    if "configMap" in volume or "secret" in volume:
        secret = "secret" in volume
        ref = volume["secret" if secret else "configMap"] or {}
        obj_name = ref.get("secretName" if secret else "name") or ""
        fill = partial(_fill_object, ref, obj_name, sources, secret=secret, default_mode=None)
    elif "downwardAPI" in volume:
        ref = volume["downwardAPI"] or {}
        fill = partial(_fill_downward, ref, pod or {}, node, int(ref.get("defaultMode", DEFAULT_MODE)))
    elif "projected" in volume:
        fill = partial(_fill_projected, volume["projected"] or {}, sources, pod or {}, node)
    if fill is not None:
        # Refilled on each start so that a pod sees the objects as they are when its containers start;
        # emptied in place, since running containers (adopted by a restarted agent) have it mounted.
        target.mkdir(parents=True, exist_ok=True)
        for entry in target.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        try:
            fill(target)
        except ConfigError as exc:
            raise ConfigError(f'MountVolume.SetUp failed for volume "{name}" : {exc}') from exc
        return target
    if "emptyDir" in volume:
        target.mkdir(parents=True, exist_ok=True)
        return target
    kinds = sorted(k for k in volume if k != "name")
    raise ConfigError(f"volume {name!r}: {', '.join(kinds) or 'no'} volumes are not supported by the local node")


def _fill_object(
    ref: Obj, obj_name: str, sources: Sources, target: Path, *, secret: bool, default_mode: int | None
) -> None:
    obj = (sources.secrets if secret else sources.config_maps).get(obj_name)
    label = "secret" if secret else "configmap"
    if obj is None:
        if ref.get("optional"):
            return
        raise ConfigError(f'{label} "{obj_name}" not found')
    _write_keys(target, object_data(obj, secret=secret), ref, label, default_mode)


def _format_map(values: Obj) -> str:
    """The kubelet's rendering of labels or annotations as a file: ``key="value"`` lines, sorted."""
    return "\n".join(f"{k}={json.dumps(str(v), ensure_ascii=False)}" for k, v in sorted(values.items()))


def _fill_downward(ref: Obj, pod: Obj, node: Node | None, default_mode: int, target: Path) -> None:
    meta = pod.get("metadata") or {}
    files: list[tuple[str, bytes, int]] = []
    for item in ref.get("items") or []:
        path = item.get("path") or ""
        if "fieldRef" in item:
            field_path = (item["fieldRef"] or {}).get("fieldPath") or ""
            if field_path in ("metadata.labels", "metadata.annotations"):
                text = _format_map(meta.get(field_path.split(".")[1]) or {})
            elif field_path in _VOLUME_FIELDS or field_path.startswith(("metadata.labels[", "metadata.annotations[")):
                text = field_ref(pod, field_path, node or _NOWHERE)
            else:
                raise ConfigError(f"unsupported fieldPath in a downwardAPI volume: {field_path}")
        elif "resourceFieldRef" in item:
            text = resource_field_ref(pod, {}, item["resourceFieldRef"] or {}, node or _NOWHERE)
        else:
            raise ConfigError(f"downwardAPI item {path!r} has neither fieldRef nor resourceFieldRef")
        files.append((path, text.encode(), int(item.get("mode", default_mode))))
    _write_files(target, files, "downwardAPI")


def _fill_projected(projected: Obj, sources: Sources, pod: Obj, node: Node | None, target: Path) -> None:
    default_mode = int(projected.get("defaultMode", DEFAULT_MODE))
    for source in projected.get("sources") or []:
        if "configMap" in source or "secret" in source:
            secret = "secret" in source
            ref = source["secret" if secret else "configMap"] or {}
            _fill_object(ref, ref.get("name") or "", sources, target, secret=secret, default_mode=default_mode)
        elif "downwardAPI" in source:
            _fill_downward(source["downwardAPI"] or {}, pod, node, default_mode, target)
        elif "serviceAccountToken" in source:
            ref = source["serviceAccountToken"] or {}
            token = sources.tokens.get(token_key(ref))
            if token is None:
                account = (pod.get("spec") or {}).get("serviceAccountName") or "default"
                raise ConfigError(f'failed to fetch token: serviceaccounts "{account}" not found')
            _write_token(target, ref, token, default_mode)
        else:
            kinds = ", ".join(sorted(source)) or "empty"
            raise ConfigError(
                f"projected {kinds} sources are not supported by the local node "
                "(configMap, secret, downwardAPI and serviceAccountToken are)"
            )


def write_tokens(pod: Obj, backing: dict[str, Path], tokens: dict[tuple[str, int], str]) -> None:
    """Rewrite, in the pod's projected volumes (``backing``: name → directory), the files of the
    ``serviceAccountToken`` sources whose ``token_key`` is in ``tokens`` (refreshed tokens)."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        projected, target = volume.get("projected"), backing.get(volume.get("name", ""))
        if not projected or target is None:
            continue
        default_mode = int(projected.get("defaultMode", DEFAULT_MODE))
        for source in projected.get("sources") or []:
            if "serviceAccountToken" not in source:
                continue
            ref = source["serviceAccountToken"] or {}
            token = tokens.get(token_key(ref))
            if token is not None:
                _write_token(target, ref, token, default_mode)


def _write_token(target: Path, ref: Obj, token: str, default_mode: int) -> None:
    _write_files(target, [(ref.get("path") or "token", token.encode(), default_mode)], "serviceAccountToken")


def _claimed(volume: Obj, sources: Sources, pod: Obj) -> Path:
    """The directory of the PersistentVolume that the volume's claim is bound to."""
    name = volume.get("name", "")
    claim_name = (volume["persistentVolumeClaim"] or {}).get("claimName") or ""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    prefix = (
        f"Unable to attach or mount volumes: unmounted volumes=[{name}], unattached volumes=[{name}]: "
        f"error processing PVC {namespace}/{claim_name}"
    )
    claim = sources.claims.get(claim_name)
    if claim is None:
        raise ConfigError(
            f'{prefix}: failed to fetch PVC from API server: persistentvolumeclaims "{claim_name}" not found'
        )
    if (claim.get("metadata") or {}).get("deletionTimestamp"):
        raise ConfigError(f"{prefix}: can't start pod because PVC {namespace}/{claim_name} is being deleted")
    volume_name = (claim.get("spec") or {}).get("volumeName") or ""
    if (claim.get("status") or {}).get("phase") != "Bound" or not volume_name:
        raise ConfigError(f"{prefix}: PVC is not bound")
    pv = sources.persistent_volumes.get(volume_name)
    if pv is None:
        raise ConfigError(
            f'{prefix}: failed to fetch PV {volume_name} from API server: persistentvolumes "{volume_name}" not found'
        )
    path = local_path(pv)
    if path is None:
        kinds = ", ".join(sorted(k for k in pv.get("spec") or {} if k not in _PV_COMMON)) or "no"
        raise ConfigError(
            f'MountVolume.SetUp failed for volume "{volume_name}" : {kinds} persistent volumes are not supported '
            "by the local node (hostPath and local are)"
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def local_path(pv: Obj) -> Path | None:
    """The directory on this machine that a hostPath or local PersistentVolume stands for."""
    spec = pv.get("spec") or {}
    for kind in ("hostPath", "local"):
        if path := (spec.get(kind) or {}).get("path"):
            return Path(path)
    return None


def read_only(declared: list[Obj]) -> set[str]:
    """Volumes every mount of which is read-only, whatever the mount says (``persistentVolumeClaim.readOnly``)."""
    return {v.get("name", "") for v in declared if ((v.get("persistentVolumeClaim") or {}).get("readOnly"))}


def mounts(container: Obj, backing: dict[str, Path], forced_read_only: set[str] | None = None) -> list[Obj]:
    """``mountns`` mount specs for a container, in the order the kubelet mounts them (shortest path first)."""
    out: list[Obj] = []
    forced = forced_read_only or set()
    for mount in container.get("volumeMounts") or []:
        name = mount.get("name", "")
        if name not in backing:
            raise ConfigError(f"cannot find volume {name!r} to mount into container {container.get('name')!r}")
        source = backing[name] / mount["subPath"] if mount.get("subPath") else backing[name]
        if mount.get("subPath") and not source.exists():
            source.mkdir(parents=True)
        out.append(
            {
                "path": mount["mountPath"],
                "source": str(source),
                "readOnly": bool(mount.get("readOnly")) or name in forced,
            }
        )
    return sorted(out, key=lambda m: len(Path(m["path"]).parts))


def under_mount(path: str, container: Obj) -> bool:
    """Whether ``path`` (as the container sees it) lies in one of its mounts."""
    for mount in container.get("volumeMounts") or []:
        root = mount.get("mountPath", "").rstrip("/")
        if root and (path == root or path.startswith(root + "/")):
            return True
    return False
