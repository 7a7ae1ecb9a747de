"""What decoding a write's body into the typed object does, as kube-apiserver (v1.32) decodes it,
in its words, before anything validates it.

Values Go cannot decode (a number as a ConfigMap value, bad base64 in a Secret, labels that are
not a string map) fail with 400 ``... cannot be handled as a <Kind>: json: cannot unmarshal
...``; unknown ``metadata`` fields are dropped and reported, like the unknown fields of a custom
resource (``schema``), which ``decode_body`` also prunes and defaults; the ``fieldValidation``
directive says whether an unknown field is ignored, warned about or refused;
``Secret.stringData`` is folded into ``data``.

Callers: ``objects`` (create, update, patch and apply paths). Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from trainyard.cluster.server.apiserver import causes, errors
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.writes import schema
from trainyard.cluster.server.apiserver.writes.schema import prune_metadata


def cannot_handle(rt: ResourceType, why: str) -> errors.ApiError:
    return errors.bad_request(f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: {why}')


def decode_body(
    rt: ResourceType, obj: dict[str, Any], directive: str, warnings: list[str] | None, *, patch: bool = False
) -> None:
    """Decode a write's object in place: type checks, conversions, pruning and defaults.

    Unknown fields are dropped; ``Strict`` rejects them instead (400 on create and update, 422
    on patch, as upstream), ``Warn`` (the default) appends one warning per field.
    """
    # The Strict answer to a patch quotes the patched object as it was before pruning.
    patched = json.dumps(obj, sort_keys=True, separators=(",", ":")) if patch and directive == "Strict" else ""
    try:
        unknown = decode(rt, obj)
    except DecodeError as exc:
        raise cannot_handle(rt, str(exc)) from exc
    if rt.custom:
        unknown += schema.prune(obj, rt.schema)
        schema.drop_nulls(obj, rt.schema)
        schema.apply_defaults(obj, rt.schema)
    if not unknown or directive == "Ignore":
        return
    fields = ", ".join(f'unknown field "{path}"' for path in unknown)
    if directive == "Strict":
        if patch:
            problem = causes.invalid("patch", patched, f"strict decoding error: {fields}")
            raise errors.ApiError(
                422,
                "Invalid",
                f' "" is invalid: {causes.render([problem])}',
                {"causes": [{"reason": problem[0], "field": "patch", "message": problem[2]}]},
            )
        raise cannot_handle(rt, f"strict decoding error: {fields}")
    if warnings is not None:
        warnings += [f'unknown field "{path}"' for path in unknown]


class DecodeError(Exception):
    """The body cannot become the typed object; the message follows ``json: cannot unmarshal``."""


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _unmarshal(value: Any, struct_field: str, go_type: str) -> DecodeError:
    kind = _json_kind(value)
    return DecodeError(f"json: cannot unmarshal {kind} into Go struct field {struct_field} of type {go_type}")


def _string_map(value: Any, struct_field: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        raise _unmarshal(value, struct_field, "map[string]string")
    for item in value.values():
        if not isinstance(item, str):
            raise _unmarshal(item, struct_field, "string")


def _base64_problem(text: str) -> int | None:
    """Where Go's base64.StdEncoding gives up on ``text`` (it skips newlines), or None."""
    clean = text.replace("\r", "").replace("\n", "")
    alphabet = re.compile(r"[A-Za-z0-9+/]")
    for i, ch in enumerate(clean):
        if ch == "=":
            tail = clean[i:]
            if tail not in ("=", "==") or (len(clean) % 4) != 0:
                return i
            break
        if not alphabet.match(ch):
            return i
    if len(clean) % 4:
        return len(clean) - len(clean) % 4
    try:
        base64.b64decode(clean, validate=True)
    except (binascii.Error, ValueError):
        return len(clean)
    return None


def decode(rt: ResourceType, obj: dict[str, Any]) -> list[str]:
    """Type checks and conversions of decoding; returns the unknown metadata fields it dropped.

    Raises ``DecodeError`` for values the typed object cannot hold.
    """
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise _unmarshal(meta, f"{rt.kind}.metadata", "v1.ObjectMeta")
    _string_map(meta.get("labels"), "ObjectMeta.metadata.labels")
    _string_map(meta.get("annotations"), "ObjectMeta.metadata.annotations")
    for key, go_type in (("name", "string"), ("generateName", "string"), ("namespace", "string")):
        if key in meta and meta[key] is not None and not isinstance(meta[key], str):
            raise _unmarshal(meta[key], f"ObjectMeta.metadata.{key}", go_type)
    finalizers = meta.get("finalizers")
    if finalizers is not None and (not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)):
        raise _unmarshal(finalizers, "ObjectMeta.metadata.finalizers", "[]string")
    refs = meta.get("ownerReferences")
    if refs is not None and (not isinstance(refs, list) or not all(isinstance(r, dict) for r in refs)):
        raise _unmarshal(refs, "ObjectMeta.metadata.ownerReferences", "[]v1.OwnerReference")
    unknown = prune_metadata(meta)
    if rt.key == "core/configmaps":
        _string_map(obj.get("data"), "ConfigMap.data")
        binary = obj.get("binaryData")
        if binary is not None and not isinstance(binary, dict):
            raise _unmarshal(binary, "ConfigMap.binaryData", "map[string][]uint8")
        for value in (binary or {}).values():
            _check_base64(value, "ConfigMap.binaryData")
    elif rt.key == "core/secrets":
        data = obj.get("data")
        if data is not None and not isinstance(data, dict):
            raise _unmarshal(data, "Secret.data", "map[string][]uint8")
        for value in (data or {}).values():
            _check_base64(value, "Secret.data")
        _string_map(obj.get("stringData"), "Secret.stringData")
        # stringData is write-only: it is merged into data on the way in, as the real server does.
        for key, value in (obj.pop("stringData", None) or {}).items():
            obj.setdefault("data", {})[key] = base64.b64encode(value.encode()).decode()
    elif rt.key == "core/pods":
        spec = obj.get("spec")
        if spec is not None and not isinstance(spec, dict):
            raise _unmarshal(spec, "Pod.spec", "v1.PodSpec")
        for key in ("containers", "initContainers"):
            value = (spec or {}).get(key)
            if value is not None and (not isinstance(value, list) or not all(isinstance(c, dict) for c in value)):
                raise _unmarshal(value, f"PodSpec.spec.{key}", "[]v1.Container")
            for container in value or []:
                for field in ("name", "image"):
                    _scalar(container.get(field), str, f"Container.spec.{key}.{field}", "string")
                for port in container.get("ports") or []:
                    for field in ("containerPort", "hostPort"):
                        _scalar((port or {}).get(field), int, f"ContainerPort.spec.{key}.ports.{field}", "int32")
    elif rt.key == "core/services":
        spec = obj.get("spec")
        if spec is not None and not isinstance(spec, dict):
            raise _unmarshal(spec, "Service.spec", "v1.ServiceSpec")
        ports = (spec or {}).get("ports")
        if ports is not None and (not isinstance(ports, list) or not all(isinstance(p, dict) for p in ports)):
            raise _unmarshal(ports, "ServiceSpec.spec.ports", "[]v1.ServicePort")
        for port in ports or []:
            _scalar(port.get("port"), int, "ServicePort.spec.ports.port", "int32")
    elif rt.key in ("core/persistentvolumeclaims", "core/persistentvolumes"):
        _storage_types(obj, rt.kind)
    elif rt.key == "storage.k8s.io/storageclasses":
        for field in ("provisioner", "reclaimPolicy", "volumeBindingMode"):
            _scalar(obj.get(field), str, f"StorageClass.{field}", "string")
        _scalar(obj.get("allowVolumeExpansion"), bool, "StorageClass.allowVolumeExpansion", "bool")
        _string_map(obj.get("parameters"), "StorageClass.parameters")
    return unknown


def _storage_types(obj: dict[str, Any], kind: str) -> None:
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, dict):
        raise _unmarshal(spec, f"{kind}.spec", f"v1.{kind}Spec")
    spec = spec or {}
    modes = spec.get("accessModes")
    if modes is not None and (not isinstance(modes, list) or not all(isinstance(m, str) for m in modes)):
        raise _unmarshal(modes, f"{kind}Spec.spec.accessModes", "[]v1.PersistentVolumeAccessMode")
    for field in ("storageClassName", "volumeName", "volumeMode", "persistentVolumeReclaimPolicy"):
        _scalar(spec.get(field), str, f"{kind}Spec.spec.{field}", "string")
    sizes = (spec.get("resources") or {}) if kind == "PersistentVolumeClaim" else spec
    if not isinstance(sizes, dict):
        raise _unmarshal(sizes, f"{kind}Spec.spec.resources", "v1.VolumeResourceRequirements")
    for field in ("requests", "limits", "capacity"):
        value = sizes.get(field)
        if value is not None and (
            not isinstance(value, dict) or not all(isinstance(v, (str, int)) for v in value.values())
        ):
            raise _unmarshal(value, f"{kind}Spec.spec.{field}", "v1.ResourceList")
    for field in ("claimRef", "hostPath", "local", "selector", "nodeAffinity"):
        value = spec.get(field)
        if value is not None and not isinstance(value, dict):
            raise _unmarshal(value, f"{kind}Spec.spec.{field}", "struct")


def _scalar(value: Any, kind: type, struct_field: str, go_type: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, kind):
        raise _unmarshal(value, struct_field, go_type)


def _check_base64(value: Any, struct_field: str) -> None:
    if not isinstance(value, str):
        raise _unmarshal(value, struct_field, "[]uint8")
    at = _base64_problem(value)
    if at is not None:
        raise DecodeError(f"illegal base64 data at input byte {at}")
