"""What the API server does to every written built-in before storing it: defaults and update rules.

A new object gets the status its kind starts with (``on_create``: a Namespace is Active, a Pod
Pending with its QoS class, a CRD established at once; other kinds with a status subresource
start without one, whatever the client sent). A real API server defaults an object each time it decodes
one (``on_write``), so a field a client leaves out of a PUT or adds in a patch (a new Service
port, a Secret's ``stringData``) comes back filled in exactly as on create. Pods additionally
refuse updates to their spec beyond the few fields a kubelet can apply in place
(``ValidatePodUpdate``). Callers: ``Objects`` on create, update and patch of the main resource
(never of ``/status``). Pure: no I/O.
"""

from __future__ import annotations

import base64
import copy

from trainyard.api.meta import Obj
from trainyard.cluster import qos
from trainyard.cluster.server.apiserver.builtin import autoscaling, jobs, limits
from trainyard.cluster.server.apiserver.registry import ResourceType

POD_UPDATABLE = (
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def on_create(rt: ResourceType, obj: Obj, *, now: str) -> None:
    """What a new object of ``rt`` starts with beyond its defaults, in place; ``now`` is its creation time."""
    if rt.key == "core/namespaces":
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        obj["status"] = {"phase": "Active"}
    elif rt.key == "core/pods":
        obj["status"] = {"phase": "Pending", "qosClass": qos.qos_class(obj.get("spec") or {})}
    elif rt.key == "core/services":
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("clusterIP") is None:
            spec["clusterIP"] = "127.0.0.1"
        obj.setdefault("status", {"loadBalancer": {}})
    elif rt.key == "core/secrets":
        obj["type"] = obj.get("type") or "Opaque"
    elif rt.key == "apiextensions.k8s.io/customresourcedefinitions":
        obj["status"] = _crd_status(obj, now)
    elif rt.key in ("core/persistentvolumeclaims", "core/persistentvolumes"):
        obj["status"] = {"phase": "Pending"}
    elif "status" in rt.subresources:
        obj.pop("status", None)
    if rt.key == jobs.KEY:
        jobs.on_create(obj)


def _crd_status(crd: Obj, now: str) -> Obj:
    """A CRD is established as it is created: nothing here can conflict with its names."""
    names = crd.get("spec", {}).get("names", {})
    return {
        "acceptedNames": names,
        "storedVersions": [v["name"] for v in crd.get("spec", {}).get("versions", []) if v.get("storage")],
        "conditions": [
            {"type": t, "status": "True", "reason": r, "message": m, "lastTransitionTime": now}
            for t, r, m in (
                ("NamesAccepted", "NoConflicts", "no conflicts found"),
                ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            )
        ],
    }


def on_write(key: str, obj: Obj) -> None:
    """Fill in the defaults of built-in kind ``key`` (``core/pods``...) in place."""
    if key == "core/pods":
        spec = obj.setdefault("spec", {})
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("schedulerName", "default-scheduler")
    elif key in ("core/persistentvolumeclaims", "core/persistentvolumes"):
        if obj.get("spec") is None:
            obj["spec"] = {}
        spec = obj["spec"]
        spec.setdefault("volumeMode", "Filesystem")
        if key == "core/persistentvolumes":
            spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    elif key == "storage.k8s.io/storageclasses":
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")
    elif key == autoscaling.KEY:
        autoscaling.default(obj)
    elif key == jobs.KEY:
        jobs.default(obj)
    elif key == limits.KEY:
        limits.default(obj)
    elif key == "scheduling.k8s.io/priorityclasses":
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    elif key == "core/services":
        for port in (obj.get("spec") or {}).get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
    elif key == "core/secrets":
        obj.setdefault("type", "Opaque")
        # stringData is write-only: merged into data, base64-encoded, winning over data's keys.
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict) and string_data:
            data = obj.get("data") or {}
            for name, value in string_data.items():
                data[name] = base64.b64encode(str(value).encode()).decode()
            obj["data"] = data


def pod_spec_change(old: Obj, new: Obj) -> str | None:
    """Why updating a pod's spec from ``old`` to ``new`` is forbidden, or None when it is allowed."""
    munged = copy.deepcopy(new)
    for field in ("containers", "initContainers"):
        old_list, new_list = old.get(field) or [], munged.get(field) or []
        if len(old_list) == len(new_list):
            for old_c, new_c in zip(old_list, new_list, strict=True):
                if isinstance(old_c, dict) and isinstance(new_c, dict) and "image" in old_c:
                    new_c["image"] = old_c["image"]
    # activeDeadlineSeconds may be set, or lowered, never raised or removed.
    old_deadline, new_deadline = old.get("activeDeadlineSeconds"), munged.get("activeDeadlineSeconds")
    if isinstance(new_deadline, int) and (old_deadline is None or new_deadline <= old_deadline):
        munged.pop("activeDeadlineSeconds")
        if old_deadline is not None:
            munged["activeDeadlineSeconds"] = old_deadline
    old_tolerations = old.get("tolerations") or []
    new_tolerations = munged.get("tolerations") or []
    if all(t in new_tolerations for t in old_tolerations):
        munged["tolerations"] = old.get("tolerations")
        if munged["tolerations"] is None:
            del munged["tolerations"]
    old_grace, new_grace = old.get("terminationGracePeriodSeconds"), munged.get("terminationGracePeriodSeconds")
    if isinstance(old_grace, int) and old_grace < 0 and new_grace == 1:
        munged["terminationGracePeriodSeconds"] = old_grace
    if munged == old:
        return None
    changed = sorted(k for k in set(old) | set(munged) if old.get(k) != munged.get(k))
    return (
        f"Forbidden: pod updates may not change fields other than {POD_UPDATABLE}; "
        f"changed: {', '.join(f'spec.{k}' for k in changed)}"
    )
