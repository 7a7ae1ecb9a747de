"""Which resources the API server serves: the built-ins, plus every established CRD.

Discovery, OpenAPI, URL routing and storage keys all read this one table, so a CRD that is
created or deleted appears or disappears everywhere at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" for the core group
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ALL_VERBS
    printer_columns: tuple[dict[str, Any], ...] | None = None
    scale: dict[str, str] | None = None
    has_spec: bool = True
    custom: bool = False
    # The version's openAPIV3Schema (custom resources only) and its CRD's selectableFields paths.
    schema: dict[str, Any] | None = field(default=None, compare=False, repr=False)
    selectable_fields: tuple[str, ...] = ()

    # Read several times per request: computed once (``cached_property`` writes the instance's
    # ``__dict__`` directly, which a frozen dataclass allows).
    @cached_property
    def key(self) -> str:
        """Storage key: group and plural, independent of the version served."""
        return f"{self.group or 'core'}/{self.plural}"

    @cached_property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """``pods`` or ``pytorchjobs.kubeflow.org``, as error messages name resources."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def _core(plural: str, singular: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType("", "v1", plural, singular, kind, namespaced, **kw)


BUILTINS = (
    _core("namespaces", "namespace", "Namespace", False, short_names=("ns",), subresources=frozenset({"status"})),
    _core(
        "pods",
        "pod",
        "Pod",
        short_names=("po",),
        categories=("all",),
        subresources=frozenset({"status", "log", "binding", "eviction"}),
    ),
    _core(
        "services",
        "service",
        "Service",
        short_names=("svc",),
        categories=("all",),
        subresources=frozenset({"status"}),
    ),
    _core("events", "event", "Event", short_names=("ev",), has_spec=False),
    _core("configmaps", "configmap", "ConfigMap", short_names=("cm",), has_spec=False),
    _core("secrets", "secret", "Secret", has_spec=False),
    _core(
        "serviceaccounts",
        "serviceaccount",
        "ServiceAccount",
        short_names=("sa",),
        has_spec=False,
        subresources=frozenset({"token"}),
    ),
    _core("nodes", "node", "Node", False, short_names=("no",), subresources=frozenset({"status"})),
    _core(
        "persistentvolumeclaims",
        "persistentvolumeclaim",
        "PersistentVolumeClaim",
        short_names=("pvc",),
        subresources=frozenset({"status"}),
    ),
    _core(
        "persistentvolumes",
        "persistentvolume",
        "PersistentVolume",
        False,
        short_names=("pv",),
        subresources=frozenset({"status"}),
    ),
    _core(
        "resourcequotas",
        "resourcequota",
        "ResourceQuota",
        short_names=("quota",),
        subresources=frozenset({"status"}),
    ),
    _core("limitranges", "limitrange", "LimitRange", short_names=("limits",)),
    ResourceType(
        "storage.k8s.io", "v1", "storageclasses", "storageclass", "StorageClass", False, ("sc",), has_spec=False
    ),
    ResourceType(
        "scheduling.k8s.io",
        "v1",
        "priorityclasses",
        "priorityclass",
        "PriorityClass",
        False,
        short_names=("pc",),
        has_spec=False,
    ),
    ResourceType("coordination.k8s.io", "v1", "leases", "lease", "Lease", True),
    ResourceType(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "poddisruptionbudget",
        "PodDisruptionBudget",
        True,
        short_names=("pdb",),
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        "autoscaling",
        "v2",
        "horizontalpodautoscalers",
        "horizontalpodautoscaler",
        "HorizontalPodAutoscaler",
        True,
        short_names=("hpa",),
        categories=("all",),
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        "batch",
        "v1",
        "jobs",
        "job",
        "Job",
        True,
        categories=("all",),
        subresources=frozenset({"status"}),
    ),
    ResourceType(
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "customresourcedefinition",
        "CustomResourceDefinition",
        False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        subresources=frozenset({"status"}),
    ),
)


def from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subs = version.get("subresources") or {}
        out.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                singular=names.get("singular") or names["kind"].lower(),
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=frozenset(k for k in ("status", "scale") if k in subs),
                printer_columns=tuple(version.get("additionalPrinterColumns") or ()),
                scale=subs.get("scale"),
                custom=True,
                schema=((version.get("schema") or {}).get("openAPIV3Schema")) or None,
                selectable_fields=tuple(
                    f["jsonPath"].lstrip(".")
                    for f in version.get("selectableFields") or []
                    if isinstance(f, dict) and isinstance(f.get("jsonPath"), str)
                ),
            )
        )
    return out


@dataclass
class Registry:
    _types: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    _by_crd: dict[str, list[ResourceType]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for rt in BUILTINS:
            self._add(rt)

    def _add(self, rt: ResourceType) -> None:
        self._types[(rt.group, rt.version, rt.plural)] = rt

    def add_crd(self, crd: dict[str, Any]) -> None:
        self.remove_crd(crd["metadata"]["name"])
        types = from_crd(crd)
        self._by_crd[crd["metadata"]["name"]] = types
        for rt in types:
            self._add(rt)

    def remove_crd(self, name: str) -> None:
        for rt in self._by_crd.pop(name, []):
            self._types.pop((rt.group, rt.version, rt.plural), None)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._types.get((group, version, plural))

    def by_kind(self, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        return next((rt for rt in self if rt.group == group and rt.version == version and rt.kind == kind), None)

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(sorted(self._types.values(), key=lambda rt: (rt.group, rt.version, rt.plural)))

    def group_versions(self) -> dict[str, list[str]]:
        """Group → served versions, core group under ``""``."""
        out: dict[str, list[str]] = {}
        for rt in self:
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out
