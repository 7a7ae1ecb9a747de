"""Write-time checks of objects as kube-apiserver (v1.32) makes them, in its words, once the body
is decoded (``decoding``):

* ``validate_metadata``: ObjectMeta rules shared by every kind: the name format of the kind
  (DNS subdomain, DNS label for namespaces, DNS-1035 label for services), label and annotation
  keys and values, the 256 KiB annotation budget, owner references, finalizer names.
* ``validate_builtin``: per-kind rules for the built-ins the plane serves, at least what the
  ``kubernetes`` 37 client needs to read an object back (pod ``spec.containers``, event
  ``involvedObject``) plus the common rules of pods, services, config maps, secrets, namespaces
  and CRDs.

Not implemented: immutability rules on update (pod spec, secret type, ...), most of PodSpec
(volumes, probes, resources, security contexts) and ServiceSpec (IP families, node ports).

``default_toleration_seconds`` is the DefaultTolerationSeconds plugin: a pod (created or updated) that does not
tolerate the ``node.kubernetes.io/not-ready`` or ``unreachable`` NoExecute taints gets a
toleration of each for kube-apiserver's ``--default-*-toleration-seconds`` (300 s), so the taint
eviction controller evicts it that long after its node failed.

``admit`` first suspends a new job that names a Kueue LocalQueue (Kueue's mutating webhook,
``api.kueue.integrations``), runs ``validate`` and then, for a resource of a registered job kind
(``trainyard.api.kinds``), the job webhook (``trainyard.api.validation.review_job``), whose
deprecation notes become Warning headers; any other custom kind with a row in
``trainyard.api.webhooks`` (JobSet, the Trainer v2 kinds) gets that webhook: defaults first, then
its rules.

Callers: ``objects`` (create, update and patch paths). Pure: no I/O.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from trainyard.api.kinds import KINDS
from trainyard.api.kueue import integrations as queueing
from trainyard.api.quantity import parse_quantity
from trainyard.api.validation import review_job
from trainyard.api.webhooks import webhook_for
from trainyard.cluster.server.apiserver import causes, errors
from trainyard.cluster.server.apiserver.builtin import autoscaling, disruptionbudgets, jobs, leases, priority, quota
from trainyard.cluster.server.apiserver.causes import Cause
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.writes import schema

ANNOTATIONS_LIMIT = 256 * 1024
CONFIG_LIMIT = 1024 * 1024
NameCheck = Callable[[str], list[str]]


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
    if old is None and subresource is None:
        # Kueue's mutating webhook: a job that names a LocalQueue is created suspended.
        queueing.suspend_if_queued(rt.group, rt.kind, obj)
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


# -- DefaultTolerationSeconds ------------------------------------------------------------------

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def default_toleration_seconds(pod: dict[str, Any], not_ready: int, unreachable: int) -> None:
    """The DefaultTolerationSeconds admission plugin, in place: tolerations a pod lacks are added."""
    spec = pod.setdefault("spec", {})
    tolerations = spec.get("tolerations") or []
    for key, seconds in ((NOT_READY_TAINT, not_ready), (UNREACHABLE_TAINT, unreachable)):
        # As upstream: an empty key or effect counts as tolerating (whatever the operator).
        if not any(
            isinstance(t, dict) and t.get("key", "") in (key, "") and t.get("effect", "") in ("NoExecute", "")
            for t in tolerations
        ):
            tolerations = [
                *tolerations,
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds},
            ]
    spec["tolerations"] = tolerations


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
    disruptionbudgets.KEY: disruptionbudgets.validate,
    autoscaling.KEY: autoscaling.validate,
    jobs.KEY: _job,
    quota.KEY: quota.validate,
}
