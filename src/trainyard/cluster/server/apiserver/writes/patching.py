"""The three patch algorithms of the API server's PATCH verb.

This module owns how a patch document turns the stored object into the new one:

* `merge_patch`: `application/merge-patch+json` (RFC 7386), used by kopf, kr8s,
  `kubectl label/annotate/scale` and by `kubectl apply` for custom resources.
* `json_patch`: `application/json-patch+json` (RFC 6902) through the `jsonpatch` library;
  kopf's finalizer patches start with a `test` of the resourceVersion and rely on a failed
  test answering 422.
* `strategic_merge_patch`: `application/strategic-merge-patch+json` for built-in kinds, sent
  by `kubectl apply/patch/rollout restart` and the official Python clients. Which lists merge
  by which key comes from a hand-written table of the Kubernetes Go types (`_TYPES` below),
  since we have no Go struct tags to read it from.

Callers: the PATCH handler of the API server picks the function from the Content-Type, turns
a `PatchError` into a Status with its `code`, and validates and stores the result. Use
`supports_strategic_merge` to answer 415 for kinds without a table, as the real server does
for custom resources.

Every function returns a new object and never mutates its inputs, so the caller can keep
the stored object for the watch event and for comparing old with new. Pure: no I/O.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch

__all__ = [
    "PatchError",
    "json_patch",
    "merge_patch",
    "strategic_merge_patch",
    "supports_strategic_merge",
]


class PatchError(ValueError):
    """A patch that cannot be applied; `code` is the HTTP status the API server answers.

    400 means the patch document itself is malformed, 422 that it is well formed but cannot
    be applied to this object (a failed `test`, a path that does not exist).
    """

    def __init__(self, message: str, code: int = 400) -> None:
        super().__init__(message)
        self.code = code


JSONObject = dict[str, Any]


def _json_equal(a: object, b: object) -> bool:
    # Python says True == 1 and 1 == 1.0; JSON keeps booleans apart from numbers.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict | list) or isinstance(b, dict | list):
        return False
    return a == b


# --------------------------------------------------------------------------------------------
# RFC 7386 JSON merge patch
# --------------------------------------------------------------------------------------------


def _merge_into(target: JSONObject, patch: Mapping[str, Any], *, take: bool) -> JSONObject:
    """Merge `patch` into `target`, which the caller owns (a private deep copy); ``take``: the
    patch's values are the caller's too, and go into ``target`` as they are."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            current = target.get(key)
            target[key] = _merge_into(current if isinstance(current, dict) else {}, value, take=take)
        else:
            target[key] = value if take else copy.deepcopy(value)
    return target


def merge_patch(target: object, patch: object, *, owned: bool = False) -> object:
    """Apply an RFC 7386 merge patch: maps merge, `null` deletes, anything else replaces.

    ``owned``: the caller hands over ``target`` and ``patch`` (private copies nothing else reads):
    ``target`` is patched in place instead of deep-copied first, and takes the patch's values
    without copying them.
    """
    if not isinstance(patch, dict):
        return patch if owned else copy.deepcopy(patch)
    base: JSONObject = (target if owned else copy.deepcopy(target)) if isinstance(target, dict) else {}
    return _merge_into(base, patch, take=owned)


# --------------------------------------------------------------------------------------------
# RFC 6902 JSON patch
# --------------------------------------------------------------------------------------------

_OPERATION_MEMBERS: Mapping[str, tuple[str, ...]] = {
    "add": ("value",),
    "remove": (),
    "replace": ("value",),
    "move": ("from",),
    "copy": ("from",),
    "test": ("value",),
}


def _check_operation(index: int, operation: object) -> None:
    """Reject a structurally broken operation before anything is applied.

    The library defers some of these checks to apply time, where they would be
    indistinguishable from a document that does not fit the patch (422).
    """
    where = f"json patch operation {index}"
    if not isinstance(operation, dict):
        raise PatchError(f"{where}: must be an object, got {type(operation).__name__}")
    op = operation.get("op")
    if not isinstance(op, str) or op not in _OPERATION_MEMBERS:
        raise PatchError(f"{where}: unknown or missing op {op!r}")
    for member in ("path", *_OPERATION_MEMBERS[op]):
        if member not in operation:
            raise PatchError(f"{where} ({op}): missing member {member!r}")
        if member in ("path", "from"):
            pointer = operation[member]
            if not isinstance(pointer, str):
                raise PatchError(f"{where} ({op}): {member!r} must be a string")
            try:
                jsonpatch.JsonPointer(pointer)
            except jsonpatch.JsonPointerException as exc:
                raise PatchError(f"{where} ({op}): invalid {member!r} {pointer!r}: {exc}") from None


def json_patch(target: object, ops: object) -> object:
    """Apply an RFC 6902 patch: 400 when `ops` is not a valid patch, 422 when it does not apply."""
    if not isinstance(ops, list):
        # The Python client's CustomObjectsApi sends a dict here; the real server says 400.
        raise PatchError(f"json patch must be a JSON array of operations, got {type(ops).__name__}")
    for index, operation in enumerate(ops):
        _check_operation(index, operation)
    try:
        patch = jsonpatch.JsonPatch(ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError) as exc:
        raise PatchError(f"invalid json patch: {exc}") from None
    try:
        # apply() works on a deep copy of target and copies every inserted value.
        return patch.apply(target)
    except jsonpatch.InvalidJsonPatch as exc:
        raise PatchError(f"invalid json patch: {exc}") from None
    except jsonpatch.JsonPatchTestFailed as exc:
        raise PatchError(f"the json patch test operation failed: {exc}", 422) from None
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
        ValueError,
    ) as exc:
        raise PatchError(f"unable to apply json patch: {exc}", 422) from None


# --------------------------------------------------------------------------------------------
# Strategic merge patch: the table
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Field:
    """How one field of a Kubernetes Go type behaves under strategic merge patch.

    `type` names the entry of `_TYPES` describing the field's value (for a list: its
    elements), so nested fields are looked up by where they are, not by their name alone:
    `ports` of a Container merges by `containerPort`, `ports` of a ServiceSpec by `port`.
    """

    type: str | None = None
    merge: bool = False  # patchStrategy=merge; False is the default: replace lists whole
    merge_key: str | None = None  # None with merge=True: a set of primitives (finalizers)


def _struct(type_name: str) -> _Field:
    return _Field(type=type_name)


def _keyed(merge_key: str, element_type: str | None = None) -> _Field:
    return _Field(type=element_type, merge=True, merge_key=merge_key)


_PRIMITIVE_SET = _Field(merge=True)

_CONDITIONS = _keyed("type")

# Transcribed from the patchStrategy/patchMergeKey struct tags of k8s.io/api. Fields not
# listed keep the default behaviour: maps merge recursively, lists are replaced atomically.
_TYPES: Mapping[str, Mapping[str, _Field]] = {
    "ObjectMeta": {
        "ownerReferences": _keyed("uid"),
        "finalizers": _PRIMITIVE_SET,
    },
    "Container": {
        "ports": _keyed("containerPort"),
        "env": _keyed("name"),
        "volumeMounts": _keyed("mountPath"),
        "volumeDevices": _keyed("devicePath"),
    },
    "PodSpec": {
        "containers": _keyed("name", "Container"),
        "initContainers": _keyed("name", "Container"),
        "ephemeralContainers": _keyed("name", "Container"),
        "volumes": _keyed("name"),
        "imagePullSecrets": _keyed("name"),
        "hostAliases": _keyed("ip"),
        "topologySpreadConstraints": _keyed("topologyKey"),
        "resourceClaims": _keyed("name"),
        "schedulingGates": _keyed("name"),
    },
    "PodStatus": {
        "conditions": _CONDITIONS,
        "podIPs": _keyed("ip"),
        "hostIPs": _keyed("ip"),
    },
    "PodTemplateSpec": {"metadata": _struct("ObjectMeta"), "spec": _struct("PodSpec")},
    "WorkloadSpec": {"template": _struct("PodTemplateSpec")},
    "ConditionsStatus": {"conditions": _CONDITIONS},
    "JobTemplateSpec": {"metadata": _struct("ObjectMeta"), "spec": _struct("WorkloadSpec")},
    "CronJobSpec": {"jobTemplate": _struct("JobTemplateSpec")},
    "ServiceSpec": {"ports": _keyed("port")},
    "NodeSpec": {"podCIDRs": _PRIMITIVE_SET},
    "NodeStatus": {"conditions": _CONDITIONS, "addresses": _keyed("type")},
    # Kinds (the roots). `metadata` is ObjectMeta everywhere.
    "Pod": {"metadata": _struct("ObjectMeta"), "spec": _struct("PodSpec"), "status": _struct("PodStatus")},
    "PodTemplate": {"metadata": _struct("ObjectMeta"), "template": _struct("PodTemplateSpec")},
    "Deployment": {
        "metadata": _struct("ObjectMeta"),
        "spec": _struct("WorkloadSpec"),
        "status": _struct("ConditionsStatus"),
    },
    "Service": {
        "metadata": _struct("ObjectMeta"),
        "spec": _struct("ServiceSpec"),
        "status": _struct("ConditionsStatus"),
    },
    "Namespace": {"metadata": _struct("ObjectMeta"), "status": _struct("ConditionsStatus")},
    "Node": {
        "metadata": _struct("ObjectMeta"),
        "spec": _struct("NodeSpec"),
        "status": _struct("NodeStatus"),
    },
    "ServiceAccount": {"metadata": _struct("ObjectMeta"), "secrets": _keyed("name")},
    "CronJob": {"metadata": _struct("ObjectMeta"), "spec": _struct("CronJobSpec")},
    "ObjectWithMetadataOnly": {"metadata": _struct("ObjectMeta")},
}

# ReplicaSet, StatefulSet, DaemonSet and Job share Deployment's shape as far as merge keys
# go: a pod template under spec.template and conditions keyed by type.
_KIND_ROOTS: Mapping[str, str] = {
    "Pod": "Pod",
    "PodTemplate": "PodTemplate",
    "Deployment": "Deployment",
    "ReplicaSet": "Deployment",
    "StatefulSet": "Deployment",
    "DaemonSet": "Deployment",
    "Job": "Deployment",
    "CronJob": "CronJob",
    "Service": "Service",
    "Namespace": "Namespace",
    "Node": "Node",
    "ServiceAccount": "ServiceAccount",
    "ConfigMap": "ObjectWithMetadataOnly",
    "Secret": "ObjectWithMetadataOnly",
    "Event": "ObjectWithMetadataOnly",
    "Endpoints": "ObjectWithMetadataOnly",
    "Lease": "ObjectWithMetadataOnly",
    "Scale": "ObjectWithMetadataOnly",
    "CustomResourceDefinition": "ObjectWithMetadataOnly",
}

_NO_FIELDS: Mapping[str, _Field] = {}


def _fields_of(type_name: str | None) -> Mapping[str, _Field]:
    return _TYPES.get(type_name, _NO_FIELDS) if type_name is not None else _NO_FIELDS


def supports_strategic_merge(kind: str) -> bool:
    """Whether `kind` has a merge-key table; the real server answers 415 for the others."""
    return kind in _KIND_ROOTS


# --------------------------------------------------------------------------------------------
# Strategic merge patch: the algorithm
# --------------------------------------------------------------------------------------------

_PATCH = "$patch"
_RETAIN_KEYS = "$retainKeys"
_SET_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


def _is_directive(key: str) -> bool:
    # Only the directives are special: CRD schemas legitimately contain `$ref` and `$schema`.
    return key in (_PATCH, _RETAIN_KEYS) or key.startswith((_SET_ORDER, _DELETE_FROM))


class _Deleted:
    """Result of merging a map patch carrying `$patch: delete`: remove the map."""


_DELETED = _Deleted()


def _bad(message: str) -> PatchError:
    return PatchError(f"invalid strategic merge patch: {message}", 400)


def _merge_map(original: JSONObject, patch: Mapping[str, Any], type_name: str | None) -> JSONObject | _Deleted:
    """Merge `patch` into `original`, which the caller owns and which is modified in place."""
    if _PATCH in patch:
        directive = patch[_PATCH]
        body = {k: v for k, v in patch.items() if k != _PATCH}
        if directive == "delete":
            return _DELETED
        if directive == "replace":
            # Merging into an empty map keeps the literal content but still strips nested
            # directives, which must never end up in storage.
            return _merge_map({}, body, type_name)
        if directive != "merge":
            raise _bad(f"unknown patch type: {directive!r} in map")
        patch = body

    fields = _fields_of(type_name)

    if _RETAIN_KEYS in patch:
        retain = patch[_RETAIN_KEYS]
        if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
            raise _bad("$retainKeys must be a list of field names")
        for key, value in patch.items():
            if value is not None and not _is_directive(key) and key not in retain:
                raise _bad(f"field {key!r} is in the patch but not in $retainKeys")
        for key in [k for k in original if k not in retain]:
            del original[key]

    for key, value in patch.items():
        if _is_directive(key):
            continue
        field = fields.get(key)
        if value is None:
            original.pop(key, None)
            continue
        current = original.get(key)
        if isinstance(current, dict) and isinstance(value, dict):
            merged: object = _merge_map(current, value, field.type if field else None)
        elif isinstance(current, list) and isinstance(value, list):
            merged = _merge_list(current, value, field, _order_for(patch, key))
        else:
            merged = _fresh(value, field, _order_for(patch, key))
        if merged is _DELETED:
            original.pop(key, None)
        else:
            original[key] = merged

    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            name = key[len(_DELETE_FROM) :]
            if not isinstance(value, list):
                raise _bad(f"{key} must be a list")
            current = original.get(name)
            if isinstance(current, list):
                original[name] = [x for x in current if not any(_json_equal(x, v) for v in value)]
        elif key.startswith(_SET_ORDER):
            name = key[len(_SET_ORDER) :]
            field = fields.get(name)
            current = original.get(name)
            # Lists present in the patch were ordered while merging; this reorders a list
            # the patch only mentions in the directive.
            if name not in patch and isinstance(current, list) and field is not None and field.merge:
                order = _order_for(patch, name)
                original[name] = _ordered(current, [], current, order, field.merge_key)
    return original


def _order_for(patch: Mapping[str, Any], key: str) -> list[Any] | None:
    order = patch.get(_SET_ORDER + key)
    if order is None:
        return None
    if not isinstance(order, list):
        raise _bad(f"{_SET_ORDER}{key} must be a list")
    return order


def _fresh(value: object, field: _Field | None, order: list[Any] | None = None) -> Any:
    """A copy of a patch value going where the original has nothing to merge with."""
    if isinstance(value, dict):
        return _merge_map({}, value, field.type if field else None)
    if isinstance(value, list):
        return _merge_list([], value, field, order)
    return value


def _merge_list(original: list[Any], patch: list[Any], field: _Field | None, order: list[Any] | None) -> list[Any]:
    """Merge a patch list into an original list that the caller owns."""
    key = field.merge_key if field is not None else None
    replace = False
    deletions: list[Any] = []
    plain: list[Any] = []
    for element in patch:
        if not (isinstance(element, dict) and _PATCH in element):
            plain.append(element)
            continue
        directive = element[_PATCH]
        rest = {k: v for k, v in element.items() if k != _PATCH}
        if directive == "delete":
            if field is not None and field.merge:
                if key is None or key not in element:
                    raise _bad(f"map: {element!r} does not contain declared merge key: {key}")
                deletions.append(element[key])
            continue
        if directive == "replace":
            replace = True
        elif directive != "merge":
            raise _bad(f"unknown patch type: {directive!r} in list element")
        # The API server discards whatever else a `$patch: replace` element carries; keeping
        # it is kinder and changes nothing for the bare `{"$patch": "replace"}` kubectl sends.
        if rest:
            plain.append(rest)

    if field is None or not field.merge:
        # Atomic list: the patch wins, minus its directives; there is no key to merge with.
        return [_fresh(element, None) for element in plain]

    if key is None:
        if any(isinstance(el, dict | list) for el in plain):
            raise _bad("a list of primitives cannot be patched with objects or lists")
    else:
        for element in plain:
            if not isinstance(element, dict) or key not in element:
                raise _bad(f"map: {element!r} does not contain declared merge key: {key}")
    if order:
        _check_order(plain, order, key)

    live = original
    if replace:
        # `{"$patch": "replace"}` makes the list exactly the other patch elements.
        base: list[Any] = []
    else:
        base = [el for el in original if not any(_json_equal(_key_of(el, key), d) for d in deletions)]

    if key is None:
        merged: list[Any] = []
        for element in [*base, *plain]:
            if not any(_json_equal(element, seen) for seen in merged):
                merged.append(element)
    else:
        merged = list(base)
        for element in plain:
            wanted = element[key]
            index = next(
                (
                    i
                    for i, el in enumerate(merged)
                    if isinstance(el, dict) and key in el and _json_equal(el[key], wanted)
                ),
                None,
            )
            if index is None:
                merged.append(_merge_map({}, element, field.type))
            else:
                merged[index] = _merge_map(merged[index], element, field.type)
    return _ordered(merged, plain, live, order, key)


def _key_of(element: object, key: str | None) -> object:
    if key is None:
        return element
    return element.get(key) if isinstance(element, dict) else element


def _check_order(plain: list[Any], order: list[Any], key: str | None) -> None:
    """The patch list must follow `$setElementOrder`, as the API server requires."""
    wanted = [_order_key(item, key) for item in order]
    position = 0
    for element in plain:
        element_key = _key_of(element, key)
        while position < len(wanted) and not _json_equal(wanted[position], element_key):
            position += 1
        if position == len(wanted):
            raise _bad(f"the order of the patch list does not match $setElementOrder: {order!r}")
        position += 1


def _order_key(item: object, key: str | None) -> object:
    if key is None:
        return item
    if not isinstance(item, dict) or key not in item:
        raise _bad(f"$setElementOrder items must be objects with the merge key {key!r}: {item!r}")
    return item[key]


def _index_in(keys: Sequence[object], wanted: object) -> int:
    for i, candidate in enumerate(keys):
        if _json_equal(candidate, wanted):
            return i
    return -1


def _ordered(
    merged: list[Any], plain: list[Any], live: list[Any], order: list[Any] | None, key: str | None
) -> list[Any]:
    """Order a merged list the way the API server does.

    Precedence: `$setElementOrder` > order of the patch list > order of the live list.
    Elements the patch names are sorted by the patch; the others keep their live order and
    are slotted back in front of the first patched element that came after them in the live
    list, so an unrelated patch leaves the list as it was.
    """
    patch_keys = [_order_key(item, key) for item in order] if order is not None else [_key_of(el, key) for el in plain]
    live_keys = [_key_of(el, key) for el in live]

    patched: list[tuple[int, Any]] = []
    server_only: list[tuple[int, Any]] = []
    for element in merged:
        element_key = _key_of(element, key)
        in_patch = _index_in(patch_keys, element_key)
        if in_patch >= 0:
            patched.append((in_patch, element))
        else:
            in_live = _index_in(live_keys, element_key)
            server_only.append((in_live if in_live >= 0 else len(live_keys), element))
    patched.sort(key=lambda pair: pair[0])
    server_only.sort(key=lambda pair: pair[0])

    result: list[Any] = []
    i = j = 0
    while i < len(server_only) and j < len(patched):
        live_index = server_only[i][0]
        patched_live_index = _index_in(live_keys, _key_of(patched[j][1], key))
        if live_index < len(live_keys) and patched_live_index >= 0 and live_index < patched_live_index:
            result.append(server_only[i][1])
            i += 1
        else:
            result.append(patched[j][1])
            j += 1
    result.extend(element for _, element in server_only[i:])
    result.extend(element for _, element in patched[j:])
    return result


def strategic_merge_patch(target: object, patch: object, *, kind: str, owned: bool = False) -> object:
    """Apply a Kubernetes strategic merge patch to an object of a built-in `kind`.

    A kind without a table is patched like a merge patch (maps merge, lists are replaced)
    while the `$` directives are still honoured and stripped. ``owned`` as in ``merge_patch``.
    """
    if not isinstance(patch, dict):
        raise PatchError(f"strategic merge patch must be a JSON object, got {type(patch).__name__}")
    base: JSONObject = (target if owned else copy.deepcopy(target)) if isinstance(target, dict) else {}
    merged = _merge_map(base, patch, _KIND_ROOTS.get(kind))
    return {} if isinstance(merged, _Deleted) else merged


# --------------------------------------------------------------------------------------------
# The same table, read by server-side apply (``fieldmanager``)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ListStrategy:
    """What a field of a built-in is, as far as field ownership goes."""

    type: str | None  # the struct type of the field's value (of its elements for a list)
    kind: str  # "atomic" | "map" (keyed list) | "set" (list of primitives)
    key: str | None = None


def root_type(kind: str) -> str | None:
    return _KIND_ROOTS.get(kind)


def field_strategy(type_name: str | None, name: str) -> ListStrategy:
    field = _fields_of(type_name).get(name)
    if field is None:
        return ListStrategy(None, "atomic")
    if field.merge and field.merge_key:
        return ListStrategy(field.type, "map", field.merge_key)
    return ListStrategy(field.type, "set" if field.merge else "atomic")
