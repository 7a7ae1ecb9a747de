"""``batch/v1`` Job as a stored built-in: defaults, validation, update rules and columns, as v1.32 has them.

The plane serves Jobs (the MPIJob launcher is one) the way kube-apiserver does:

* on create (``on_create``) the selector is generated from the Job's uid (``manualSelector``
  unset) and the template gets the four labels 1.32 writes (``batch.kubernetes.io/controller-uid``,
  ``batch.kubernetes.io/job-name`` and the legacy ``controller-uid``, ``job-name``);
* on every write (``default``) the ``SetDefaults_Job`` values: ``completions`` and ``parallelism``
  1 when both are unset, ``parallelism`` 1, ``backoffLimit`` 6, ``completionMode`` NonIndexed,
  ``suspend`` false, ``manualSelector`` false, ``podReplacementPolicy`` TerminatingOrFailed (Failed
  with a ``podFailurePolicy``), and the Job's labels taken from the template when it has none;
* ``validate`` holds the rules of ``ValidateJobSpec`` the plane needs (the template's pod spec is
  checked by ``admission`` with the pods' rules), ``update_problems`` those of
  ``ValidateJobSpecUpdate``: ``selector`` and ``completions`` immutable, ``template`` immutable
  except the scheduling directives of a suspended Job that never started (KEP-2926).

What a Job *does* (pods, status, conditions) is the job controller's (``trainyard.cluster.clients.jobs``).

Pure; callers: ``defaulting``, ``admission``, ``tables`` and ``shapes`` (by ``KEY``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import datetime
from typing import Any

from trainyard.api.labels import selector_matches
from trainyard.api.meta import Obj, parse_time
from trainyard.cluster.server.apiserver import causes
from trainyard.cluster.server.apiserver.causes import Cause

KEY = "batch/jobs"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
RESTART_POLICIES = ("OnFailure", "Never")
COMPLETION_MODES = ("NonIndexed", "Indexed")
REPLACEMENT_POLICIES = ("TerminatingOrFailed", "Failed")
DEFAULT_BACKOFF_LIMIT = 6
IMMUTABLE = "field is immutable"
# What KEP-2926 lets change in the template of a suspended Job that never started.
SCHEDULING_DIRECTIVES = ("affinity", "nodeSelector", "tolerations", "schedulingGates")


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _template(obj: Obj) -> Obj:
    template = _spec(obj).get("template")
    return template if isinstance(template, dict) else {}


def on_create(obj: Obj) -> None:
    """The job strategy's ``PrepareForCreate``: the generated selector and template labels (needs the uid)."""
    spec = obj.setdefault("spec", {})
    meta = obj.get("metadata") or {}
    uid, name = meta.get("uid", ""), meta.get("name", "")
    if spec.get("manualSelector") is not True:
        template = spec.setdefault("template", {})
        tmeta = template.get("metadata")
        if not isinstance(tmeta, dict):
            tmeta = template["metadata"] = {}
        labels = tmeta.get("labels") or {}
        # The legacy labels come first as 1.32 writes them; the prefixed ones are what the selector uses.
        labels.update({LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name, CONTROLLER_UID: uid, JOB_NAME: name})
        tmeta["labels"] = labels
        # A selector given without manualSelector is kept, and refused by ``validate`` unless generated.
        selector = spec.get("selector") if isinstance(spec.get("selector"), dict) else {}
        selector.setdefault("matchLabels", {}).setdefault(CONTROLLER_UID, uid)
        spec["selector"] = selector
    default(obj)


def default(obj: Obj) -> None:
    """``SetDefaults_Job`` in place (run on every write, as decoding does)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    if spec.get("parallelism") is None:
        spec["parallelism"] = 1
    if spec.get("backoffLimit") is None:
        spec["backoffLimit"] = DEFAULT_BACKOFF_LIMIT
    spec.setdefault("completionMode", "NonIndexed")
    if spec.get("suspend") is None:
        spec["suspend"] = False
    if spec.get("manualSelector") is None:
        spec["manualSelector"] = False
    if spec.get("podReplacementPolicy") is None:
        spec["podReplacementPolicy"] = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        # The pod template is defaulted as a pod spec is: an unset restartPolicy reads Always.
        template["spec"].setdefault("restartPolicy", "Always")
    meta = obj.setdefault("metadata", {})
    template_labels = ((template or {}).get("metadata") or {}).get("labels") if isinstance(template, dict) else None
    if not meta.get("labels") and template_labels:
        meta["labels"] = dict(template_labels)


def _nonnegative(spec: Obj, field: str) -> list[Cause]:
    value = spec.get(field)
    if isinstance(value, int) and value < 0:
        return [causes.invalid(f"spec.{field}", value, "must be greater than or equal to 0")]
    return []


def _labels_value(labels: dict[str, str]) -> str:
    inner = ", ".join(f"{causes.go_quote(k)}:{causes.go_quote(v)}" for k, v in sorted(labels.items()))
    return "map[string]string{" + inner + "}"


def _generated(obj: Obj) -> Obj:
    return {"matchLabels": {CONTROLLER_UID: (obj.get("metadata") or {}).get("uid", "")}}


def validate(obj: Obj) -> list[Cause]:
    """``ValidateJobSpec`` as far as the plane serves Jobs (the template's pod spec is checked beside it)."""
    spec = _spec(obj)
    out: list[Cause] = []
    for field in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished"):
        out += _nonnegative(spec, field)
    mode = spec.get("completionMode")
    if mode is not None and mode not in COMPLETION_MODES:
        out.append(causes.not_supported("spec.completionMode", mode, COMPLETION_MODES))
    if mode == "Indexed" and spec.get("completions") is None:
        out.append(causes.required("spec.completions", "when completion mode is Indexed"))
    replacement = spec.get("podReplacementPolicy")
    if replacement is not None and replacement not in REPLACEMENT_POLICIES:
        out.append(causes.not_supported("spec.podReplacementPolicy", replacement, REPLACEMENT_POLICIES))
    elif spec.get("podFailurePolicy") and replacement not in (None, "Failed"):
        out.append(causes.not_supported("spec.podReplacementPolicy", replacement, ("Failed",)))
    selector = spec.get("selector")
    labels = (_template(obj).get("metadata") or {}).get("labels") or {}
    if not isinstance(selector, dict) or not selector:
        out.append(causes.required("spec.selector"))
    elif not (selector.get("matchLabels") or selector.get("matchExpressions")):
        out.append(causes.invalid("spec.selector", "", "empty selector is invalid for deployment"))
    elif spec.get("manualSelector") is not True and selector != _generated(obj):
        out.append(causes.invalid("spec.selector", "", "`selector` not auto-generated"))
    elif not selector_matches(selector, labels):
        mismatch = "`selector` does not match template `labels`"
        out.append(causes.invalid("spec.template.metadata.labels", _labels_value(labels), mismatch))
    template_spec = _template(obj).get("spec")
    policy = (template_spec or {}).get("restartPolicy") if isinstance(template_spec, dict) else None
    if policy not in RESTART_POLICIES:
        out.append(causes.not_supported("spec.template.spec.restartPolicy", policy or "", RESTART_POLICIES))
    return out


def update_problems(old: Obj, new: Obj) -> list[Cause]:
    """``ValidateJobSpecUpdate``: what an update of the main resource may not change."""
    old_spec, new_spec = _spec(old), _spec(new)
    out: list[Cause] = []
    for field in ("selector", "completions"):
        if old_spec.get(field) != new_spec.get(field):
            out.append(causes.invalid(f"spec.{field}", new_spec.get(field), IMMUTABLE))
    old_template, new_template = _template(old), _template(new)
    suspended = old_spec.get("suspend") is True
    never_started = not (old.get("status") or {}).get("startTime")
    if suspended and never_started:
        # KEP-2926: the old template with the new scheduling directives must equal the new one.
        old_template = copy.deepcopy(old_template)
        old_meta = old_template.setdefault("metadata", {})
        new_meta = new_template.get("metadata") or {}
        for field in ("labels", "annotations"):
            old_meta.pop(field, None)
            if field in new_meta:
                old_meta[field] = new_meta[field]
        old_pod, new_pod = old_template.setdefault("spec", {}), new_template.get("spec") or {}
        for field in SCHEDULING_DIRECTIVES:
            old_pod.pop(field, None)
            if field in new_pod:
                old_pod[field] = new_pod[field]
    if _normal(old_template) != _normal(new_template):
        out.append(causes.invalid("spec.template", "core.PodTemplateSpec{...}", IMMUTABLE))
    return out


def _normal(template: Obj) -> Obj:
    """A template with empty maps and lists read as absent, as Go's omitempty makes them."""
    out: Obj = {}
    for key, value in template.items():
        if isinstance(value, dict):
            value = _normal(value)
        if value in (None, {}, []):
            continue
        out[key] = value
    return out


# -- kubectl get jobs ------------------------------------------------------------------------------


def _true(obj: Obj, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions if isinstance(c, dict))


def status_cell(obj: Obj) -> str:
    """printJob's STATUS: the first of Complete, Failed, Terminating, Suspended, FailureTarget, SuccessCriteriaMet."""
    if _true(obj, "Complete"):
        return "Complete"
    if _true(obj, "Failed"):
        return "Failed"
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "Terminating"
    for kind in ("Suspended", "FailureTarget", "SuccessCriteriaMet"):
        if _true(obj, kind):
            return kind
    return "Running"


def completions_cell(obj: Obj) -> str:
    spec, succeeded = _spec(obj), int((obj.get("status") or {}).get("succeeded") or 0)
    if spec.get("completions") is not None:
        return f"{succeeded}/{spec['completions']}"
    parallelism = int(spec.get("parallelism") or 0)
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def columns(
    name: Callable[[Obj, datetime], Any],
    age: Callable[[Obj, datetime], Any],
    human: Callable[[str | None, datetime], str],
) -> list[Any]:
    """The Table columns of kube-apiserver's Job printer, given ``tables``' name, age and duration helpers."""

    def duration(obj: Obj, now: datetime) -> str:
        status = obj.get("status") or {}
        start, end = status.get("startTime"), status.get("completionTime")
        if not start:
            return ""
        if not end:
            return human(start, now)
        try:
            return human(start, parse_time(end))
        except (ValueError, TypeError):
            return "<invalid>"

    def containers(obj: Obj, key: str) -> str:
        listed = (_template(obj).get("spec") or {}).get("containers") or []
        return ",".join(str(c.get(key, "")) for c in listed if isinstance(c, dict))

    def selector(obj: Obj, _: datetime) -> str:
        sel = _spec(obj).get("selector") or {}
        parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
        for expr in sel.get("matchExpressions") or []:
            op, values = expr.get("operator"), ",".join(expr.get("values") or [])
            parts.append(
                {"In": f"{expr.get('key')} in ({values})", "NotIn": f"{expr.get('key')} notin ({values})"}.get(
                    str(op), expr.get("key", "") if op == "Exists" else f"!{expr.get('key')}"
                )
            )
        return ",".join(parts) or "<none>"

    return [
        ("Name", "string", 0, name),
        ("Status", "string", 0, lambda o, _: status_cell(o)),
        ("Completions", "string", 0, lambda o, _: completions_cell(o)),
        ("Duration", "string", 0, duration),
        ("Age", "string", 0, age),
        ("Containers", "string", 1, lambda o, _: containers(o, "name")),
        ("Images", "string", 1, lambda o, _: containers(o, "image")),
        ("Selector", "string", 1, selector),
    ]


SHAPE_STATUS: dict[str, Any] = {
    "startTime": "string",
    "completionTime": "string",
    "active": "integer",
    "ready": "integer",
    "succeeded": "integer",
    "failed": "integer",
    "terminating": "integer",
    "conditions": [
        {
            "type": "string",
            "status": "string",
            "reason": "string",
            "message": "string",
            "lastProbeTime": "string",
            "lastTransitionTime": "string",
        }
    ],
    "uncountedTerminatedPods": {"succeeded": ["string"], "failed": ["string"]},
}
SPEC_SCALARS: dict[str, Any] = {
    "parallelism": "integer",
    "completions": "integer",
    "activeDeadlineSeconds": "integer",
    "backoffLimit": "integer",
    "ttlSecondsAfterFinished": "integer",
    "completionMode": "string",
    "suspend": "boolean",
    "manualSelector": "boolean",
    "podReplacementPolicy": "string",
    "selector": {"matchLabels": {"*": "string"}, "matchExpressions": ["object"]},
}
