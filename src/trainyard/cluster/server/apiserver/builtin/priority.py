"""``scheduling.k8s.io/v1`` PriorityClass: the built-in classes, their validation, and pod admission.

As kube-apiserver: the two system classes always exist; a class's ``value`` and
``preemptionPolicy`` never change; at most one class is ``globalDefault``; and when a pod is
created the Priority admission plugin resolves its ``priorityClassName`` (or the global default)
into ``spec.priority`` and ``spec.preemptionPolicy``, refusing an unknown class with 403
``no PriorityClass with name X was found``. The scheduler then orders pods by ``spec.priority``.

Pure; callers: ``objects`` (writes), ``admission`` (validation), ``plane`` (bootstrap).
"""

from __future__ import annotations

from collections.abc import Iterable

from trainyard.api.meta import Obj
from trainyard.cluster.server.apiserver import causes, errors
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "scheduling.k8s.io/priorityclasses"
HIGHEST_USER_DEFINABLE = 1_000_000_000
SYSTEM_PREFIX = "system-"
PREEMPTION_POLICIES = ("Never", "PreemptLowerPriority")
DEFAULT_PREEMPTION = "PreemptLowerPriority"
SYSTEM_CLASSES: tuple[Obj, ...] = (
    {
        "metadata": {"name": "system-cluster-critical"},
        "value": 2_000_000_000,
        "description": "Used for system critical pods that must run in the cluster, but can be moved to another "
        "node if necessary.",
        "preemptionPolicy": DEFAULT_PREEMPTION,
    },
    {
        "metadata": {"name": "system-node-critical"},
        "value": 2_000_001_000,
        "description": "Used for system critical pods that must not be moved from their current node.",
        "preemptionPolicy": DEFAULT_PREEMPTION,
    },
)
_INT32 = (-(2**31), 2**31 - 1)


def _is_system(obj: Obj) -> bool:
    name = (obj.get("metadata") or {}).get("name")
    return any(
        name == c["metadata"]["name"] and obj.get("value") == c["value"] and not obj.get("globalDefault")
        for c in SYSTEM_CLASSES
    )


def default(obj: Obj) -> None:
    """Defaults of a written PriorityClass (``preemptionPolicy``), in place."""
    obj.setdefault("preemptionPolicy", DEFAULT_PREEMPTION)


def validate(obj: Obj) -> list[Cause]:
    """The 422 causes of a PriorityClass, worded as ``ValidatePriorityClass``."""
    out: list[Cause] = []
    value = obj.get("value")
    if value is None:
        out.append(causes.required("value"))
    elif isinstance(value, bool) or not isinstance(value, int) or not _INT32[0] <= value <= _INT32[1]:
        out.append(causes.invalid("value", value, "must be a 32-bit integer"))
    elif _is_system(obj):
        pass
    elif str((obj.get("metadata") or {}).get("name", "")).startswith(SYSTEM_PREFIX):
        out.append(
            causes.forbidden(
                "metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix are reserved for system use only"
            )
        )
    elif value > HIGHEST_USER_DEFINABLE:
        out.append(
            causes.forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE}")
        )
    policy = obj.get("preemptionPolicy")
    if policy is not None and policy not in PREEMPTION_POLICIES:
        out.append(causes.not_supported("preemptionPolicy", policy, PREEMPTION_POLICIES))
    if "globalDefault" in obj and not isinstance(obj["globalDefault"], bool):
        out.append(causes.invalid("globalDefault", obj["globalDefault"], "must be a boolean"))
    return out


def update_forbidden(old: Obj, new: Obj) -> list[Cause]:
    """What an update may not change: the value and the preemption policy."""
    out = []
    if old.get("value") != new.get("value"):
        out.append(causes.forbidden("value", "may not be changed in an update."))
    if old.get("preemptionPolicy") != new.get("preemptionPolicy"):
        out.append(causes.invalid("preemptionPolicy", new.get("preemptionPolicy"), "field is immutable"))
    return out


def second_default(obj: Obj, classes: Iterable[Obj]) -> errors.ApiError | None:
    """403 when ``obj`` would be a second ``globalDefault`` class (the Priority admission plugin's check)."""
    if not obj.get("globalDefault"):
        return None
    name = obj["metadata"]["name"]
    for other in classes:
        other_name = other["metadata"]["name"]
        if other_name != name and other.get("globalDefault"):
            return errors.ApiError(
                403,
                "Forbidden",
                f'priorityclasses.scheduling.k8s.io "{name}" is forbidden: PriorityClass {other_name} is already '
                "marked as default. Only one default can exist",
                {"name": name, "group": "scheduling.k8s.io", "kind": "priorityclasses"},
            )
    return None


def admit_pod(pod: Obj, classes: Iterable[Obj]) -> None:
    """Resolve a new pod's priority in place, as the Priority admission plugin does; 403 when it cannot."""
    spec = pod.setdefault("spec", {})
    name = pod["metadata"]["name"]
    wanted = spec.get("priorityClassName") or ""
    by_name = {c["metadata"]["name"]: c for c in classes}
    if wanted:
        found = by_name.get(wanted)
        if found is None:
            raise _forbidden(name, f"no PriorityClass with name {wanted} was found")
        value, policy = int(found.get("value") or 0), found.get("preemptionPolicy") or DEFAULT_PREEMPTION
    else:
        chosen = min(
            (c for c in by_name.values() if c.get("globalDefault")),
            key=lambda c: (int(c.get("value") or 0), c["metadata"]["name"]),
            default=None,
        )
        if chosen is not None:
            spec["priorityClassName"] = chosen["metadata"]["name"]
        value = int(chosen.get("value") or 0) if chosen is not None else 0
        policy = (chosen.get("preemptionPolicy") if chosen is not None else None) or DEFAULT_PREEMPTION
    given = spec.get("priority")
    if given is not None and given != value:
        raise _forbidden(
            name,
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {value} from the given PriorityClass name",
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise _forbidden(
            name,
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; priority "
            f"admission controller computed {policy} from the given PriorityClass name",
        )
    spec["priority"] = value
    spec["preemptionPolicy"] = policy


def keep_on_update(old_spec: Obj, new_spec: Obj) -> None:
    """An update that leaves out what admission set at creation keeps it, as the plugin does."""
    for key in ("priority", "preemptionPolicy"):
        if new_spec.get(key) is None and old_spec.get(key) is not None:
            new_spec[key] = old_spec[key]


def _forbidden(pod_name: str, why: str) -> errors.ApiError:
    return errors.ApiError(
        403, "Forbidden", f'pods "{pod_name}" is forbidden: {why}', {"name": pod_name, "kind": "pods"}
    )
