"""A container's environment, computed the way the kubelet does, from the pod and the objects it names.

Pure: the node agent fetches the ConfigMaps and Secrets a pod refers to (``referenced``) and hands
them in as ``Sources``; ``container_env`` then applies ``envFrom`` (in order, prefixes included),
then ``env`` (``value`` with ``$(VAR)`` expansion, ``valueFrom`` with ``fieldRef``,
``resourceFieldRef``, ``configMapKeyRef`` and ``secretKeyRef``). A reference that cannot be
satisfied raises ``ConfigError`` worded like the kubelet's ``CreateContainerConfigError`` message.
"""

from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal

from trainyard.api.meta import Obj
from trainyard.api.quantity import parse_quantity

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.*)'\]$")
# envFrom keys the kubelet accepts as variable names; others are skipped (it emits an event).
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


class ConfigError(Exception):
    """A container cannot be created: the message is what the kubelet would report."""


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined names are replaced, ``$$`` escapes, others stay."""

    def sub(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REF.sub(sub, text)


@dataclass
class Sources:
    """The objects a pod refers to, as read from the API; a name mapped to None does not exist."""

    config_maps: dict[str, Obj | None] = field(default_factory=dict)
    secrets: dict[str, Obj | None] = field(default_factory=dict)
    # PersistentVolumeClaims by name, and the PersistentVolumes bound to them.
    claims: dict[str, Obj | None] = field(default_factory=dict)
    persistent_volumes: dict[str, Obj | None] = field(default_factory=dict)
    # Service-account tokens for projected volumes by (audience, expirationSeconds); None: not issued.
    tokens: dict[tuple[str, int], str | None] = field(default_factory=dict)


@dataclass
class Node:
    """What the downward API reports about where the pod runs."""

    name: str
    address: str
    cpu: Decimal
    memory: Decimal


def referenced(pod: Obj) -> tuple[set[str], set[str]]:
    """Names of the ConfigMaps and Secrets the pod's containers and volumes refer to."""
    spec = pod.get("spec") or {}
    config_maps: set[str] = set()
    secrets: set[str] = set()
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        for source in container.get("envFrom") or []:
            if name := (source.get("configMapRef") or {}).get("name"):
                config_maps.add(name)
            if name := (source.get("secretRef") or {}).get("name"):
                secrets.add(name)
        for var in container.get("env") or []:
            value_from = var.get("valueFrom") or {}
            if name := (value_from.get("configMapKeyRef") or {}).get("name"):
                config_maps.add(name)
            if name := (value_from.get("secretKeyRef") or {}).get("name"):
                secrets.add(name)
    for volume in spec.get("volumes") or []:
        if name := (volume.get("configMap") or {}).get("name"):
            config_maps.add(name)
        if name := (volume.get("secret") or {}).get("secretName"):
            secrets.add(name)
        for source in (volume.get("projected") or {}).get("sources") or []:
            if name := (source.get("configMap") or {}).get("name"):
                config_maps.add(name)
            if name := (source.get("secret") or {}).get("name"):
                secrets.add(name)
    return config_maps, secrets


def token_key(source: Obj) -> tuple[str, int]:
    """A projected ``serviceAccountToken`` source's (audience, expirationSeconds), defaults applied."""
    return str(source.get("audience") or ""), int(source.get("expirationSeconds") or 3600)


def token_requests(pod: Obj) -> set[tuple[str, int]]:
    """The tokens a pod's projected volumes need, as ``token_key`` names them."""
    return {
        token_key(source["serviceAccountToken"] or {})
        for volume in (pod.get("spec") or {}).get("volumes") or []
        for source in (volume.get("projected") or {}).get("sources") or []
        if "serviceAccountToken" in source
    }


def object_data(obj: Obj, *, secret: bool) -> dict[str, bytes]:
    """A ConfigMap's ``data`` and ``binaryData``, or a Secret's decoded ``data`` and ``stringData``."""
    out: dict[str, bytes] = {}
    if secret:
        for key, value in (obj.get("data") or {}).items():
            out[key] = base64.b64decode(value or "")
        for key, value in (obj.get("stringData") or {}).items():
            out[key] = str(value).encode()
    else:
        for key, value in (obj.get("data") or {}).items():
            out[key] = str(value).encode()
        for key, value in (obj.get("binaryData") or {}).items():
            out[key] = base64.b64decode(value or "")
    return out


def _lookup(sources: Sources, namespace: str, ref: Obj, *, secret: bool) -> dict[str, bytes] | None:
    """The named object's data; None when it is missing and optional, ConfigError when required."""
    name = ref.get("name") or ""
    table = sources.secrets if secret else sources.config_maps
    obj = table.get(name)
    if obj is None:
        if ref.get("optional"):
            return None
        raise ConfigError(f'{"secret" if secret else "configmap"} "{name}" not found')
    return object_data(obj, secret=secret)


def _key_ref(sources: Sources, namespace: str, ref: Obj, *, secret: bool) -> str | None:
    data = _lookup(sources, namespace, ref, secret=secret)
    if data is None:
        return None
    key = ref.get("key") or ""
    if key not in data:
        if ref.get("optional"):
            return None
        kind = "Secret" if secret else "ConfigMap"
        raise ConfigError(f"couldn't find key {key} in {kind} {namespace}/{ref.get('name') or ''}")
    return data[key].decode(errors="replace")


def field_ref(pod: Obj, path: str, node: Node) -> str:
    m = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if subscript := _SUBSCRIPT.match(path):
        return str((m.get(subscript[1]) or {}).get(subscript[2], ""))
    known = {
        "metadata.name": m.get("name", ""),
        "metadata.namespace": m.get("namespace", ""),
        "metadata.uid": m.get("uid", ""),
        "spec.nodeName": spec.get("nodeName") or node.name,
        "spec.serviceAccountName": spec.get("serviceAccountName") or "default",
        "status.podIP": node.address,
        "status.hostIP": node.address,
        "status.podIPs": node.address,
        "status.hostIPs": node.address,
    }
    if path not in known:
        raise ConfigError(f"unsupported fieldPath: {path}")
    return str(known[path])


def resource_field_ref(pod: Obj, container: Obj, ref: Obj, node: Node) -> str:
    """Like the kubelet: an unset limit is the node's allocatable, an unset request is zero (or the limit)."""
    wanted = ref.get("containerName") or container.get("name")
    spec = pod.get("spec") or {}
    target = next(
        (c for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])] if c.get("name") == wanted),
        None,
    )
    if target is None:
        raise ConfigError(f"container {wanted} not found in pod {pod['metadata'].get('name', '')}")
    resources = target.get("resources") or {}
    resource = ref.get("resource") or ""
    kind, _, name = resource.partition(".")
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    allocatable = {"cpu": node.cpu, "memory": node.memory}
    if name not in allocatable or kind not in ("limits", "requests"):
        raise ConfigError(f"unsupported container resource: {resource}")
    try:
        if kind == "limits":
            value = parse_quantity(limits[name]) if name in limits else allocatable[name]
        elif name in requests:
            value = parse_quantity(requests[name])
        else:
            value = parse_quantity(limits[name]) if name in limits else Decimal(0)
        divisor = parse_quantity(ref.get("divisor") or "1")
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if divisor <= 0:
        raise ConfigError(f"invalid divisor {ref.get('divisor')}")
    return str(math.ceil(value / divisor))


def container_env(pod: Obj, container: Obj, base: dict[str, str], sources: Sources, node: Node) -> dict[str, str]:
    """The environment a container's process starts with: ``base``, then ``envFrom``, then ``env``."""
    namespace = (pod.get("metadata") or {}).get("namespace", "default")
    env = dict(base)
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        if "configMapRef" in source:
            data = _lookup(sources, namespace, source["configMapRef"] or {}, secret=False)
        elif "secretRef" in source:
            data = _lookup(sources, namespace, source["secretRef"] or {}, secret=True)
        else:
            continue
        for key, raw in (data or {}).items():
            if _ENV_NAME.match(prefix + key):
                env[prefix + key] = raw.decode(errors="replace")
    for var in container.get("env") or []:
        name = var["name"]
        value_from = var.get("valueFrom")
        if not value_from:
            env[name] = expand(str(var.get("value") or ""), env)
            continue
        value: str | None
        if "fieldRef" in value_from:
            value = field_ref(pod, (value_from["fieldRef"] or {}).get("fieldPath") or "", node)
        elif "resourceFieldRef" in value_from:
            value = resource_field_ref(pod, container, value_from["resourceFieldRef"] or {}, node)
        elif "configMapKeyRef" in value_from:
            value = _key_ref(sources, namespace, value_from["configMapKeyRef"] or {}, secret=False)
        elif "secretKeyRef" in value_from:
            value = _key_ref(sources, namespace, value_from["secretKeyRef"] or {}, secret=True)
        else:
            value = None
        if value is not None:
            env[name] = value
    return env
