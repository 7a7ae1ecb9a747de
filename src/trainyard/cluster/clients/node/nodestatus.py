"""The local node's ``Node`` object as a kubelet registers and heartbeats it: labels, taints, status.

Pure: the node agent measures (``capacity``) and writes; this module only shapes the object.
The node is named after this machine's host name (lower-cased) unless ``yard up --node-name``
says otherwise; it carries the well-known labels kube-scheduler and users select on
(``kubernetes.io/hostname``, ``kubernetes.io/os``, ``kubernetes.io/arch`` and their ``beta.``
twins, ``node-role.kubernetes.io/control-plane``) and the taints ``yard up --taint`` declares.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from trainyard.api.meta import Obj
from trainyard.cluster.clients.node.capacity import Capacity, Pressure
from trainyard.kit.conditions import transition_time

KUBELET_VERSION = "v1.32.0-trainyard"
# Present when `yard up` declared capacity: which resources are simulated rather than measured.
DECLARED_ANNOTATION = "trainyard.dev/declared-capacity"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}
_QUALIFIED = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")

# (condition type, Pressure attribute, (reason, message) when True, (reason, message) when False): kubelet's words.
_PRESSURES = (
    (
        "MemoryPressure",
        "memory",
        ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
        ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ),
    (
        "DiskPressure",
        "disk",
        ("KubeletHasDiskPressure", "kubelet has disk pressure"),
        ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ),
    (
        "PIDPressure",
        "pid",
        ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
        ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ),
)


def arch(machine: str) -> str:
    """Go's GOARCH name for ``uname -m`` (what ``kubernetes.io/arch`` holds)."""
    return _ARCH.get(machine, machine)


def labels(name: str, machine: str, *, control_plane: bool = True) -> dict[str, str]:
    goarch = arch(machine)
    out = {
        "beta.kubernetes.io/arch": goarch,
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": goarch,
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
    }
    if control_plane:
        out["node-role.kubernetes.io/control-plane"] = ""
    return out


def label_problem(key: str, value: str) -> str | None:
    """Why ``key: value`` is not a valid label (kube's qualified-name and label-value rules), or None."""
    if not _QUALIFIED.match(key) or len(key.rpartition("/")[2]) > 63:
        return f'"{key}": a qualified name such as example.com/node-type (at most 63 characters after the prefix)'
    if not _VALUE.match(value) or len(value) > 63:
        return f"\"{value}\": at most 63 alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric"
    return None


def parse_taint(text: str) -> Obj:
    """A taint written as ``kubectl taint`` takes it: ``key[=value]:Effect``; ValueError says what is wrong."""
    spec, sep, effect = text.rpartition(":")
    if not sep or not spec:
        raise ValueError(f"invalid taint {text!r}: write it as key[=value]:Effect")
    key, _, value = spec.partition("=")
    if effect not in TAINT_EFFECTS:
        raise ValueError(f"invalid taint effect {effect!r} in {text!r}: one of {', '.join(TAINT_EFFECTS)}")
    if not _QUALIFIED.match(key) or len(key.rpartition("/")[2]) > 63:
        raise ValueError(f"invalid taint key {key!r} in {text!r}: a qualified name such as example.com/dedicated")
    if not _VALUE.match(value) or len(value) > 63:
        raise ValueError(f"invalid taint value {value!r} in {text!r}: at most 63 alphanumerics, '-', '_' or '.'")
    return {"key": key, "effect": effect, **({"value": value} if value else {})}


def manifest(
    name: str,
    *,
    machine: str,
    capacity: Capacity,
    taints: list[Obj],
    extra_labels: Mapping[str, str] | None = None,
    control_plane: bool = True,
) -> Obj:
    """The Node's metadata and spec (status is written through ``/status``); ``extra_labels`` from a nodes file."""
    annotations = {}
    if capacity.declared:
        annotations[DECLARED_ANNOTATION] = ",".join(sorted(capacity.declared))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels(name, machine, control_plane=control_plane) | dict(extra_labels or {}),
            "annotations": annotations,
        },
        "spec": {"taints": taints} if taints else {},
    }


def conditions(previous: list[Obj], pressure: Pressure, now: str) -> list[Obj]:
    """The kubelet's four node conditions, heartbeat ``now`` (a transition time moves only on a
    change), then the others ``previous`` holds."""
    before = {c.get("type"): c for c in previous if isinstance(c, dict)}
    rows = [
        (kind, "True" if getattr(pressure, attr) else "False", *(on if getattr(pressure, attr) else off))
        for kind, attr, on, off in _PRESSURES
    ]
    rows.append(("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    out = []
    for kind, status, reason, message in rows:
        old = before.get(kind) or {}
        since = transition_time(old.get("status"), old.get("lastTransitionTime") or None, status, now)
        out.append(
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                "lastHeartbeatTime": now,
                "lastTransitionTime": since,
            }
        )
    # Conditions others set (a spot interruption notice, node-problem-detector's) stay: the kubelet
    # patches its own by type (a strategic merge); this merge patch writes the list whole.
    ours = {row[0] for row in rows}
    out.extend(c for c in previous if isinstance(c, dict) and c.get("type") not in ours)
    return out


def status(
    name: str,
    *,
    capacity: Capacity,
    address: str,
    conditions: list[Obj],
    uname: tuple[str, str, str],
) -> Obj:
    """``status`` of the Node: capacity = allocatable, addresses, conditions and ``nodeInfo``."""
    sysname, release, machine = uname
    resources = capacity.resources()
    return {
        "capacity": resources,
        "allocatable": dict(resources),
        "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
        "conditions": conditions,
        "nodeInfo": {
            "kubeletVersion": KUBELET_VERSION,
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": arch(machine),
            "containerRuntimeVersion": "trainyard-process://1",
            "osImage": sysname,
            "kernelVersion": release,
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
        },
    }
