"""Owned children of any namespaced kind: the one create/replace/delete diff of the pure layer.

Beside its replicas' pods and Services, a job owns objects of other kinds: the gang's PodGroup
(``gang``), whatever its plugin lists (``Framework.children``: PyTorch's HPA) and, for a kind
run by a launcher (``launched``), the plugin's companions (an MPIJob's Service, hostfile
ConfigMap and SSH Secret) and its launcher Job. ``diff`` compares the objects a job wants with
those the operator read, and says what to write:

* a wanted object that is not there is created as given, in the job's namespace and with the
  job as its controller owner (unless it names them itself);
* one the job owns is replaced when a field the job decides differs, compared after the API
  server's defaults and with quantities by value, so that a server that stores ``1000m`` as
  ``1`` does not get the object rewritten on every pass. The replacement is the object as read
  with those fields replaced: its resourceVersion makes a concurrent write a conflict (and a
  retry), and fields others set stay;
* one the job owns and no longer wants is deleted;
* an object of a wanted name that the job does not own (a user's, or an older job's that the
  garbage collector is removing), or that is being deleted, is left alone.

The fields a job decides are every top-level field of the wanted object but ``apiVersion``,
``kind``, ``metadata`` and ``status``, each replaced whole and compared as written (null and
absent alike), unless its kind's ``Shape`` (``_SHAPES``) says otherwise: which fields, which
server defaults, which quantities.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainyard.api import quantity as quantities
from trainyard.api.autoscaling import API_VERSION as HPA_API_VERSION
from trainyard.api.autoscaling import KIND as HPA_KIND
from trainyard.api.common import TrainingJob
from trainyard.api.meta import TypedObject
from trainyard.api.podgroup import SCHEDULER_PLUGINS_SCHEDULER, VOLCANO_SCHEDULER, flavour
from trainyard.controller.children import is_owned, owner_reference
from trainyard.controller.observed import Observed
from trainyard.controller.plan import ChildRef, Plan
from trainyard.frameworks.base import Child, Framework
from trainyard.kit.plans import UNTOLD, DeletionEvents

Path = tuple[str, ...]
Fields = dict[Path, Any]
"""Decided fields by path; None where the object has none."""

_NOT_DECIDED = frozenset({"apiVersion", "kind", "metadata", "status"})


def _as_written(fields: Fields) -> Fields:
    return fields


@dataclass(frozen=True)
class Shape:
    """What comparing and replacing objects of one kind must know about the API server."""

    decided: tuple[Path, ...] = ()
    """The fields the owner decides; empty: every top-level field the wanted object has."""
    normal: Callable[[Fields], Fields] = _as_written
    """The decided fields as the server stores them: its defaults set, quantities by value."""


@dataclass(frozen=True)
class Diff:
    create: tuple[TypedObject, ...] = ()
    replace: tuple[TypedObject, ...] = ()
    delete: tuple[ChildRef, ...] = ()

    def amend(self, plan: Plan) -> Plan:
        """``plan`` with these writes added."""
        if not (self.create or self.replace or self.delete):
            return plan
        written = (*plan.apply, *self.create, *self.replace)
        return dataclasses.replace(plan, apply=written, delete=(*plan.delete, *self.delete))


def _silent(name: str) -> DeletionEvents:
    return UNTOLD


def diff(
    job: TrainingJob,
    wanted: Iterable[Child],
    observed: Iterable[TypedObject],
    *,
    told: Callable[[str], DeletionEvents] = _silent,
) -> Diff:
    """What to write so that ``job`` owns ``wanted`` and nothing else among ``observed``.

    ``observed``: what the operator read of the kinds ``wanted`` may hold (an empty ``wanted``
    deletes every one the job owns); ``told``: how the deletion of a child of that name is told.
    """
    have = {_key(o): o for o in observed}
    want = [adopt(as_object(w), job) for w in wanted]
    create = tuple(w for w in want if _key(w) not in have)
    replace = tuple(
        replaced(current, w)
        for w in want
        if (current := have.get(_key(w))) is not None and _ours(current, job) and not same(current, w)
    )
    keep = {_key(w) for w in want}
    delete = tuple(
        ChildRef(o.kind or "", o.name, o.api_version or "", told(o.name))
        for key, o in have.items()
        if key not in keep and _ours(o, job)
    )
    return Diff(create, replace, delete)


def plugin_children(observed: Observed, job: TrainingJob, plugin: Framework, plan: Plan) -> Plan:
    """``plan`` (the rest of the pass) amended for what the plugin's (defaulted) job owns."""
    return diff(job, plugin.children(job), observed.of_kind(*plugin.child_kinds)).amend(plan)


def as_object(child: Child) -> TypedObject:
    return child if isinstance(child, TypedObject) else TypedObject.model_validate(dict(child))


def adopt(obj: TypedObject, job: TrainingJob) -> TypedObject:
    """``obj`` in the job's namespace and with the job as controller owner, unless it names them."""
    update: dict[str, Any] = {}
    if obj.metadata.namespace is None:
        update["namespace"] = job.namespace
    if not obj.metadata.owner_references:
        update["owner_references"] = [owner_reference(job)]
    if not update:
        return obj
    return obj.model_copy(update={"metadata": obj.metadata.model_copy(update=update)})


def same(current: TypedObject, wanted: TypedObject) -> bool:
    """Equal in every field the owner decides, once both are as the API server stores them."""
    shape = _shape(wanted)
    want = wanted.to_dict()
    paths = _decided(shape, want)
    return shape.normal(_pick(current.to_dict(), paths)) == shape.normal(_pick(want, paths))


def replaced(current: TypedObject, wanted: TypedObject) -> TypedObject:
    """``current`` as read (resourceVersion, status, others' fields) with the decided fields of ``wanted``."""
    body, want = current.to_dict(), wanted.to_dict()
    for path in _decided(_shape(wanted), want):
        _put(body, path, _get(want, path))
    return type(wanted).model_validate(body)


# -- helpers ---------------------------------------------------------------------------------------


def _key(obj: TypedObject) -> tuple[str, str, str]:
    return (obj.api_version or "").rpartition("/")[0], obj.kind or "", obj.name


def _ours(obj: TypedObject, job: TrainingJob) -> bool:
    return is_owned(obj, job) and obj.metadata.deletion_timestamp is None


def _shape(obj: TypedObject) -> Shape:
    group, kind, _ = _key(obj)
    return _SHAPES.get((group, kind), Shape())


def _decided(shape: Shape, wanted: dict[str, Any]) -> tuple[Path, ...]:
    return shape.decided or tuple((k,) for k in wanted if k not in _NOT_DECIDED)


def _get(body: dict[str, Any], path: Path) -> Any:
    node: Any = body
    for step in path:
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def _put(body: dict[str, Any], path: Path, value: Any) -> None:
    *parents, last = path
    for step in parents:
        body = body.setdefault(step, {})
    if value is None:
        body.pop(last, None)
    else:
        body[last] = value


def _pick(body: dict[str, Any], paths: Iterable[Path]) -> Fields:
    return {path: _without_nulls(_get(body, path)) for path in paths}


def _without_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_without_nulls(v) for v in node]
    return node


def _by_value(node: Any) -> Any:
    """A quantity's value (``"1500m"`` → 1.5); anything that is no quantity as it is."""
    if isinstance(node, bool) or not isinstance(node, str | int | float):
        return node
    try:
        return quantities.parse(node)[0]
    except ValueError:
        return node


# -- kinds whose server defaults or co-owners demand more ------------------------------------------

_HPA_MIN_REPLICAS = ("spec", "minReplicas")
_HPA_METRICS = ("spec", "metrics")
# kube-apiserver's default for an HPA written without metrics (autoscaling/v2 defaults).
_HPA_DEFAULT_METRICS: tuple[dict[str, Any], ...] = (
    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
)
_HPA_QUANTITY_KEYS = frozenset({"value", "averageValue"})


def _hpa(fields: Fields) -> Fields:
    """autoscaling/v2: ``minReplicas`` defaults to 1, no (or empty) ``metrics`` to 80% CPU."""
    out = dict(fields)
    if out.get(_HPA_MIN_REPLICAS) is None:
        out[_HPA_MIN_REPLICAS] = 1
    out[_HPA_METRICS] = [_metric_values(m) for m in (out.get(_HPA_METRICS) or _HPA_DEFAULT_METRICS)]
    return out


def _metric_values(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        return {k: _metric_values(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [_metric_values(v) for v in node]
    return _by_value(node) if key in _HPA_QUANTITY_KEYS else node


def _pod_group(fields: Fields) -> Fields:
    """``minResources`` is a ResourceList: quantities by value, and an empty one is none."""
    spec = dict(fields.get(("spec",)) or {})
    resources = spec.pop("minResources", None) or {}
    if resources:
        spec["minResources"] = {name: _by_value(q) for name, q in resources.items()}
    return {**fields, ("spec",): spec}


def _service(fields: Fields) -> Fields:
    """What the API server fills in when the owner wrote nothing (``publishNotReadyAddresses``)."""
    out = dict(fields)
    key = ("spec", "publishNotReadyAddresses")
    out[key] = bool(out.get(key))
    return out


_POD_GROUP = Shape(normal=_pod_group)
_SHAPES: dict[tuple[str, str], Shape] = {
    # The HPA's ``behavior`` is someone else's (a user's tuning): only what the job decides is ours.
    (HPA_API_VERSION.rpartition("/")[0], HPA_KIND): Shape(
        decided=(("spec", "scaleTargetRef"), _HPA_MIN_REPLICAS, ("spec", "maxReplicas"), _HPA_METRICS),
        normal=_hpa,
    ),
    **{(flavour(name).group, "PodGroup"): _POD_GROUP for name in (VOLCANO_SCHEDULER, SCHEDULER_PLUGINS_SCHEDULER)},
    # A Service's spec gains cluster IPs, families and defaults the server owns: only the routing is ours.
    ("", "Service"): Shape(
        decided=(("spec", "clusterIP"), ("spec", "selector"), ("spec", "publishNotReadyAddresses")), normal=_service
    ),
    # A key pair is made once and never replaced: the pods that mounted it must keep matching.
    ("", "Secret"): Shape(decided=(("type",),)),
}
