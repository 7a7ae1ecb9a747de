"""The subresources that are verbs on an object, not the object itself: ``scale`` and ``pods/eviction``.

Each returns the body of its answer; ``server`` routes to them and renders it. An eviction asks
the PodDisruptionBudget that selects the pod first (``builtin.disruptionbudgets.admit_eviction``):
allowed, the budget's status is written (one disruption fewer, the pod among ``disruptedPods``)
before the pod is deleted; refused, nothing changes and the answer says why (429, retried by
kubectl drain).
"""

from __future__ import annotations

from typing import Any

from trainyard.api.disruption import selects
from trainyard.api.meta import Obj, format_time
from trainyard.cluster.server.apiserver import errors
from trainyard.cluster.server.apiserver.builtin import disruptionbudgets
from trainyard.cluster.server.apiserver.objects import Objects, patch_failure
from trainyard.cluster.server.apiserver.registry import ResourceType
from trainyard.cluster.server.apiserver.requests import bodies
from trainyard.cluster.server.apiserver.requests.deleting import checked_delete_options
from trainyard.cluster.server.apiserver.requests.incoming import ApiRequest
from trainyard.cluster.server.apiserver.requests.jsonpath import get_path, set_path
from trainyard.cluster.server.apiserver.requests.writing import WriteOptions
from trainyard.cluster.server.apiserver.writes import patching


async def scale(objects: Objects, request: ApiRequest, rt: ResourceType, namespace: str, name: str) -> Obj:
    """``<resource>/scale``: the Scale of an object whose kind names its replicas' paths; read, put or patched."""
    paths = rt.scale or {}
    obj = objects.get(rt, namespace, name)

    def scale_of(o: Obj) -> Obj:
        return {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: o["metadata"][k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in o["metadata"]
            },
            "spec": {"replicas": get_path(o, paths["specReplicasPath"]) or 0},
            "status": {
                "replicas": get_path(o, paths.get("statusReplicasPath", ".status.replicas")) or 0,
                "selector": get_path(o, paths.get("labelSelectorPath", ".status.selector")) or "",
            },
        }

    if request.method == "GET":
        return scale_of(obj)
    current = scale_of(obj)
    wanted: Any
    if request.method == "PUT":
        wanted = bodies.decode_object(await bodies.read(request), request.content_type, ("autoscaling/v1", "Scale"))
    elif request.method == "PATCH":
        body = bodies.decode(await bodies.read(request) or b"null", "application/json", what="the patch")
        try:
            if request.content_type == "application/json-patch+json":
                wanted = patching.json_patch(current, body)
            else:
                wanted = patching.merge_patch(current, body)
        except patching.PatchError as exc:
            raise patch_failure(exc) from exc
    else:
        raise errors.method_not_allowed()
    spec = wanted.get("spec") if isinstance(wanted, dict) else None
    replicas = spec.get("replicas") if isinstance(spec, dict) else None
    if type(replicas) is not int or replicas < 0:
        raise errors.invalid(
            rt,
            name,
            [
                (
                    "FieldValueInvalid",
                    "spec.replicas",
                    f"Invalid value: {replicas}: must be a non-negative integer",
                )
            ],
        )
    updated = set_path({k: v for k, v in obj.items()}, paths["specReplicasPath"], replicas)
    dry_run = request.query.get("dryRun") == "All"
    result = objects.update(rt, namespace, name, updated, options=WriteOptions(dry_run=dry_run))
    return scale_of(result)


async def evict(
    objects: Objects, request: ApiRequest, rt: ResourceType, namespace: str, name: str, dry_run: bool
) -> Obj:
    """``pods/eviction``: the pod is deleted unless its PodDisruptionBudget refuses (``_budget``)."""
    body = bodies.decode_object(await bodies.read(request), request.content_type, ("policy/v1", "Eviction"))
    if body.get("kind", "Eviction") != "Eviction":
        raise errors.bad_request(f"the body of a pods/eviction request must be an Eviction, not {body['kind']}")
    if (body.get("metadata") or {}).get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    opts = body.get("deleteOptions") or {}
    pre = opts.get("preconditions") or {} if isinstance(opts, dict) else None
    if not isinstance(pre, dict):
        raise errors.bad_request("deleteOptions and its preconditions must be objects")
    m = objects.get(rt, namespace, name)["metadata"]
    for key in ("uid", "resourceVersion"):
        if pre.get(key) and pre[key] != m.get(key):
            why = f"Precondition failed: {key}: {pre[key]}, {key} in object meta: {m.get(key)}"
            raise errors.conflict(rt, name, why)
    opts = checked_delete_options(opts)
    dry_run = dry_run or "All" in opts.get("dryRun", ())
    _budget(objects, objects.get(rt, namespace, name), dry_run)
    objects.delete(
        rt,
        namespace,
        name,
        propagation=opts.get("propagationPolicy"),
        grace_seconds=opts.get("gracePeriodSeconds"),
        dry_run=dry_run,
    )
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def _budget(objects: Objects, pod: Obj, dry_run: bool) -> None:
    """Take one disruption from the budget that selects ``pod``, or raise its refusal."""
    rt = objects.registry.lookup("policy", "v1", "poddisruptionbudgets")
    assert rt is not None
    namespace = pod["metadata"]["namespace"]
    budgets, _ = objects.list(rt, namespace)
    verdict = disruptionbudgets.admit_eviction(pod, budgets, format_time(objects.clock()), dry_run=dry_run)
    if verdict.code == 429:
        details = {"causes": [{"reason": "DisruptionBudget", "message": verdict.cause}]}
        raise errors.ApiError(429, "TooManyRequests", verdict.message, details)
    if verdict.code == 403:
        name = next(b["metadata"]["name"] for b in budgets if selects(b, pod))
        message = f'poddisruptionbudgets.policy "{name}" is forbidden: {verdict.message}'
        raise errors.ApiError(
            403, "Forbidden", message, {"name": name, "group": "policy", "kind": "poddisruptionbudgets"}
        )
    if verdict.code:
        raise errors.ApiError(verdict.code, "InternalError", verdict.message)
    if verdict.status is not None:
        pdb = next(b for b in budgets if selects(b, pod))
        body = {**pdb, "status": verdict.status}  # guarded by the version read: a racing eviction gets 409
        objects.update(rt, namespace, pdb["metadata"]["name"], body, subresource="status")
