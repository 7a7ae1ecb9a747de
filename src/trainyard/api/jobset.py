"""JobSet ``jobset.x-k8s.io/v1alpha2``: the CRD, its webhook's defaults and validation, its label keys.

kubernetes-sigs/jobset runs a group of batch/v1 Jobs as one unit; Kubeflow Trainer v2 builds one
JobSet per TrainJob. The embedded plane serves JobSets as a CRD it installs at start (``crd``:
a structural schema of the published type with upstream's printer columns and ``status``
subresource) and runs them with its JobSet controller (``trainyard.cluster.clients.jobsets``).

What upstream's webhook does on admission is here, pure:

* ``default``: ``successPolicy.operator`` All, ``startupPolicy.startupPolicyOrder`` AnyOrder,
  ``network.enableDNSHostnames`` and ``publishNotReadyAddresses`` true, each replicated Job's
  ``completionMode`` Indexed and pod ``restartPolicy`` OnFailure, failure rules named
  ``failurePolicyRule<i>``; the CRD's own defaults (``replicas`` 1, ``groupName`` default,
  ``restartStrategy`` Recreate) come from the schema;
* ``validate``: ``ValidateCreate``'s rules the plane can meet (subdomain, managedBy, generated
  Job and pod names within 63 characters, unique replicated Job names, success-policy and
  failure-rule targets, ``dependsOn`` naming only earlier replicated Jobs) and
  ``ValidateUpdate``'s (``replicatedJobs`` and ``managedBy`` immutable, a suspended JobSet's pod
  templates may change their scheduling directives).

Callers: ``cluster.plane`` (installation), ``cluster.apiserver.writes.admission`` (webhook),
``cluster.jobsets`` (the controller's label keys and condition wording).
"""

from __future__ import annotations

import copy
import re
from typing import Any

from trainyard.api.field_errors import ErrorType, FieldError, quote
from trainyard.api.meta import Obj
from trainyard.api.validation import dns1035_problems

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
KIND = "JobSet"
PLURAL = "jobsets"
API_VERSION = f"{GROUP}/{VERSION}"
CONTROLLER_NAME = "jobset.sigs.k8s.io/jobset-controller"

# Labels and annotations on child Jobs and their pod templates (api/jobset/v1alpha2, pkg/constants).
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID = "jobset.sigs.k8s.io/jobset-uid"
REPLICATED_JOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
REPLICATED_JOB_REPLICAS = "jobset.sigs.k8s.io/replicatedjob-replicas"
GLOBAL_REPLICAS = "jobset.sigs.k8s.io/global-replicas"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_GLOBAL_INDEX = "jobset.sigs.k8s.io/job-global-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
GROUP_NAME = "jobset.sigs.k8s.io/group-name"
GROUP_REPLICAS = "jobset.sigs.k8s.io/group-replicas"
JOB_GROUP_INDEX = "jobset.sigs.k8s.io/job-group-index"
RESTARTS = "jobset.sigs.k8s.io/restart-attempt"

OPERATORS = ("All", "Any")
STARTUP_ORDERS = ("AnyOrder", "InOrder")
RESTART_STRATEGIES = ("Recreate", "BlockingRecreate")
RULE_ACTIONS = ("FailJobSet", "RestartJobSet", "RestartJobSetAndIgnoreMaxRestarts")
# ``replicatedJobs[].dependsOn[].status``: every Job of the named replicated Job Ready (ready, succeeded
# or failed) or Complete (succeeded). Up to 5 entries since JobSet v0.9 (a single one before).
DEPENDENCY_STATUSES = ("Ready", "Complete")
MAX_DEPENDS_ON = 5
MAX_MANAGED_BY = 63
IMMUTABLE = "field is immutable"
# What a suspended JobSet's pod templates may change (upstream's ValidateUpdate, as Jobs' KEP-2926).
SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")

_INT32: Obj = {"type": "integer", "format": "int32"}
_STRINGS: Obj = {"type": "array", "items": {"type": "string"}}
_EMBEDDED: Obj = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _obj(properties: Obj, **extra: Any) -> Obj:
    return {"type": "object", "properties": properties, **extra}


def _enum(values: tuple[str, ...], **extra: Any) -> Obj:
    return {"type": "string", "enum": list(values), **extra}


def schema() -> Obj:
    """The CRD's openAPIV3Schema (structural; a replicated Job's template is the batch/v1 JobTemplateSpec)."""
    replicated_job = _obj(
        {
            "name": {"type": "string"},
            "groupName": {"type": "string", "default": "default", "maxLength": 63},
            "replicas": {**_INT32, "default": 1},
            "template": _EMBEDDED,
            "dependsOn": {
                "type": "array",
                "maxItems": MAX_DEPENDS_ON,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": _obj(
                    {"name": {"type": "string"}, "status": _enum(DEPENDENCY_STATUSES)}, required=["name", "status"]
                ),
            },
        },
        required=["name", "template"],
    )
    rule = _obj(
        {
            "name": {"type": "string"},
            "action": _enum(RULE_ACTIONS),
            "onJobFailureReasons": _STRINGS,
            "onJobFailureMessagePatterns": _STRINGS,
            "targetReplicatedJobs": _STRINGS,
        },
        required=["action"],
    )
    spec = _obj(
        {
            "replicatedJobs": {"type": "array", "items": replicated_job},
            "network": _obj(
                {
                    "enableDNSHostnames": {"type": "boolean"},
                    "subdomain": {"type": "string"},
                    "publishNotReadyAddresses": {"type": "boolean"},
                }
            ),
            "successPolicy": _obj(
                {"operator": _enum(OPERATORS), "targetReplicatedJobs": _STRINGS}, required=["operator"]
            ),
            "failurePolicy": _obj(
                {
                    "maxRestarts": _INT32,
                    "restartStrategy": _enum(RESTART_STRATEGIES, default="Recreate"),
                    "rules": {"type": "array", "items": rule},
                }
            ),
            "startupPolicy": _obj({"startupPolicyOrder": _enum(STARTUP_ORDERS)}, required=["startupPolicyOrder"]),
            "suspend": {"type": "boolean"},
            "coordinator": _obj(
                {"replicatedJob": {"type": "string"}, "jobIndex": {"type": "integer"}, "podIndex": {"type": "integer"}}
            ),
            "managedBy": {"type": "string"},
            "ttlSecondsAfterFinished": _INT32,
        }
    )
    condition = _obj(
        {
            "type": {"type": "string"},
            "status": {"type": "string"},
            "observedGeneration": {"type": "integer"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "reason": {"type": "string"},
            "message": {"type": "string"},
        },
        required=["type", "status", "lastTransitionTime", "reason", "message"],
    )
    replicated_status = _obj(
        {
            "name": {"type": "string"},
            **{key: _INT32 for key in ("ready", "succeeded", "failed", "active", "suspended")},
        },
        required=["name", "ready", "succeeded", "failed", "active", "suspended"],
    )
    status = _obj(
        {
            "conditions": {"type": "array", "items": condition},
            "restarts": _INT32,
            "restartsCountTowardsMax": _INT32,
            "terminalState": {"type": "string"},
            "replicatedJobsStatus": {"type": "array", "items": replicated_status},
        }
    )
    return _obj(
        {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        }
    )


def crd() -> Obj:
    """The ``jobsets.jobset.x-k8s.io`` CRD, with upstream's printer columns."""
    columns = [
        {"name": "TerminalState", "type": "string", "jsonPath": ".status.terminalState"},
        {"name": "Restarts", "type": "string", "jsonPath": ".status.restarts"},
        {"name": "Completed", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Completed")].status'},
        {"name": "Suspended", "type": "string", "jsonPath": ".spec.suspend"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": KIND, "listKind": f"{KIND}List", "plural": PLURAL, "singular": "jobset"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema()},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": columns,
                }
            ],
        },
    }


# -- names ------------------------------------------------------------------------------------------


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    """``placement.GenJobName``: ``<jobset>-<replicatedJob>-<index>``."""
    return f"{jobset}-{replicated_job}-{index}"


def subdomain(obj: Obj) -> str:
    """The headless Service's name: ``network.subdomain``, else the JobSet's name."""
    network = (obj.get("spec") or {}).get("network") or {}
    return str(network.get("subdomain") or (obj.get("metadata") or {}).get("name") or "")


# -- the webhook --------------------------------------------------------------------------------------


def default(obj: Obj) -> None:
    """The webhook's ``Default``, in place."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if not spec.get("successPolicy"):
        spec["successPolicy"] = {"operator": "All"}
    if not spec.get("startupPolicy"):
        spec["startupPolicy"] = {"startupPolicyOrder": "AnyOrder"}
    for rjob in spec.get("replicatedJobs") or []:
        template = rjob.get("template") if isinstance(rjob, dict) else None
        if not isinstance(template, dict):
            continue
        job_spec = template.setdefault("spec", {})
        if isinstance(job_spec, dict):
            if job_spec.get("completionMode") is None:
                job_spec["completionMode"] = "Indexed"
            pod = job_spec.setdefault("template", {}).setdefault("spec", {})
            if isinstance(pod, dict) and not pod.get("restartPolicy"):
                pod["restartPolicy"] = "OnFailure"
    network = spec.get("network")
    if not isinstance(network, dict):
        network = spec["network"] = {}
    for key in ("enableDNSHostnames", "publishNotReadyAddresses"):
        if network.get(key) is None:
            network[key] = True
    policy = spec.get("failurePolicy")
    if isinstance(policy, dict):
        for i, rule in enumerate(policy.get("rules") or []):
            if isinstance(rule, dict) and not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"


_PATH_CHARS = re.compile(r"^[A-Za-z0-9\-._~!$&'()*+,;=:@%/]*$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError(ErrorType.INVALID, field, f"{quote(value)}: {detail}")


def _names(spec: Obj, name: str) -> list[FieldError]:
    out: list[FieldError] = []
    seen: set[str] = set()
    for i, rjob in enumerate(spec.get("replicatedJobs") or []):
        path = f"spec.replicatedJobs[{i}]"
        rname, replicas = str(rjob.get("name") or ""), int(rjob.get("replicas") or 1)
        if rname in seen:
            out.append(FieldError(ErrorType.DUPLICATE, f"{path}.name", quote(rname)))
        seen.add(rname)
        longest = job_name(name, rname, replicas - 1)
        for problem in dns1035_problems(longest):
            if "no more than 63" in problem:
                problem = "JobSet name is too long, job names generated for this JobSet will exceed 63 characters"
            out.append(_invalid(f"{path}.name", longest, problem))
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        completions = job_spec.get("completions")
        if job_spec.get("completionMode") == "Indexed" and isinstance(completions, int):
            pod = f"{longest}-{completions - 1}-abcde"
            if len(pod) > 63:
                detail = "JobSet name is too long, pod names generated for this JobSet will exceed 63 characters"
                out.append(_invalid(f"{path}.name", longest, detail))
    return out


def _depends_on(spec: Obj) -> list[FieldError]:
    """``dependsOn`` may only name replicated Jobs that come earlier (so the first has none)."""
    out: list[FieldError] = []
    earlier: set[str] = set()
    for i, rjob in enumerate(spec.get("replicatedJobs") or []):
        deps = rjob.get("dependsOn") or []
        path = f"spec.replicatedJobs[{i}].dependsOn"
        if i == 0 and deps:
            out.append(FieldError(ErrorType.FORBIDDEN, path, "DependsOn can't be set for the first ReplicatedJob"))
        if len(deps) > MAX_DEPENDS_ON:
            out.append(FieldError(ErrorType.INVALID, path, f"must have at most {MAX_DEPENDS_ON} items"))
        for j, dep in enumerate(deps):
            target, status = str(dep.get("name") or ""), dep.get("status")
            if status not in DEPENDENCY_STATUSES:
                supported = ", ".join(f'"{v}"' for v in DEPENDENCY_STATUSES)
                detail = f"{quote(status)}: supported values: {supported}"
                out.append(FieldError(ErrorType.NOT_SUPPORTED, f"{path}[{j}].status", detail))
            if i > 0 and target not in earlier:
                detail = f"replicatedJob: {rjob.get('name')} cannot depend on replicatedJob: {target}"
                out.append(_invalid(f"{path}[{j}].name", target, detail))
        earlier.add(str(rjob.get("name") or ""))
    return out


def validate(obj: Obj, old: Obj | None = None) -> list[FieldError]:
    """``ValidateCreate`` (and, with ``old``, ``ValidateUpdate``): every problem at once."""
    spec = obj.get("spec") or {}
    name = str((obj.get("metadata") or {}).get("name") or "")
    out: list[FieldError] = []
    sub = (spec.get("network") or {}).get("subdomain")
    if sub:
        if len(sub) > 253 or not _DNS1123_SUBDOMAIN.match(sub):
            out.append(_invalid("spec.network.subdomain", sub, "must be a valid RFC 1123 subdomain"))
        for problem in dns1035_problems(sub):
            if "no more than 63" in problem:
                problem = ".spec.network.subdomain is too long, must be less than 63 characters"
            out.append(_invalid("spec.network.subdomain", sub, problem))
    manager = spec.get("managedBy")
    if manager is not None:
        prefix, slash, path = str(manager).partition("/")
        if not slash or not _DNS1123_SUBDOMAIN.match(prefix) or not _PATH_CHARS.match(path):
            out.append(_invalid("spec.managedBy", manager, 'must be a domain-prefixed path (such as "acme.io/foo")'))
        if len(str(manager)) > MAX_MANAGED_BY:
            out.append(FieldError(ErrorType.INVALID, "spec.managedBy", f"may not be more than {MAX_MANAGED_BY} bytes"))
    out += _names(spec, name)
    out += _depends_on(spec)
    rjobs = {str(r.get("name")) for r in spec.get("replicatedJobs") or []}
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in rjobs:
            detail = f"invalid replicatedJob name '{target}' does not appear in .spec.ReplicatedJobs"
            out.append(_invalid("spec.successPolicy.targetReplicatedJobs", target, detail))
    for i, rule in enumerate((spec.get("failurePolicy") or {}).get("rules") or []):
        for target in rule.get("targetReplicatedJobs") or []:
            if target not in rjobs:
                detail = (
                    f"invalid replicatedJob name '{target}' in failure policy does not appear in .spec.ReplicatedJobs"
                )
                out.append(_invalid(f"spec.failurePolicy.rules[{i}].targetReplicatedJobs", target, detail))
    if old is not None:
        out += update_problems(old, obj)
    return out


def update_problems(old: Obj, new: Obj) -> list[FieldError]:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    out: list[FieldError] = []
    if old_spec.get("managedBy") != new_spec.get("managedBy"):
        out.append(_invalid("spec.managedBy", new_spec.get("managedBy"), IMMUTABLE))
    wanted = copy.deepcopy(old_spec.get("replicatedJobs") or [])
    given = new_spec.get("replicatedJobs") or []
    if old_spec.get("suspend") is True and len(wanted) == len(given):
        # A suspended JobSet's pod templates may change labels, annotations and scheduling directives.
        for before, after in zip(wanted, given, strict=True):
            pod_before = ((before.get("template") or {}).get("spec") or {}).get("template") or {}
            pod_after = ((after.get("template") or {}).get("spec") or {}).get("template") or {}
            for key in ("labels", "annotations"):
                pod_before.setdefault("metadata", {}).pop(key, None)
                if key in (pod_after.get("metadata") or {}):
                    pod_before["metadata"][key] = pod_after["metadata"][key]
            for key in SCHEDULING_DIRECTIVES:
                pod_before.setdefault("spec", {}).pop(key, None)
                if key in (pod_after.get("spec") or {}):
                    pod_before["spec"][key] = pod_after["spec"][key]
    if _normal(wanted) != _normal(given):
        out.append(_invalid("spec.replicatedJobs", "...", IMMUTABLE))
    return out


def _normal(value: Any) -> Any:
    """Empty maps and lists read as absent, as Go's omitempty makes them."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v not in (None, {}, [])}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value
