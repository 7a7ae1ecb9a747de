"""What a delete does to an object before the store removes it, as kube-apiserver's graceful
deletion (``rest.BeforeDelete``) decides it.

``DeleteOptions.preconditions`` name the object the client means (uid) or saw (resourceVersion);
``propagationPolicy`` becomes the ``orphan`` or ``foregroundDeletion`` finalizer the garbage
collector honours; a namespace keeps the ``kubernetes`` finalizer until its content is gone.
An object with finalizers left, or a pod whose node may still run its processes
(``awaiting_node``), is only marked: ``deletionTimestamp``, a grace period, a namespace's
``Terminating`` phase, a generation bump. Anything else goes at once.

Callers: ``objects`` (delete, and any write that clears the last finalizer). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.storage import codec

TERMINAL_POD_PHASES = ("Succeeded", "Failed")


def check_preconditions(rt: ResourceType, meta: dict[str, Any], preconditions: Any) -> None:
    """``DeleteOptions.preconditions``: delete only the object the client means (uid) or saw (RV)."""
    if preconditions is None:
        return
    if not isinstance(preconditions, dict):
        raise errors.bad_request("DeleteOptions.preconditions must be an object")
    for key, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
        wanted = preconditions.get(key)
        if wanted is not None and wanted != meta.get(key):
            raise errors.conflict(
                rt,
                meta["name"],
                f"Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {meta.get(key)}",
            )


def finalizers_after(rt: ResourceType, meta: dict[str, Any], propagation: str | None) -> list[str]:
    """The object's finalizers once a delete with ``propagation`` has asked for its own."""
    finalizers = list(meta.get("finalizers") or [])
    if propagation == "Orphan" and "orphan" not in finalizers:
        finalizers.append("orphan")
    elif propagation == "Foreground" and "foregroundDeletion" not in finalizers:
        finalizers.append("foregroundDeletion")
    if rt.key == "core/namespaces":
        finalizers = finalizers or ["kubernetes"]
    return finalizers


def awaiting_node(rt: ResourceType, obj: Obj) -> bool:
    """A pod bound to a node that has not reported it finished: its processes may still run."""
    return (
        rt.key == "core/pods"
        and bool((obj.get("spec") or {}).get("nodeName"))
        and ((obj.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES)
    )


def marked(
    rt: ResourceType, current: Obj, *, finalizers: list[str], graceful: bool, grace_seconds: int | None, now: str
) -> Obj:
    """``current`` marked as being deleted (a new object): the first delete's timestamp and grace
    period stay; a graceful pod gets its own grace period unless the delete names one."""
    new: Obj = codec.clone(current)
    nm = new["metadata"]
    nm.setdefault("deletionTimestamp", now)
    if graceful:
        default_grace = (current.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
        nm.setdefault("deletionGracePeriodSeconds", default_grace if grace_seconds is None else grace_seconds)
    else:
        nm.setdefault("deletionGracePeriodSeconds", 0)
    if finalizers:
        nm["finalizers"] = finalizers
    if rt.key == "core/namespaces":
        new.setdefault("status", {})["phase"] = "Terminating"
    if rt.has_spec and "generation" in nm:
        nm["generation"] += 1
    return new
