"""Resources for the one Kubernetes client (lightkube): the classes of our kinds and of plain
kinds, their plain-dict twins for readers that keep dicts, and the small helpers every caller of
the client shares (building an object, reading one back as a dict, telling an ``ApiError``'s code).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lightkube.core.exceptions import ApiError
from lightkube.core.resource import GlobalResource, NamespacedResource
from lightkube.generic_resource import (
    GenericGlobalResource,
    GenericNamespacedResource,
    create_global_resource,
    create_namespaced_resource,
    get_generic_resource,
)

from trainyard.api.kindinfo import KindInfo
from trainyard.api.kinds import KINDS


@cache
def job_resource(info: KindInfo) -> Any:
    """The lightkube resource class of a job kind (``kubeflow.org/v1`` and friends)."""
    return create_namespaced_resource(info.group, info.version, info.kind, info.plural)


def resource_for_kind(kind: str) -> Any:
    return job_resource(KINDS[kind])


def plain_resource(group: str, version: str, kind: str, plural: str) -> Any:
    """A namespaced plain-dict resource; lightkube keeps one class per kind, so a second caller gets the first's."""
    found = get_generic_resource(f"{group}/{version}" if group else version, kind)  # type: ignore[no-untyped-call]
    return found if found is not None else create_namespaced_resource(group, version, kind, plural)


def global_resource(group: str, version: str, kind: str, plural: str) -> Any:
    """A cluster-scoped plain-dict resource, shared as ``plain_resource``'s are."""
    found = get_generic_resource(f"{group}/{version}" if group else version, kind)  # type: ignore[no-untyped-call]
    return found if found is not None else create_global_resource(group, version, kind, plural)


class _Metadata:
    """A plain object's metadata as lightkube reads it (``metadata.namespace``, ``.resourceVersion``):
    attributes over the dict, None where absent; lightkube's generic class converts the whole
    metadata (managedFields and all) into its typed model on every read instead."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Any) -> None:
        self._fields = fields if isinstance(fields, dict) else {}

    def __getattr__(self, name: str) -> Any:
        return self._fields.get(name)


@cache
def plain_twin(res: Any) -> Any:
    """A resource class at ``res``'s URL whose objects are the plain dicts of the JSON (lightkube's
    generic kind of class, not registered under ``res``'s kind: its own typed class stays the one
    lightkube decodes manifests into).

    A reader that keeps dicts (an informer) pays once for decoding, instead of once into
    lightkube's typed model and again for ``to_dict``'s walk back out of it: half the cost of a
    pod's watch event, which every informer on pods decodes.
    """
    if not isinstance(res, type) or issubclass(res, dict) or not issubclass(res, NamespacedResource | GlobalResource):
        return res  # already plain, or a subresource (``PodStatus``): left as it is
    base = GenericNamespacedResource if issubclass(res, NamespacedResource) else GenericGlobalResource
    return type(
        f"Plain{res.__name__}",
        (base,),
        {"_api_info": res._api_info, "metadata": property(lambda self: _Metadata(self.get("metadata")))},
    )


@cache
def lean_twin(res: Any) -> Any:
    """``plain_twin(res)`` whose watches, served in this process, bring objects without
    ``metadata.managedFields``: for a reader that drops them anyway (an informer, as
    controller-runtime's ``TransformStripManagedFields``), half of a pod it need not decode."""
    plain = plain_twin(res)
    if not (isinstance(plain, type) and issubclass(plain, dict)):
        return plain
    return type(f"Lean{plain.__name__}", (plain,), {"without_managed_fields": True})


def build(res: Any, body: dict[str, Any]) -> Any:
    """A lightkube object of resource ``res`` from a plain manifest."""
    return res.from_dict(body)


def selector(labels: dict[str, str]) -> dict[str, Any]:
    return dict(labels)


def to_dict(obj: Any) -> dict[str, Any]:
    return dict(obj) if isinstance(obj, dict) else obj.to_dict()


def is_status(exc: ApiError, code: int) -> bool:
    return getattr(exc.status, "code", None) == code


def quota_refusal(exc: ApiError) -> bool:
    """Whether ``exc`` is ResourceQuota admission's 403 (``exceeded quota: ...``, ``failed quota: ...``),
    which a later try may pass once the namespace's usage falls."""
    message = getattr(exc.status, "message", None) or ""
    return is_status(exc, 403) and (": exceeded quota: " in message or ": failed quota: " in message)
