"""The CRDs of Kueue's API (kueue.x-k8s.io): what a cluster with Kueue installed serves.

Names, scopes, short names and printer columns are Kueue's own (``config/components/crd/bases``),
for both served versions: v1beta1 (deprecated, with Kueue's deprecation warning) and v1beta2 (the
storage version). The schemas here are written for this plane, not Kueue's generated ones: the
fields the embedded Kueue controller reads are typed and the rest keep unknown fields, so a
manifest written for Kueue applies as written. Kueue converts between the versions with a
webhook; the plane stores objects version-free, so an object reads the same in either version
except for its ``apiVersion`` (v1beta2 renamed ``ClusterQueue.spec.cohort`` to ``cohortName``:
the controller reads either, see ``admission``).
"""

from __future__ import annotations

from trainyard.api.kueue import GROUP, STORAGE_VERSION, VERSIONS
from trainyard.api.meta import Obj

_OPEN: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
_STRING: Obj = {"type": "string"}
_INT32: Obj = {"type": "integer", "format": "int32"}
_QUANTITY: Obj = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
_DEPRECATED = "This version is deprecated. Use v1beta2 instead."


def _obj(properties: Obj, required: list[str] | None = None) -> Obj:
    out: Obj = {"type": "object", "properties": properties, "x-kubernetes-preserve-unknown-fields": True}
    if required:
        out["required"] = required
    return out


def _list(item: Obj) -> Obj:
    return {"type": "array", "items": item}


_RESOURCE_QUOTA = _obj(
    {"name": _STRING, "nominalQuota": _QUANTITY, "borrowingLimit": _QUANTITY, "lendingLimit": _QUANTITY},
    ["name", "nominalQuota"],
)
_RESOURCE_GROUP = _obj(
    {
        "coveredResources": _list(_STRING),
        "flavors": _list(_obj({"name": _STRING, "resources": _list(_RESOURCE_QUOTA)}, ["name", "resources"])),
    },
    ["coveredResources", "flavors"],
)
_CLUSTER_QUEUE_SPEC = _obj(
    {
        "cohort": _STRING,
        "cohortName": _STRING,
        "queueingStrategy": {"type": "string", "enum": ["StrictFIFO", "BestEffortFIFO"], "default": "BestEffortFIFO"},
        "namespaceSelector": _OPEN,
        "resourceGroups": _list(_RESOURCE_GROUP),
        "preemption": _obj(
            {
                "withinClusterQueue": {
                    "type": "string",
                    "enum": ["Never", "LowerPriority", "LowerOrNewerEqualPriority"],
                    "default": "Never",
                },
                "reclaimWithinCohort": {
                    "type": "string",
                    "enum": ["Never", "LowerPriority", "Any"],
                    "default": "Never",
                },
            }
        ),
        "stopPolicy": {"type": "string", "enum": ["None", "Hold", "HoldAndDrain"], "default": "None"},
    }
)
_POD_SET = _obj({"name": _STRING, "count": _INT32, "template": _OPEN, "minCount": _INT32}, ["count", "template"])
_WORKLOAD_SPEC = _obj(
    {
        "queueName": _STRING,
        "podSets": _list(_POD_SET),
        "priorityClassName": _STRING,
        "priority": _INT32,
        "priorityClassSource": _STRING,
        "active": {"type": "boolean", "default": True},
    },
    ["podSets"],
)


def _columns(*columns: tuple[str, str, str, int]) -> list[Obj]:
    out = []
    for name, path, type_, priority in columns:
        column: Obj = {"name": name, "type": type_, "jsonPath": path}
        if priority:
            column["priority"] = priority
        out.append(column)
    return out


def _crd(kind: str, plural: str, short: list[str], scope: str, spec: Obj, columns: dict[str, list[Obj]]) -> Obj:
    versions = []
    for version in VERSIONS:
        entry: Obj = {
            "name": version,
            "served": True,
            "storage": version == STORAGE_VERSION,
            "schema": {"openAPIV3Schema": _obj({"spec": spec, "status": _OPEN})},
            "subresources": {"status": {}},
        }
        if columns.get(version):
            entry["additionalPrinterColumns"] = columns[version]
        if version != STORAGE_VERSION:
            entry["deprecated"] = True
            entry["deprecationWarning"] = _DEPRECATED
        versions.append(entry)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short,
            },
            "scope": scope,
            "versions": versions,
        },
    }


def _both(columns: list[Obj]) -> dict[str, list[Obj]]:
    return dict.fromkeys(VERSIONS, columns)


def crds() -> list[Obj]:
    """Kueue's CRDs the plane serves: flavors, queues, workloads and their priority classes."""
    queue_columns = _columns(
        ("Pending Workloads", ".status.pendingWorkloads", "integer", 0),
        ("Admitted Workloads", ".status.admittedWorkloads", "integer", 1),
    )
    strategy = _columns(("Strategy", ".spec.queueingStrategy", "string", 1))
    cluster_queue_columns = {
        "v1beta1": [*_columns(("Cohort", ".spec.cohort", "string", 0)), *strategy, *queue_columns],
        "v1beta2": [*_columns(("Cohort", ".spec.cohortName", "string", 0)), *strategy, *queue_columns],
    }
    local_queue_columns = _both(
        [
            *_columns(("ClusterQueue", ".spec.clusterQueue", "string", 0)),
            *_columns(
                ("Pending Workloads", ".status.pendingWorkloads", "integer", 0),
                ("Admitted Workloads", ".status.admittedWorkloads", "integer", 0),
            ),
        ]
    )
    workload_columns = _both(
        _columns(
            ("Queue", ".spec.queueName", "string", 0),
            ("Reserved in", ".status.admission.clusterQueue", "string", 0),
            ("Admitted", ".status.conditions[?(@.type=='Admitted')].status", "string", 0),
            ("Finished", ".status.conditions[?(@.type=='Finished')].status", "string", 0),
            ("Age", ".metadata.creationTimestamp", "date", 0),
        )
    )
    flavor_spec = _obj({"nodeLabels": {"type": "object", "additionalProperties": _STRING}, "nodeTaints": _OPEN})
    priority_spec = _OPEN
    wpc = _crd("WorkloadPriorityClass", "workloadpriorityclasses", ["wpc"], "Cluster", priority_spec, {})
    for version in wpc["spec"]["versions"]:
        # value and description sit at the top level, as in PriorityClass
        version["schema"]["openAPIV3Schema"] = _obj({"value": _INT32, "description": _STRING}, ["value"])
        version["additionalPrinterColumns"] = _columns(("Value", ".value", "integer", 0))
        version.pop("subresources")
    return [
        _crd("ResourceFlavor", "resourceflavors", ["flavor", "flavors", "rf"], "Cluster", flavor_spec, {}),
        _crd("ClusterQueue", "clusterqueues", ["cq"], "Cluster", _CLUSTER_QUEUE_SPEC, cluster_queue_columns),
        _crd(
            "LocalQueue",
            "localqueues",
            ["queue", "queues", "lq"],
            "Namespaced",
            _obj({"clusterQueue": _STRING, "stopPolicy": _STRING}, ["clusterQueue"]),
            local_queue_columns,
        ),
        _crd(
            "Workload",
            "workloads",
            ["kwl", "kueueworkload", "kueueworkloads"],
            "Namespaced",
            _WORKLOAD_SPEC,
            workload_columns,
        ),
        wpc,
    ]
