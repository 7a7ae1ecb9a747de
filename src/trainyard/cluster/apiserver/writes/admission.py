"""Write-time checks of objects as kube-apiserver (v1.32) makes them, in its words.

Three stages, in the order the real server runs them:

* ``decode``: what decoding the request body into the typed object does before any validation.
  Values Go cannot decode (a number as a ConfigMap value, bad base64 in a Secret, labels that are
  not a string map) fail with 400 ``... cannot be handled as a <Kind>: json: cannot unmarshal
  ...``; unknown ``metadata`` fields are dropped and reported, like the unknown fields of a custom
  resource (``schema``); ``Secret.stringData`` is folded into ``data``.
* ``validate_metadata``: ObjectMeta rules shared by every kind: the name format of the kind
  (DNS subdomain, DNS label for namespaces, DNS-1035 label for services), label and annotation
  keys and values, the 256 KiB annotation budget, owner references, finalizer names.
* ``validate_builtin``: per-kind rules for the built-ins the plane serves, at least what the
  ``kubernetes`` 37 client needs to read an object back (pod ``spec.containers``, event
  ``involvedObject``) plus the common rules of pods, services, config maps, secrets, namespaces
  and CRDs.

Not implemented: immutability rules on update (pod spec, secret type, ...), most of PodSpec
(volumes, probes, resources, security contexts) and ServiceSpec (IP families, node ports).

``admit`` runs ``validate`` and then, for a resource of a registered job kind
(``trainyard.api.kinds``), the job webhook (``trainyard.api.validation.review_job``), whose
deprecation notes become Warning headers; any other custom kind with a row in
``trainyard.api.webhooks`` (JobSet, the Trainer v2 kinds) gets that webhook: defaults first, then
its rules.

Callers: ``objects`` (create, update and patch paths). Pure: no I/O.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable
from typing import Any

from trainyard.api.kinds import KINDS
from trainyard.api.quantity import parse_quantity
from trainyard.api.validation import review_job
from trainyard.api.webhooks import webhook_for
from trainyard.cluster.apiserver import causes, errors
from trainyard.cluster.apiserver.builtin import autoscaling, jobs, leases, priority
from trainyard.cluster.apiserver.causes import Cause
from trainyard.cluster.apiserver.registry import ResourceType
from trainyard.cluster.apiserver.writes import schema
from trainyard.cluster.apiserver.writes.schema import prune_metadata

ANNOTATIONS_LIMIT = 256 * 1024
CONFIG_LIMIT = 1024 * 1024
NameCheck = Callable[[str], list[str]]


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


def validate(rt: ResourceType, obj: dict[str, Any], subresource: str | None = None) -> list[Cause]:
    """Every write-time check of ``obj`` for one kind; the status subresource checks only status."""
    out = validate_metadata(rt, obj)
    if subresource == "status":
        if rt.custom and "status" in obj:
            status_schema = ((rt.schema or {}).get("properties") or {}).get("status")
            out += schema.validate(obj["status"], status_schema, "status")
            out += schema.validate_scale(obj, rt.scale, ("statusReplicasPath",))
        return out
    if not rt.custom:
        return out + validate_builtin(rt, obj)
    out += schema.validate(obj, rt.schema)
    out += schema.validate_scale(obj, rt.scale)
    out += schema.validate_embedded(obj, rt.schema)
    out += schema.validate_list_types(obj, rt.schema)
    return out


def admit(
    rt: ResourceType,
    obj: dict[str, Any],
    subresource: str | None = None,
    old: dict[str, Any] | None = None,
    *,
    warnings: list[str] | None = None,
) -> None:
    """``validate``, then the job webhook for a job kind's objects: 422 ``Invalid`` with every cause."""
    hook = webhook_for(rt.group, rt.kind) if rt.custom and subresource is None else None
    if hook is not None:
        hook.default(obj, old)  # the mutating webhook runs before anything validates
    found = validate(rt, obj, subresource)
    if hook is not None and not found:
        found += [(e.type.value, e.field, e.message) for e in hook.validate(obj, old)]
    if rt.key == jobs.KEY and old is not None and subresource is None:
        found += jobs.update_problems(old, obj)
    job = None
    if rt.custom and subresource is None:
        # By group and kind from the table of job kinds, so a kind of another group needs nothing here.
        job = next((info for info in KINDS.values() if (info.group, info.kind) == (rt.group, rt.kind)), None)
    if job is not None and not found:
        # The job webhook runs only on objects the CRD schema accepted, as admission does.
        review = review_job(obj, job, old)
        found += [(e.type.value, e.field, e.message) for e in review.errors]
        if warnings is not None:
            warnings += review.warnings
    if found:
        raise errors.invalid(rt, obj.get("metadata", {}).get("name", ""), found)


# -- decoding -------------------------------------------------------------------------------


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


# -- metadata -------------------------------------------------------------------------------


def name_rule(rt: ResourceType) -> NameCheck | None:
    """The name format of a kind; ``None`` where the API server checks none (core/v1 Events)."""
    if rt.key == "core/events":
        return None
    if rt.key == "core/namespaces":
        return causes.is_dns1123_label
    if rt.key == "core/services":
        return causes.is_dns1035_label
    return causes.is_dns1123_subdomain


def _mask_trailing_dash(prefix: str) -> str:
    return prefix[:-1] + "a" if len(prefix) > 1 and prefix.endswith("-") else prefix


def validate_metadata(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    meta = obj.get("metadata") or {}
    out: list[Cause] = []
    rule = name_rule(rt)
    if rule is not None:
        if meta.get("generateName"):
            out += [
                causes.invalid("metadata.generateName", meta["generateName"], m)
                for m in rule(_mask_trailing_dash(meta["generateName"]))
            ]
        if meta.get("name"):
            out += [causes.invalid("metadata.name", meta["name"], m) for m in rule(meta["name"])]
    if not meta.get("name"):
        out.append(causes.required("metadata.name", "name or generateName is required"))
    for key, value in (meta.get("labels") or {}).items():
        out += [causes.invalid("metadata.labels", key, m) for m in causes.is_qualified_name(key)]
        out += [causes.invalid("metadata.labels", value, m) for m in causes.is_label_value(value)]
    annotations = meta.get("annotations") or {}
    for key in annotations:
        out += [causes.invalid("metadata.annotations", key, m) for m in causes.is_qualified_name(key.lower())]
    if sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items()) > ANNOTATIONS_LIMIT:
        out.append(causes.too_long("metadata.annotations", ANNOTATIONS_LIMIT))
    out += _owner_references(meta.get("ownerReferences") or [])
    finalizers = meta.get("finalizers") or []
    for finalizer in finalizers:
        out += [causes.invalid("metadata.finalizers", finalizer, m) for m in causes.is_qualified_name(finalizer)]
    if "orphan" in finalizers and "foregroundDeletion" in finalizers:
        out.append(
            causes.invalid(
                "metadata.finalizers", finalizers, "finalizer orphan and foregroundDeletion cannot be both set"
            )
        )
    return out


def _owner_references(refs: list[dict[str, Any]]) -> list[Cause]:
    out: list[Cause] = []
    path = "metadata.ownerReferences"
    controller = ""
    for ref in refs:
        api_version = ref.get("apiVersion") or ""
        if not api_version.rpartition("/")[2]:
            out.append(causes.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for key in ("kind", "name", "uid"):
            if not ref.get(key):
                out.append(causes.invalid(f"{path}.{key}", ref.get(key) or "", f"{key} must not be empty"))
        if api_version == "v1" and ref.get("kind") == "Event":
            out.append(causes.invalid(path, ref, "/v1, Kind=Event is disallowed from being an owner"))
        if ref.get("controller") is True:
            this = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                out.append(
                    causes.invalid(
                        path,
                        refs,
                        'Only one reference can have Controller set to true. Found "true" in references for '
                        f"{controller} and {this}",
                    )
                )
            else:
                controller = this
    return out


# -- built-in kinds -------------------------------------------------------------------------

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")


def validate_builtin(rt: ResourceType, obj: dict[str, Any]) -> list[Cause]:
    check = _BUILTIN.get(rt.key)
    return check(obj) if check is not None else []


def _pod(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    names: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            out += _container(container, f"spec.{key}[{i}]", names)
    if not spec.get("containers"):
        out.insert(0, causes.required("spec.containers"))
    volumes: set[str] = set()
    for i, volume in enumerate(spec.get("volumes") or []):
        name = volume.get("name") if isinstance(volume, dict) else None
        if not name:
            out.append(causes.required(f"spec.volumes[{i}].name"))
            continue
        out += [causes.invalid(f"spec.volumes[{i}].name", name, m) for m in causes.is_dns1123_label(str(name))]
        if name in volumes:
            out.append(causes.duplicate(f"spec.volumes[{i}].name", name))
        volumes.add(name)
    for key in ("initContainers", "containers"):
        for i, container in enumerate(spec.get(key) or []):
            out += _mounts(container.get("volumeMounts") or [], f"spec.{key}[{i}].volumeMounts", volumes)
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in _RESTART_POLICIES:
        out.append(causes.not_supported("spec.restartPolicy", policy, _RESTART_POLICIES))
    return out


def _job(obj: dict[str, Any]) -> list[Cause]:
    """A Job's own rules, then its template's pod spec checked as a pod's (but restartPolicy)."""
    template = (obj.get("spec") or {}).get("template") or {}
    pod_spec = {k: v for k, v in (template.get("spec") or {}).items() if k != "restartPolicy"}
    out = jobs.validate(obj)
    out += [(reason, f"spec.template.{field}", message) for reason, field, message in _pod({"spec": pod_spec})]
    return out


def _container(c: dict[str, Any], path: str, names: set[str]) -> list[Cause]:
    out: list[Cause] = []
    name = c.get("name")
    if not name:
        out.append(causes.required(f"{path}.name"))
    elif not isinstance(name, str):
        out.append(causes.invalid(f"{path}.name", name, "must be a string"))
    else:
        out += [causes.invalid(f"{path}.name", name, m) for m in causes.is_dns1123_label(name)]
        if name in names:
            out.append(causes.duplicate(f"{path}.name", name))
        names.add(name)
    if not c.get("image"):
        out.append(causes.required(f"{path}.image"))
    port_names: set[str] = set()
    for i, port in enumerate(c.get("ports") or []):
        where = f"{path}.ports[{i}]"
        if not isinstance(port, dict):
            out.append(causes.invalid(where, port, "must be an object"))
            continue
        if port.get("name"):
            problems = causes.is_port_name(str(port["name"]))
            out += [causes.invalid(f"{where}.name", port["name"], m) for m in problems]
            if not problems and port["name"] in port_names:
                out.append(causes.duplicate(f"{where}.name", port["name"]))
            port_names.add(port["name"])
        if not port.get("containerPort"):
            out.append(causes.required(f"{where}.containerPort"))
        else:
            out += [
                causes.invalid(f"{where}.containerPort", port["containerPort"], m)
                for m in causes.is_port_number(port["containerPort"])
            ]
        if port.get("hostPort"):
            out += [
                causes.invalid(f"{where}.hostPort", port["hostPort"], m)
                for m in causes.is_port_number(port["hostPort"])
            ]
        if port.get("protocol") is not None and port["protocol"] not in _PROTOCOLS:
            out.append(causes.not_supported(f"{where}.protocol", port["protocol"], _PROTOCOLS))
    for i, env in enumerate(c.get("env") or []):
        if not isinstance(env, dict) or not env.get("name"):
            out.append(causes.required(f"{path}.env[{i}].name"))
    return out


def _mounts(mounts: list[Any], path: str, volumes: set[str]) -> list[Cause]:
    out: list[Cause] = []
    for i, mount in enumerate(mounts):
        mount = mount if isinstance(mount, dict) else {}
        if not mount.get("name"):
            out.append(causes.required(f"{path}[{i}].name"))
        elif mount["name"] not in volumes:
            out.append(causes.not_found(f"{path}[{i}].name", mount["name"]))
        if not mount.get("mountPath"):
            out.append(causes.required(f"{path}[{i}].mountPath"))
    return out


_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")


def _storage(obj: dict[str, Any], where: str, *size_path: str) -> list[Cause]:
    """A PersistentVolumeClaim's or PersistentVolume's access modes and size, the fields a volume needs."""
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    modes = spec.get("accessModes")
    if not modes:
        out.append(causes.required("spec.accessModes", "at least 1 access mode is required"))
    for mode in modes if isinstance(modes, list) else []:
        if mode not in _ACCESS_MODES:
            out.append(causes.not_supported("spec.accessModes", mode, _ACCESS_MODES))
    sizes: Any = spec
    for key in size_path:
        sizes = sizes.get(key) if isinstance(sizes, dict) else None
    if not isinstance(sizes, dict) or "storage" not in sizes:
        out.append(causes.required(where))
    else:
        try:
            parse_quantity(str(sizes["storage"]))
        except ValueError as exc:
            out.append(causes.invalid(where, sizes["storage"], str(exc)))
    return out


def _service(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    kind = spec.get("type") or "ClusterIP"
    if kind not in _SERVICE_TYPES:
        out.append(causes.not_supported("spec.type", kind, _SERVICE_TYPES))
    ports = spec.get("ports") or []
    headless = spec.get("clusterIP") == "None"
    if not ports and not headless and kind != "ExternalName":
        out.append(causes.required("spec.ports"))
    names: set[str] = set()
    for i, port in enumerate(ports):
        where = f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            out.append(causes.required(f"{where}.name"))
        elif name:
            out += [causes.invalid(f"{where}.name", name, m) for m in causes.is_dns1123_label(str(name))]
            if name in names:
                out.append(causes.duplicate(f"{where}.name", name))
            names.add(name)
        number = port.get("port", 0)
        out += [causes.invalid(f"{where}.port", number, m) for m in causes.is_port_number(number)]
        if port.get("protocol") is not None and port["protocol"] not in _PROTOCOLS:
            out.append(causes.not_supported(f"{where}.protocol", port["protocol"], _PROTOCOLS))
        target = port.get("targetPort")
        if isinstance(target, str):
            out += [causes.invalid(f"{where}.targetPort", target, m) for m in causes.is_port_name(target)]
        elif target not in (None, 0):
            out += [causes.invalid(f"{where}.targetPort", target, m) for m in causes.is_port_number(target)]
    return out


def _event(obj: dict[str, Any]) -> list[Cause]:
    involved = obj.get("involvedObject")
    if not isinstance(involved, dict) or not involved:
        return [causes.required("involvedObject")]
    namespace = (obj.get("metadata") or {}).get("namespace") or ""
    involved_ns = involved.get("namespace") or ""
    mismatch = causes.invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not obj.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (involved_ns and involved_ns != namespace):
            return [mismatch]
    elif not involved_ns and namespace not in ("default", "kube-system"):
        return [mismatch]
    return []


def _keys(obj: dict[str, Any], field: str) -> list[Cause]:
    out: list[Cause] = []
    for key in obj.get(field) or {}:
        out += [causes.invalid(f"{field}[{key}]", key, m) for m in causes.is_config_map_key(key)]
    return out


def _config_map(obj: dict[str, Any]) -> list[Cause]:
    out = _keys(obj, "data") + _keys(obj, "binaryData")
    for key in set(obj.get("data") or {}) & set(obj.get("binaryData") or {}):
        out.append(causes.invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
    size = sum(len(k) + len(v.encode()) for k, v in (obj.get("data") or {}).items())
    size += sum(len(k) + len(base64.b64decode(v)) for k, v in (obj.get("binaryData") or {}).items())
    if size > CONFIG_LIMIT:
        out.append(causes.too_long("[]", CONFIG_LIMIT))
    return out


def _secret(obj: dict[str, Any]) -> list[Cause]:
    out = _keys(obj, "data")
    if sum(len(base64.b64decode(v)) for v in (obj.get("data") or {}).values()) > CONFIG_LIMIT:
        out.append(causes.too_long("data", CONFIG_LIMIT))
    return out


def _crd(obj: dict[str, Any]) -> list[Cause]:
    spec = obj.get("spec") or {}
    names = spec.get("names") or {}
    out: list[Cause] = []
    group, plural = spec.get("group"), names.get("plural")
    name = (obj.get("metadata") or {}).get("name")
    if group and plural and name != f"{plural}.{group}":
        out.append(causes.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group'))
    for field, value in (("spec.group", group), ("spec.names.plural", plural), ("spec.names.kind", names.get("kind"))):
        if not value:
            out.append(causes.required(field))
    scope = spec.get("scope")
    if scope not in ("Cluster", "Namespaced"):
        out.append(causes.not_supported("spec.scope", scope or "", ("Cluster", "Namespaced")))
    versions = spec.get("versions") or []
    if sum(1 for v in versions if isinstance(v, dict) and v.get("storage")) != 1:
        out.append(causes.invalid("spec.versions", versions, "must have exactly one version marked as storage version"))
    for i, version in enumerate(versions):
        if not isinstance(version, dict):
            continue
        if not version.get("name"):
            out.append(causes.required(f"spec.versions[{i}].name"))
        where = f"spec.versions[{i}].schema.openAPIV3Schema"
        version_schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if version_schema is None:
            out.append(causes.required(where, "schemas are required"))
        else:
            out += schema.structural_problems(version_schema, where)
    return out


_BUILTIN: dict[str, Callable[[dict[str, Any]], list[Cause]]] = {
    "core/pods": _pod,
    "core/services": _service,
    "core/events": _event,
    "core/configmaps": _config_map,
    "core/secrets": _secret,
    "core/persistentvolumeclaims": lambda obj: _storage(obj, "spec.resources[storage]", "resources", "requests"),
    "core/persistentvolumes": lambda obj: _storage(obj, "spec.capacity", "capacity"),
    "apiextensions.k8s.io/customresourcedefinitions": _crd,
    priority.KEY: priority.validate,
    leases.KEY: leases.validate,
    autoscaling.KEY: autoscaling.validate,
    jobs.KEY: _job,
}
